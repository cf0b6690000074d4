"""oxygen-bench compare A.json B.json: two oxygen-demo --dump files, request by request and frame
by frame (bench/compare.py: greedy tokens identical but for near-ties, actions within atol).
Exit status 0 when they agree."""
from __future__ import annotations

import json
import sys

from oxygen_ros.bench.compare import compare_runs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: oxygen-bench compare A.json B.json", file=sys.stderr)
        return 2
    with open(args[0]) as fa, open(args[1]) as fb:
        result = compare_runs(json.load(fa), json.load(fb))
    print(result.summary())
    for rid, pos, margin in result.near_tie_flips:
        print(f"  near-tie flip: request {rid} at token {pos} (margin {margin:.3g})")
    for line in result.mismatches[:20]:
        print("  " + line)
    return 0 if result.ok else 1

