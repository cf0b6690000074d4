"""oxygen-eval: evaluate recorded runs from their bags (Markdown report + PNG plots).

Reads rosbag2 folders (MCAP or sqlite3) and bare .mcap files recorded from the node (its own
recorder or `ros2 bag record`); no ROS install is needed. A truncated or unfinished bag is read
as far as it goes: the problem is printed and written into the report, the exit status is 1.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from ..bags.metrics import TYPES, Evaluation, Topics, evaluate
from ..bags.plots import make_plots
from ..bags.reader import read_bag
from ..bags.report import report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="oxygen-eval", description=__doc__)
    p.add_argument("bags", nargs="+", help="rosbag2 folders or .mcap files")
    p.add_argument("--out", default="oxygen-eval", help="folder for report.md and the plots")
    p.add_argument("--name", action="append", default=None,
                   help="a name per bag for the report (default: the bag's file name)")
    p.add_argument("--json", action="store_true", help="last stdout line: one JSON summary")
    p.add_argument("--no-plots", action="store_true")
    for role in ("command", "chunk", "stats", "memory", "answer", "diagnostics"):
        p.add_argument(f"--{role}-topic", default=None,
                       help=f"the {role} topic (default: found by message type and name)")
    args = p.parse_args(argv)
    if args.name and len(args.name) != len(args.bags):
        p.error(f"--name given {len(args.name)} times for {len(args.bags)} bags")
    return args


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def run(bags: list[str], out: Path, names: list[str] | None = None, topics: Topics | None = None,
        plots: bool = True) -> list[Evaluation]:
    out.mkdir(parents=True, exist_ok=True)
    names = names or _names(bags)
    evs, files = [], []
    for bag, name in zip(bags, names):
        ev = evaluate(read_bag(bag, types=TYPES), topics)  # images are not needed
        evs.append(ev)
        prefix = "" if len(bags) == 1 else f"{name}-"
        files.append(make_plots(ev, out, prefix) if plots else [])
    (out / "report.md").write_text(report(evs, names, files))
    return evs


def _names(bags: list[str]) -> list[str]:
    names = [Path(b.rstrip("/")).name or b for b in bags]
    return names if len(set(names)) == len(names) else [f"{i}-{n}" for i, n in enumerate(names)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    topics = Topics(args.command_topic, args.chunk_topic, args.stats_topic, args.memory_topic,
                    args.answer_topic, args.diagnostics_topic)
    out = Path(args.out)
    evs = run(args.bags, out, args.name, topics, plots=not args.no_plots)
    failed = False
    for ev in evs:
        s = ev.summary
        for e in s["errors"]:
            print(f"oxygen-eval: {e}", file=sys.stderr)
            failed = True
        print(f"{s['bag']}: {s['commands']} commands at {s['command_rate_hz']:.2f} Hz (period p50 "
              f"{s['command_period_p50_ms']:.2f} ms, p99 {s['command_period_p99_ms']:.2f} ms), "
              f"{s['action_chunks']} chunks at {s['action_rate_hz']:.2f} Hz, "
              f"{s['tokens_per_s']:.1f} tokens/s", flush=True)
    print(f"report: {out / 'report.md'}", flush=True)
    if args.json:
        sums = [_clean(ev.summary) for ev in evs]
        print(json.dumps(sums[0] if len(sums) == 1 else {"bags": sums}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
