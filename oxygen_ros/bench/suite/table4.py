"""oxygen-bench table4: the paper's Table 4 layout (bench/table4.py) rewritten from any
oxygen-bench results.json (the sweep writes it as table4.md for its grid presets).

    oxygen-bench table4 RESULTS.json [--preset P ...] [--out table4.md]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from oxygen_ros.bench.table4 import report


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results")
    p.add_argument("--preset", nargs="+", default=None,
                   help="presets to tabulate (default: every preset in the results)")
    p.add_argument("--out", default=None, help="write the tables here too (markdown)")
    a = p.parse_args(argv)
    text = report(json.loads(Path(a.results).read_text()), a.preset)
    print(text, end="")
    if a.out:
        Path(a.out).write_text(text)

