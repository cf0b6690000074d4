"""PNG plots of one evaluated run (matplotlib, Agg). Each function returns the file name written,
or None when the bag holds nothing for it."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .metrics import Evaluation  # noqa: E402


def _save(fig, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=90)
    plt.close(fig)
    return name


def _shade(ax, periods: list[tuple[float, float]], label: str) -> None:
    for i, (a, b) in enumerate(periods):
        ax.axvspan(a, max(b, a + 1e-3), color="tab:red", alpha=0.15, label=label if i == 0 else None)


def commands(ev: Evaluation, out: Path, prefix: str) -> str | None:
    s = ev.series
    if len(s.get("command_period_ms", ())) == 0:
        return None
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.2), gridspec_kw={"width_ratios": [2, 1]})
    a.plot(s["command_t"], s["command_period_ms"], ".", ms=2)
    _shade(a, s.get("hold_periods", []), "holding (stale)")
    a.set_xlabel("time (s)")
    a.set_ylabel("joint_command period (ms)")
    if s.get("hold_periods"):
        a.legend(fontsize=7)
    lat = s.get("latency_ms", np.zeros(0))
    if len(lat):
        b.hist(lat, bins=30)
    b.set_xlabel("observation -> first command (ms)")
    b.set_ylabel("chunks")
    return _save(fig, out, f"{prefix}commands.png")


def frames(ev: Evaluation, out: Path, prefix: str) -> str | None:
    s = ev.series
    if len(s.get("frame_t", ())) == 0:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.2))
    t = s["frame_t"]
    stages = s["stages"]
    if stages:
        ax.stackplot(t, *[stages[k] for k in stages], labels=[k[:-3] for k in stages], alpha=0.8)
    ax.plot(t, s["frame_ms"], "k-", lw=0.8, label="frame")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("ms")
    ax.legend(fontsize=7, ncol=4, loc="upper right")
    return _save(fig, out, f"{prefix}frames.png")


def batch_kv(ev: Evaluation, out: Path, prefix: str) -> str | None:
    s = ev.series
    if len(s.get("frame_t", ())) == 0:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.0))
    t = s["frame_t"]
    ax.step(t, s["batch"], where="post", label="active batch")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("active batch")
    ax2 = ax.twinx()
    total = np.where(s["kv_total"] > 0, s["kv_total"], 1)
    ax2.plot(t, 100.0 * s["kv_used"] / total, color="tab:orange", label="KV blocks used (%)")
    ax2.set_ylabel("KV blocks used (%)")
    ax.legend(loc="upper left", fontsize=7)
    ax2.legend(loc="upper right", fontsize=7)
    return _save(fig, out, f"{prefix}batch_kv.png")


def motion(ev: Evaluation, out: Path, prefix: str) -> str | None:
    """Command velocity per joint over time; command steps at chunk switches vs within chunks."""
    s = ev.series
    if len(s.get("motion_t", ())) == 0:
        return None
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.4), gridspec_kw={"width_ratios": [2, 1]})
    names = s["motion_names"]
    for j, n in enumerate(names):
        a.plot(s["motion_t"], s["motion_velocity"][:, j], lw=0.8, label=n)
    a.set_xlabel("time (s)")
    a.set_ylabel("command velocity (rad/s)")
    a.legend(fontsize=6, ncol=min(len(names), 6), loc="upper right")
    x = np.arange(len(names))
    seam, within = s["seam_steps"], s["within_steps"]
    if len(within):
        b.bar(x - 0.2, within.mean(axis=0), 0.4, yerr=[np.zeros(len(names)), within.max(axis=0)
                                                      - within.mean(axis=0)], label="within chunks")
    if len(seam):
        b.bar(x + 0.2, seam.mean(axis=0), 0.4, yerr=[np.zeros(len(names)), seam.max(axis=0)
                                                    - seam.mean(axis=0)], label="at chunk switches")
    b.set_xticks(x, names, rotation=45, fontsize=7)
    b.set_ylabel("|command step| (rad), mean to max")
    b.legend(fontsize=7)
    return _save(fig, out, f"{prefix}motion.png")


def make_plots(ev: Evaluation, out: Path, prefix: str = "") -> list[str]:
    files = [f(ev, out, prefix) for f in (commands, frames, batch_kv, motion)]
    plt.close("all")
    return [f for f in files if f]
