#!/usr/bin/env bash
# Set up (idempotent), then run the demo.
#   bash scripts/demo.sh              the trained simulator policy (checkpoints/sim-policy) drives
#                                     Meta-World: two episodes of each task, memory text and targets
#                                     per frame (falls back to the synthetic demo without Meta-World)
#   bash scripts/demo.sh ARGS...      oxygen-demo ARGS... (e.g. --help, or no --sim: synthetic stream)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/setup.sh"
# shellcheck disable=SC1091
source "$REPO/scripts/env.sh"
if [ "$#" -gt 0 ]; then
    exec oxygen-demo "$@"
fi
export MUJOCO_GL="${MUJOCO_GL:-osmesa}"
if reason="$(python -c 'from oxygen_ros.sim import unavailable_reason as u; print(u() or "")')" \
        && [ -z "$reason" ]; then
    exec oxygen-demo --checkpoint "$REPO/checkpoints/sim-policy" --sim all --episodes 2
fi
echo "demo.sh: the simulator cannot run here (${reason:-oxygen_ros.sim failed to import});" \
     "running the synthetic demo (random weights: its memory text is noise) instead" >&2
exec oxygen-demo
