#!/usr/bin/env bash
# Set up (idempotent), then run the test suite. Extra arguments go to pytest:
#   bash scripts/test.sh -k kv -x
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/setup.sh"
# shellcheck disable=SC1091
source "$REPO/scripts/env.sh"
cd "$REPO"
python -m pytest -q --durations=15 "$@"
