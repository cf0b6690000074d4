"""Markdown report of one or more evaluated runs."""
from __future__ import annotations

import math
from typing import Any

from .metrics import Evaluation

# (summary key, label, format) of the comparison table and each run's headline table
ROWS = [
    ("duration_s", "duration (s)", "{:.2f}"),
    ("commands", "joint_command messages", "{}"),
    ("command_rate_hz", "command rate (Hz)", "{:.2f}"),
    ("command_period_p50_ms", "command period p50 (ms)", "{:.2f}"),
    ("command_period_p99_ms", "command period p99 (ms)", "{:.2f}"),
    ("obs_to_command_ms_p50", "observation -> command p50 (ms)", "{:.1f}"),
    ("obs_to_command_ms_p99", "observation -> command p99 (ms)", "{:.1f}"),
    ("action_chunks", "action chunks", "{}"),
    ("action_rate_hz", "action rate (Hz)", "{:.2f}"),
    ("seam_error", "chunk seam error at the ticks (mean abs, first 4 steps)", "{:.4f}"),
    ("seam_error_grid", "chunk seam error on the stamps' grid", "{:.4f}"),
    ("frames", "FrameStats messages", "{}"),
    ("frame_ms_p50", "frame p50 (ms)", "{:.1f}"),
    ("frame_ms_p99", "frame p99 (ms)", "{:.1f}"),
    ("tokens_per_s", "language tokens/s", "{:.1f}"),
    ("mean_batch", "mean active batch", "{:.2f}"),
    ("kv_blocks_peak", "KV blocks peak", "{}"),
    ("memory_finished", "memories finished", "{}"),
    ("memory_frames_p50", "memory completion p50 (frames)", "{:.1f}"),
    ("memory_s_p50", "memory completion p50 (s)", "{:.3f}"),
    ("answer_finished", "answers finished", "{}"),
    ("answer_s_p50", "answer completion p50 (s)", "{:.3f}"),
    ("hold_periods", "hold (stale) periods", "{}"),
    ("hold_s", "time holding (s)", "{:.2f}"),
    ("stale_ticks", "stale control ticks", "{}"),
    ("input_stale_periods", "input-stale periods", "{}"),
    ("command_velocity_max", "command velocity max, worst joint (rad/s)", "{:.3f}"),
    ("command_velocity_p99", "command velocity p99, worst joint (rad/s)", "{:.3f}"),
    ("command_acceleration_max", "command acceleration max (rad/s^2)", "{:.2f}"),
    ("command_jerk_max", "command jerk max (rad/s^3)", "{:.1f}"),
    ("command_seam_step_mean", "command step at chunk switches, mean (rad)", "{:.4f}"),
    ("command_within_step_mean", "command step within chunks, mean (rad)", "{:.4f}"),
    ("command_seam_jump_ratio", "seam jump (switch / within step)", "{:.2f}"),
    ("limited_ticks", "velocity/acceleration-limited ticks", "{}"),
    ("gated_chunks", "chunks refused by the start gate", "{}"),
]


