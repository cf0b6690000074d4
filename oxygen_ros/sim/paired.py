"""Time to success, paired by layout: two settings of one oxygen-sim eval run, compared episode
for episode (the same seed in both, both succeeded).

    oxygen-sim paired EVAL_LOG [--a SETTING] [--b SETTING]

EVAL_LOG is oxygen-sim eval's output (one line per episode: `[setting] episode N task success
T s`). Medians over different sets of successes compare different layouts (a setting that also
succeeds on hard layouts has a longer median); pairing compares like with like. Per task: the
pairs, each setting's median, the median per-episode difference (b - a, seconds; negative: b
was sooner) and in how many pairs b was sooner / later / equal. Prints JSON.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

LINE = re.compile(r"\[(?P<setting>[^\]]+)\] episode\s+(?P<episode>\d+) (?P<task>\S+)\s+"
                  r"(?P<outcome>success|timeout)\s+(?P<t>[\d.]+) s")


@dataclass(frozen=True)
class Paired:
    task: str
    pairs: int
    median_a_s: float | None
    median_b_s: float | None
    median_diff_s: float | None  # b - a
    b_sooner: int
    b_later: int
    equal: int


def read_log(lines: Iterable[str]) -> dict[str, dict[int, tuple[str, bool, float]]]:
    """setting -> episode -> (task, success, time in s)."""
    out: dict[str, dict[int, tuple[str, bool, float]]] = {}
    for line in lines:
        m = LINE.search(line)
        if m:
            out.setdefault(m["setting"], {})[int(m["episode"])] = (
                m["task"], m["outcome"] == "success", float(m["t"]))
    return out


def pair(a: dict[int, tuple[str, bool, float]], b: dict[int, tuple[str, bool, float]]
         ) -> list[Paired]:
    """Per task (in the order first seen), episodes both settings ran and succeeded."""
    tasks = list(dict.fromkeys(task for task, _, _ in a.values()))
    rows = []
    for task in tasks:
        both = [(a[e][2], b[e][2]) for e in sorted(a) if e in b and a[e][0] == task
                and b[e][0] == task and a[e][1] and b[e][1]]
        x = np.array(both, dtype=np.float64).reshape(-1, 2)
        d = np.round(x[:, 1] - x[:, 0], 9)  # times are whole sim steps: equal means equal
        med = (lambda v: round(float(np.median(v)), 6) if v.size else None)
        rows.append(Paired(task, len(both), med(x[:, 0]), med(x[:, 1]), med(d),
                           int((d < 0).sum()), int((d > 0).sum()), int((d == 0).sum())))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("log", type=Path, help="oxygen-sim eval's output")
    p.add_argument("--a", default="", help="the reference setting (default: the first in the log)")
    p.add_argument("--b", default="", help="the compared setting (default: the second)")
    args = p.parse_args(argv)
    runs = read_log(args.log.read_text().splitlines())
    names = list(runs)
    a, b = args.a or (names[0] if names else ""), args.b or (names[1] if len(names) > 1 else "")
    if a not in runs or b not in runs:
        print(f"paired: the log has settings {names}; need two (--a, --b)", file=sys.stderr)
        return 2
    print(json.dumps({"a": a, "b": b, "tasks": [asdict(r) for r in pair(runs[a], runs[b])]},
                     indent=1))
    return 0
