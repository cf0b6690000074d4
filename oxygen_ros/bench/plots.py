"""PNG plots (matplotlib, Agg): Pareto (fig. 4), speedup heatmaps (figs. 5, 10), arrival
patterns (fig. 7), fluctuating workload (fig. 12). Returns the file names written."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..engine.config import MODES  # noqa: E402

MB = 1024 * 1024
MARK = {"isolated": "s", "parallel": "v", "shared": "D", "oxygen": "o"}


def make_plots(results: dict, out: Path) -> list[str]:
    rows = results["rows"]
    grid = [r for r in rows if r["group"] == "grid"]
    files: list[str] = []
    for preset in results["args"]["grid_presets"]:
        pr = [r for r in grid if r["preset"] == preset]
        if pr:
            files.append(_pareto(pr, preset, out))
            files += _heatmaps(pr, preset, out)
    pt = [r for r in rows if r["group"].startswith("pattern:")]
    if pt:
        files.append(_patterns(pt, out))
    fl = [r for r in rows if r["group"] == "fluctuating"]
    if fl:
        files.append(_fluct(fl[0], out))
    plt.close("all")
    return [f for f in files if f]


def _save(fig, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def _pareto(pr: list[dict], preset: str, out: Path) -> str:
    s = max(r["S"] for r in pr)
    ks = sorted({r["k"] for r in pr if r["mode"] == "oxygen"})
    fig, axes = plt.subplots(1, len(ks), figsize=(4.2 * len(ks), 3.8), squeeze=False)
    for ax, k in zip(axes[0], ks):
        for mode in MODES:
            sel = sorted([r for r in pr if r["mode"] == mode and r["S"] == s
                          and (mode != "oxygen" or r["k"] == k)], key=lambda r: r["N"])
            if not sel:
                continue
            ax.plot([r["tokens_per_s"] for r in sel], [r["action_hz"] for r in sel],
                    marker=MARK[mode], label=mode)
            for r in sel:
                ax.annotate(f"N={r['N']}", (r["tokens_per_s"], r["action_hz"]), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")
        ax.set_title(f"{preset} k={k} S={s}")
        ax.set_xlabel("language tokens/s")
        ax.set_ylabel("action frequency (Hz)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, out, f"pareto_{preset}.png")


def _heat(ax, data, xs, ys, xlabel, ylabel, title):
    im = ax.imshow(data, cmap="viridis", origin="lower", aspect="auto")
    ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_yticks(range(len(ys)), [str(y) for y in ys])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    for i in range(len(ys)):
        for j in range(len(xs)):
            if not np.isnan(data[i, j]):
                ax.text(j, i, f"{data[i, j]:.2f}x", ha="center", va="center", fontsize=8,
                        color="w" if data[i, j] < np.nanmax(data) * 0.6 else "k")
    return im


def _heatmaps(pr: list[dict], preset: str, out: Path) -> list[str]:
    ox = [r for r in pr if r["mode"] == "oxygen" and "speedup" in r]
    if not ox:
        return []
    ss, ks, ns = (sorted({r[x] for r in ox}) for x in ("S", "k", "N"))

    def grid(xkey, xs, fixed):
        d = np.full((len(ss), len(xs)), np.nan)
        for r in ox:
            if all(r[a] == b for a, b in fixed.items()):
                d[ss.index(r["S"]), xs.index(r[xkey])] = r["speedup"]
        return d

    n = max(ns)
    fig, ax = plt.subplots(figsize=(1.3 * len(ks) + 3, 1.0 * len(ss) + 2.2))
    fig.colorbar(_heat(ax, grid("k", ks, {"N": n}), ks, ss, "k (decode steps / frame)", "S (denoise steps)",
                       f"{preset}: oxygen speedup over isolated, N={n}"), ax=ax)
    files = [_save(fig, out, f"heatmap_S_k_{preset}.png")]
    fig, axes = plt.subplots(1, len(ks), figsize=(4.2 * len(ks), 1.0 * len(ss) + 2.4), squeeze=False)
    for ax, k in zip(axes[0], ks):
        fig.colorbar(_heat(ax, grid("N", ns, {"k": k}), ns, ss, "N (tokens / request)", "S",
                           f"{preset}: speedup, k={k}"), ax=ax)
    files.append(_save(fig, out, f"heatmap_S_N_{preset}.png"))
    return files


def _patterns(pt: list[dict], out: Path) -> str:
    names = list(dict.fromkeys(r["group"].split(":")[1] for r in pt))
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(3.6 * (len(names) + 1), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for r in pt:
            if r["group"] == f"pattern:{name}" and r["mode"] == "oxygen":
                tr = r["trace"]
                x = np.arange(len(tr["batch"]))
                ax.bar(x, tr["arrivals"], color="0.75", label="arrivals")
                ax.plot(x, tr["batch"], color="C3", label="active batch")
                ax.axvline(r["warmup"] - 0.5, color="0.4", ls=":", lw=1)
        ax.set_title(name)
        ax.set_xlabel("frame")
        ax.legend(fontsize=7)
    ax = axes[0][-1]
    modes = list(dict.fromkeys(r["mode"] for r in pt))
    w = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        hz = [next((r["action_hz"] for r in pt if r["group"] == f"pattern:{n}" and r["mode"] == mode), 0)
              for n in names]
        ax.bar(np.arange(len(names)) + i * w, hz, w, label=mode)
    ax.set_xticks(np.arange(len(names)) + w * (len(modes) - 1) / 2, names, fontsize=8)
    ax.set_ylabel("action frequency (Hz)")
    ax.legend(fontsize=7)
    r0 = pt[0]
    fig.suptitle(f"arrival patterns ({r0['preset']} k={r0['k']} N={r0['N']} S={r0['S']})", fontsize=10)
    return _save(fig, out, "arrival_patterns.png")


def _fluct(r: dict, out: Path) -> str:
    tr = r["trace"]
    x = np.arange(len(tr["batch"]))
    fig, axes = plt.subplots(3, 1, figsize=(8, 6.5), sharex=True)
    axes[0].plot(x, np.array(tr["kv_bytes"]) / MB, color="C0")
    axes[0].set_ylabel("KV in use (MiB)")
    axes[1].bar(x, tr["arrivals"], color="0.75", label="arrivals")
    axes[1].plot(x, tr["batch"], color="C3", label="active batch")
    axes[1].set_ylabel("requests")
    axes[1].legend(fontsize=7)
    axes[2].plot(x, tr["frame_ms"], color="C2")
    axes[2].set_ylabel("frame ms")
    axes[2].set_xlabel("frame")
    axes[0].set_title(f"fluctuating workload ({r['preset']} oxygen k={r['k']} N={r['N']} S={r['S']})")
    return _save(fig, out, "fluctuating.png")