def _fmt(v: Any, fmt: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return fmt.format(v)


def _setting(s: dict) -> str:
    k = s.get("k", "?") if s.get("k_min") == s.get("k_max") else f"{s.get('k_min')}..{s.get('k_max')}"
    return f"{s.get('mode', '?')} k={k} N={s.get('N', '?')} S={s.get('S', '?')}" \
        if s.get("frames") else "no FrameStats"


def comparison(evs: list[Evaluation], names: list[str]) -> list[str]:
    lines = ["| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|",
             "| setting | " + " | ".join(_setting(e.summary) for e in evs) + " |"]
    for key, label, fmt in ROWS:
        lines.append(f"| {label} | " + " | ".join(_fmt(e.summary.get(key), fmt) for e in evs) + " |")
    return lines


def run_section(ev: Evaluation, name: str, plots: list[str], max_texts: int = 40) -> list[str]:
    s = ev.summary
    lines = [f"## {name}", "", f"`{s['bag']}` ({s['storage'] or 'unknown storage'}, {s['messages']} "
             f"messages, {_setting(s)})", ""]
    if s["errors"]:
        lines += ["**Problems reading this bag** (the numbers below cover what was readable):", ""]
        lines += [f"- {e}" for e in s["errors"]] + [""]
    lines += ["| metric | value |", "|---|---|"]
    lines += [f"| {label} | {_fmt(s.get(key), fmt)} |" for key, label, fmt in ROWS]
    lines.append("")
    if s.get("stage_ms"):
        lines += ["Mean stage times per frame (ms): " + ", ".join(
            f"{k[:-3]} {v:.2f}" for k, v in s["stage_ms"].items()), ""]
    if s.get("frames") and s.get("k_min") != s.get("k_max"):
        lines += [f"k varied between {s['k_min']} and {s['k_max']} over the run.", ""]
    if s.get("other_fields"):
        lines += ["Other FrameStats fields (mean / min / max / last):", ""]
        lines += [f"- `{k}`: {v['mean']:.4g} / {v['min']:.4g} / {v['max']:.4g} / {v['last']:.4g}"
                  for k, v in s["other_fields"].items()] + [""]
    topics = ", ".join(f"{k}: `{v}`" for k, v in s["topics"].items() if v)
    lines += [f"Topics used: {topics or 'none found'}.", ""]
    lines += [f"![{p}]({p})" for p in plots] + [""]
    lines += motion_table(s)
    periods = ev.series.get("hold_periods", [])
    if periods:
        lines += ["Hold (stale observation) periods, seconds from bag start: " + ", ".join(
            f"{a:.2f}–{b:.2f}" for a, b in periods), ""]
    texts = ev.series.get("texts", [])
    if texts:
        lines += ["Language timeline (final texts; t = seconds from bag start):", "",
                  "| source t | final t | kind | frame | frames | s | text |", "|---|---|---|---|---|---|---|"]
        for r in texts[:max_texts]:
            text = r["text"].replace("|", "\\|").replace("\n", " ")[:120]
            lines.append(f"| {r['source_t']:.2f} | {r['final_t']:.2f} | {r['kind']} | {r['source_frame']} | "
                         f"{r['frames']} | {r['seconds']:.3f} | {text} |")
        if len(texts) > max_texts:
            lines.append(f"| … | | | | | | {len(texts) - max_texts} more |")
        lines.append("")
    return lines


def motion_table(s: dict) -> list[str]:
    """Per joint: command velocity / acceleration / jerk (max, p99) and the seam jump."""
    per = s.get("motion") or {}
    if not per:
        return []
    lines = ["Command motion per joint (|velocity| rad/s, |acceleration| rad/s^2, |jerk| rad/s^3; "
             "steps in rad: at chunk switches vs within chunks):", "",
             "| joint | vel max | vel p99 | acc max | acc p99 | jerk max | jerk p99 | switch step "
             "mean / max | within step mean / max |", "|---" * 9 + "|"]
    for name, m in per.items():
        f = lambda k, fmt="{:.3f}": _fmt(m.get(k), fmt)  # noqa: E731
        lines.append(f"| {name} | {f('velocity_max')} | {f('velocity_p99')} | {f('acceleration_max', '{:.2f}')} "
                     f"| {f('acceleration_p99', '{:.2f}')} | {f('jerk_max', '{:.1f}')} | {f('jerk_p99', '{:.1f}')} "
                     f"| {f('seam_step_mean', '{:.4f}')} / {f('seam_step_max', '{:.4f}')} "
                     f"| {f('within_step_mean', '{:.4f}')} / {f('within_step_max', '{:.4f}')} |")
    return lines + [""]


def report(evs: list[Evaluation], names: list[str], plots: list[list[str]]) -> str:
    lines = ["# oxygen-eval report", ""]
    if len(evs) > 1:
        lines += ["## Side by side", ""] + comparison(evs, names) + [""]
    for ev, name, pl in zip(evs, names, plots):
        lines += run_section(ev, name, pl)
    return "\n".join(lines)
