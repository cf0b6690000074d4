"""The paper's Table 4 layout for one preset (N = 10 / 20 / 30; w/o batching, oxygen k = 1 / 5 / 10)
from an oxygen-bench results.json, beside the paper's Xiaomi-Robotics-0 numbers.

    python -m oxygen_ros.bench.table4 RESULTS.json [--preset xr0-tiny] [--out table4.md]

The paper's numbers (RTX 4090, Xiaomi-Robotics-0, E = 2) are quoted for comparison only: ours
are measured on whatever ran the benchmark, with the weights of the preset (random).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# arXiv 2603.14371, Tables 1 and 4 (Xiaomi-Robotics-0, E = 2, RTX 4090)
PAPER_XIAOMI = {
    "isolated_ms_n30": 562.8,
    "oxygen": {(30, 1): 5.83, (30, 5): 3.23, (30, 10): 2.03, (10, 1): 2.91, (20, 1): 4.47},
    "wo_batching": "1.07-1.16x",
}


def _find(rows: list[dict[str, Any]], **kw: Any) -> dict[str, Any] | None:
    for r in rows:
        if r.get("group") == "grid" and all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def table(results: dict[str, Any], preset: str) -> str:
    rows = [r for r in results["rows"] if r["preset"] == preset]
    if not rows:
        raise ValueError(f"no rows of preset {preset!r} in these results")
    s = max(r["S"] for r in rows)
    lines = [f"| N | isolated ms/frame (paper) | w/o batching (paper) | "
             + " | ".join(f"oxygen k={k} (paper)" for k in (1, 5, 10)) + " |",
             "|---|---|---|---|---|---|"]
    for n in (10, 20, 30):
        iso = _find(rows, mode="isolated", N=n, S=s)
        shared = _find(rows, mode="shared", N=n, S=s)
        paper_iso = f"{PAPER_XIAOMI['isolated_ms_n30']}" if n == 30 else "-"
        cells = [str(n), f"{iso['frame_ms_mean']:.1f} ({paper_iso})" if iso else f"- ({paper_iso})",
                 f"{_x(shared and shared.get('speedup'))} ({PAPER_XIAOMI['wo_batching']})"]
        for k in (1, 5, 10):
            r = _find(rows, mode="oxygen", k=k, N=n, S=s)
            paper = PAPER_XIAOMI["oxygen"].get((n, k))
            cells.append(f"{_x(r and r.get('speedup'))} ({_x(paper)})")
        lines.append("| " + " | ".join(cells) + " |")
    env = results.get("env", {})
    head = (f"Table 4 layout, preset {preset}, S={s}: ours (paper's Xiaomi-Robotics-0 on an RTX "
            f"4090 in brackets; '-' where the paper gives none). Device: "
            f"{env.get('device', env.get('cpu', '?'))}.\n\n")
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results")
    p.add_argument("--preset", default="xr0-tiny")
    p.add_argument("--out", default=None, help="write the table here too (markdown)")
    a = p.parse_args(argv)
    text = table(json.loads(Path(a.results).read_text()), a.preset)
    print(text, end="")
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
