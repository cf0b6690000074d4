#!/usr/bin/env bash
# Set up (idempotent), then run the demo. Extra arguments go to oxygen-demo:
#   bash scripts/demo.sh --help
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/setup.sh"
# shellcheck disable=SC1091
source "$REPO/scripts/env.sh"
oxygen-demo "$@"
