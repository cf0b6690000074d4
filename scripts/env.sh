# shellcheck shell=bash
# Source after scripts/setup.sh:   source scripts/env.sh
# - activates .venv (ROS 2 Kilted wheels, torch, the oxygen-* commands)
# - sources colcon's install/setup.bash (oxygen_ros.msg, lib/oxygen_ros/oxygen_node)
# - puts this source tree first on PYTHONPATH, so edits to oxygen_ros/ take effect without a
#   rebuild from any folder (oxygen_ros/__init__.py extends its __path__ to the install tree,
#   where the generated oxygen_ros.msg lives)
# - ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST unless already set (no discovery off this machine)
# Works in shells with `set -u` / `set -e` on: the caller's options are restored.

# remember the caller's -e / -u (colcon's and the venv's scripts are not nounset-safe)
_oxy_flags="$-"
set +eu
_oxy_restore() {
  case "$_oxy_flags" in *e*) set -e ;; esac
  case "$_oxy_flags" in *u*) set -u ;; esac
  unset _oxy_flags _oxy_repo
  unset -f _oxy_restore
}

_oxy_repo="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
if [ ! -x "$_oxy_repo/.venv/bin/python" ] || [ ! -f "$_oxy_repo/install/setup.bash" ]; then
  echo "env.sh: $_oxy_repo is not set up yet: run  bash scripts/setup.sh" >&2
  _oxy_restore
  return 1 2>/dev/null || exit 1
fi

# shellcheck disable=SC1091
. "$_oxy_repo/.venv/bin/activate"

# The venv is the ROS underlay (ament index of the wheels: std_msgs, rclpy, ...).
case ":${AMENT_PREFIX_PATH:-}:" in
  *":$VIRTUAL_ENV:"*) ;;
  *) export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}" ;;
esac

# shellcheck disable=SC1091
. "$_oxy_repo/install/setup.bash"

case ":${PYTHONPATH:-}:" in
  *":$_oxy_repo:"*) ;;
  *) export PYTHONPATH="$_oxy_repo${PYTHONPATH:+:$PYTHONPATH}" ;;
esac

export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export OXYGEN_ROS_ROOT="$_oxy_repo"

_oxy_restore
