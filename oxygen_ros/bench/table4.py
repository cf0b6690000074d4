"""The paper's Table 4 layout (N = 10 / 20 / 30; w/o batching, oxygen k = 1 / 5 / 10) for each
preset of an oxygen-bench results.json, beside the paper's numbers for that model family, and for
StarVLA presets a comparison of E = 2, 3, 4: what each extra head costs per frame. oxygen-bench
writes it as table4.md for its grid presets; `oxygen-bench table4 RESULTS.json`
(bench/suite/table4.py) rewrites it from any results.json.

The paper's numbers (RTX 4090; Xiaomi-Robotics-0, StarVLA Qwen3VL-PI / + GR00T / + GR00T + OFT)
are quoted for comparison only: ours are measured on whatever ran the benchmark, with the
weights of the preset (random). A preset named <family>-tiny[-eE] is quoted beside <family>[-eE].
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PaperRows:
    """The paper's Tables 1 and 4 for one model (arXiv 2603.14371; RTX 4090)."""

    model: str
    isolated_ms_n30: float | None
    oxygen: dict[tuple[int, int], float] = field(default_factory=dict)  # (N, k) -> speedup
    wo_batching: str = "-"


# The paper's "w/o batching" column is quoted as the range it gives; '-' where it gives nothing.
PAPER: dict[str, PaperRows] = {
    "xr0": PaperRows("Xiaomi-Robotics-0 (E = 2)", 562.8,
                     {(30, 1): 5.83, (30, 5): 3.23, (30, 10): 2.03, (10, 1): 2.91, (20, 1): 4.47},
                     "1.07-1.16x"),
    "starvla": PaperRows("StarVLA Qwen3VL-PI (E = 2)", 478.0,
                         {(30, 1): 6.64, (30, 5): 3.60, (30, 10): 2.35}, "1.05-1.16x"),
    "starvla-e3": PaperRows("StarVLA Qwen3VL-PI + GR00T (E = 3)", None,
                            {(30, 1): 6.05, (30, 5): 3.53}, "1.05-1.16x"),
    "starvla-e4": PaperRows("StarVLA Qwen3VL-PI + GR00T + OFT (E = 4)", None,
                            {(30, 1): 6.30, (30, 5): 3.69}, "1.05-1.16x"),
}
# for the E comparison: heads by StarVLA preset, in the order they were added
STARVLA_HEADS = {"starvla": ("PI_v3", 2), "starvla-e3": ("+ GR00T", 3),
                 "starvla-e4": ("+ GR00T + OFT", 4)}


def paper_key(preset: str) -> str:
    """The paper row a preset is quoted beside: its name without "-tiny"."""
    return preset.replace("-tiny", "")


def _find(rows: list[dict[str, Any]], **kw: Any) -> dict[str, Any] | None:
    for r in rows:
        if r.get("group") == "grid" and all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _rows(results: dict[str, Any], preset: str) -> list[dict[str, Any]]:
    rows = [r for r in results["rows"] if r["preset"] == preset]
    if not rows:
        raise ValueError(f"no rows of preset {preset!r} in these results")
    return rows


def table(results: dict[str, Any], preset: str) -> str:
    rows = _rows(results, preset)
    paper = PAPER.get(paper_key(preset), PaperRows("(no paper numbers)", None))
    s = max(r["S"] for r in rows)
    lines = [f"| N | isolated ms/frame (paper) | w/o batching (paper) | "
             + " | ".join(f"oxygen k={k} (paper)" for k in (1, 5, 10)) + " |",
             "|---|---|---|---|---|---|"]
    for n in (10, 20, 30):
        iso = _find(rows, mode="isolated", N=n, S=s)
        shared = _find(rows, mode="shared", N=n, S=s)
        paper_iso = f"{paper.isolated_ms_n30}" if n == 30 and paper.isolated_ms_n30 else "-"
        cells = [str(n), f"{iso['frame_ms_mean']:.1f} ({paper_iso})" if iso else f"- ({paper_iso})",
                 f"{_x(shared and shared.get('speedup'))} ({paper.wo_batching})"]
        for k in (1, 5, 10):
            r = _find(rows, mode="oxygen", k=k, N=n, S=s)
            cells.append(f"{_x(r and r.get('speedup'))} ({_x(paper.oxygen.get((n, k)))})")
        lines.append("| " + " | ".join(cells) + " |")
    env = results.get("env", {})
    head = (f"Table 4 layout, preset {preset}, S={s}: ours (the paper's {paper.model} on an "
            f"RTX 4090 in brackets; '-' where the paper gives none). Device: "
            f"{env.get('device', env.get('cpu', '?'))}.\n\n")
    return head + "\n".join(lines) + "\n"


def action_stage_ms(rows: list[dict[str, Any]]) -> float:
    """A preset's action stage per frame (every head in turn; `stage_ms["denoise"]`): the
    median over its grid runs. The heads' work does not depend on the mode, k or N, so every
    run measures the same stage and the median steadies it against a noisy machine."""
    values = [r["stage_ms"]["denoise"] for r in rows
              if r.get("group") == "grid" and r.get("stage_ms", {}).get("denoise") is not None]
    if not values:
        raise ValueError("no grid rows with an action stage time (stage_ms.denoise)")
    return statistics.median(values)


def heads_comparison(results: dict[str, Any], presets: list[str]) -> str:
    """E = 2, 3, 4 side by side: the action stage per frame, what the added head(s) cost over
    the preset with one head fewer, the memory of the hidden states the prefill keeps for the
    heads (ModelRunner.hidden_bytes, allocated once), and oxygen's speedup at k=1, N=30 (the
    paper's in brackets)."""
    found = [p for p in presets if paper_key(p) in STARVLA_HEADS]
    found.sort(key=lambda p: STARVLA_HEADS[paper_key(p)][1])
    lines = ["| preset | heads (E) | action stage ms/frame | added head(s) ms/frame | "
             "kept hidden states MB | oxygen k=1 N=30 (paper) |", "|---|---|---|---|---|---|"]
    prev = None
    for p in found:
        rows = _rows(results, p)
        stage = action_stage_ms(rows)
        heads, e = STARVLA_HEADS[paper_key(p)]
        s = max(r["S"] for r in rows)
        r = _find(rows, mode="oxygen", k=1, N=30, S=s)
        paper = PAPER[paper_key(p)].oxygen.get((30, 1))
        added = "-" if prev is None else f"{stage - prev:+.1f}"
        hidden = rows[0].get("hidden_bytes")
        kept = "-" if hidden is None else f"{hidden / 1e6:.2f}"
        lines.append(f"| {p} | {heads} ({e}) | {stage:.1f} | {added} | {kept} | "
                     f"{_x(r and r.get('speedup'))} ({_x(paper)}) |")
        prev = stage
    return ("What each extra head costs per frame (the action stage: one prefill's hidden states "
            "read by every head in turn; median over each preset's grid runs):\n\n"
            + "\n".join(lines) + "\n")


def report(results: dict[str, Any], presets: list[str] | None = None) -> str:
    """Every preset's table (default: each preset in the results, in order), then the E
    comparison when two or more StarVLA presets are among them."""
    names = presets or list(dict.fromkeys(r["preset"] for r in results["rows"]))
    parts = [table(results, p) for p in names]
    if sum(paper_key(p) in STARVLA_HEADS for p in names) >= 2:
        parts.append(heads_comparison(results, names))
    return "\n".join(parts)
