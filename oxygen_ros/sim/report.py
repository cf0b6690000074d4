"""The evaluation's outputs: a Table-2-like markdown table and a Fig.-13-like progress plot."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .metrics import progress_curve
from .tasks import get_task


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def table(summaries: Sequence[dict[str, Any]], tasks: Sequence[str]) -> str:
    """Success rate per task [95% Wilson interval] (successes/episodes), all tasks, time to
    success (median over successful episodes, s of wall time), action rate, tokens/s, how
    often the memory text names the current stage / the task, and the completion claims'
    precision (true claims / claims; memory_table has them per task)."""
    head = ["setting", *tasks, "all tasks", "time to success (s)", "action Hz", "tokens/s",
            "memory names stage", "memory names task", "claims precise"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summaries:
        cells = [s["setting"]]
        for t in tasks:
            r = s["tasks"].get(t)
            cells.append("-" if r is None else
                         f"{_pct(r['rate'])} [{_pct(r['ci95'][0])}, {_pct(r['ci95'][1])}] "
                         f"({r['success']}/{r['n']})")
        a = s["all"]
        cells.append("-" if not a["n"] else
                     f"{_pct(a['rate'])} [{_pct(a['ci95'][0])}, {_pct(a['ci95'][1])}] ({a['success']}/{a['n']})")
        mem = s.get("memory") or {}
        cells += [_num(a["time_to_success_s"]), _num(s.get("action_rate_hz"), "{:.1f}"),
                  _num(s.get("tokens_per_s"), "{:.0f}"),
                  _pct(mem.get("names_stage")) if mem.get("count") else "-",
                  _pct(mem.get("names_task")) if mem.get("count") else "-",
                  _claims(mem)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _claims(mem: dict[str, Any]) -> str:
    """'99.0 (99/100)': precise claims in % (true/claims); '- (0)' without claims."""
    if mem.get("claims") is None:
        return "-"
    n = mem["claims"]
    if not n:
        return "- (0)"
    true = n - mem["false_claims"]
    return f"{_pct(true / n)} ({true}/{n})"


def memory_table(summaries: Sequence[dict[str, Any]], tasks: Sequence[str]) -> str:
    """Per setting and task: memory texts checked, the share naming the true stage of the scene
    they were generated from, and the completion claims' precision (a claim whose observation
    came more than metrics.CLAIM_SLACK_S before the episode's success, or in an episode that
    never succeeded, or naming another task's success, is false)."""
    head = ["setting", "task", "memory texts", "names stage", "completion claims", "claims precise",
            "false claims"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summaries:
        per = (s.get("memory") or {}).get("per_task") or {}
        for t in tasks:
            m = per.get(t)
            if not m or not m.get("count"):
                continue
            lines.append("| " + " | ".join([
                s["setting"], t, str(m["count"]), _pct(m.get("names_stage")),
                str(m.get("claims", "-")), _claims(m), str(m.get("false_claims", "-"))]) + " |")
    return "\n".join(lines) + "\n"


def progress_plot(runs: Sequence[Any], tasks: Sequence[str], path: Path, dt: float = 0.025,
                  horizon_s: float | None = None) -> Path:
    """Mean task progress against wall time since the episode's start, one line per setting,
    one panel per task (and all tasks together). `horizon_s` (default: the longest Meta-World
    task's horizon) sets the time axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    horizon = horizon_s if horizon_s is not None else max(get_task(t).horizon for t in tasks) * 0.0125
    grid = np.arange(0.0, horizon + dt, dt)
    panels = [*tasks, "all tasks"]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.0), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, panel in zip(axes, panels):
        for run in runs:
            st = [s for s in run.statuses if panel == "all tasks" or s.task == panel]
            if st:
                ax.plot(grid, progress_curve(st, grid), label=run.setting.name,
                        linestyle="--" if run.setting.mode == "expert" else "-")
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel("wall time since episode start (s)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("task progress (mean)")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
