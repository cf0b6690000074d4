"""Open-loop scoring of predicted action chunks against a reference command topic.

For a chunk predicted from the observation stamped t0, step i is meant for t0 + i*dt (the node's
convention: dt = the chunk step period, 1/chunk_rate_hz). The reference (e.g. a teleoperator's JointState commands) is
linearly interpolated at that time, joint by joint (ordered by joint names); steps outside the
reference's time span are not scored. MSE and MAE per joint (over every scored step) and per
horizon step (over joints and chunks), plus the overall numbers.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from oxygen_ros.robot.values import joint_state_to_vector

from .messages import stamp_ns


@dataclass
class Score:
    joints: list[str]
    mse: float
    mae: float
    mse_per_joint: list[float]
    mae_per_joint: list[float]
    mse_per_step: list[float]
    mae_per_step: list[float]
    steps_scored: int
    chunks_scored: int

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def reference_series(msgs: list[tuple[int, Any]], joints: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(times ns [M], values [M, J]) from JointState messages, sorted by stamp (log time if 0)."""
    rows = []
    for ts, m in msgs:
        try:
            rows.append((stamp_ns(m.header.stamp) or ts, joint_state_to_vector(m, joints)))
        except ValueError:
            continue  # a reference message without our joints is skipped
    rows.sort(key=lambda r: r[0])
    if not rows:
        return np.zeros(0, np.int64), np.zeros((0, len(joints)))
    return np.array([r[0] for r in rows], np.int64), np.stack([r[1] for r in rows]).astype(np.float64)


def score(chunks: list[tuple[int, np.ndarray]], ref_t: np.ndarray, ref_v: np.ndarray,
          dt: float, joints: Sequence[str]) -> Score:
    """chunks: (observation stamp ns, [H, J] robot units)."""
    if not chunks:
        raise ValueError("no predicted chunks to score")
    if len(ref_t) < 2:
        raise ValueError("the reference topic has fewer than 2 usable messages")
    horizon = max(c.shape[0] for _, c in chunks)
    nj = len(joints)
    sq = np.zeros((horizon, nj))
    ab = np.zeros((horizon, nj))
    n = np.zeros(horizon)
    scored_chunks = 0
    rel = (ref_t - ref_t[0]) * 1e-9  # seconds from the first reference sample: exact enough
    for t0, c in chunks:
        times = (t0 - ref_t[0]) * 1e-9 + np.arange(c.shape[0]) * dt
        ok = (times >= rel[0]) & (times <= rel[-1])
        if not ok.any():
            continue
        scored_chunks += 1
        ref = np.stack([np.interp(times[ok], rel, ref_v[:, j]) for j in range(nj)], axis=1)
        err = c[ok] - ref
        sq[ok] += err ** 2
        ab[ok] += np.abs(err)
        n[ok] += 1
    if n.sum() == 0:
        raise ValueError("no predicted step falls inside the reference topic's time span")
    per_step_n = np.where(n > 0, n, np.nan)
    return Score(
        joints=list(joints), mse=float(sq.sum() / (n.sum() * nj)), mae=float(ab.sum() / (n.sum() * nj)),
        mse_per_joint=(sq.sum(0) / n.sum()).tolist(), mae_per_joint=(ab.sum(0) / n.sum()).tolist(),
        mse_per_step=(sq.mean(1) / per_step_n).tolist(), mae_per_step=(ab.mean(1) / per_step_n).tolist(),
        steps_scored=int(n.sum()), chunks_scored=scored_chunks)


def plot(s: Score, out: Path, title: str = "") -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.2))
    steps = np.arange(len(s.mse_per_step))
    a.plot(steps, s.mse_per_step, "o-", ms=3, label="MSE")
    a.plot(steps, s.mae_per_step, "s-", ms=3, label="MAE")
    a.set_xlabel("horizon step")
    a.set_ylabel("error (robot units)")
    a.legend(fontsize=7)
    x = np.arange(len(s.joints))
    b.bar(x - 0.2, s.mse_per_joint, 0.4, label="MSE")
    b.bar(x + 0.2, s.mae_per_joint, 0.4, label="MAE")
    b.set_xticks(x, s.joints, rotation=45, fontsize=7)
    b.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out.name


def markdown(s: Score, title: str, png: str | None) -> str:
    lines = [f"# {title}", "", f"{s.chunks_scored} chunks, {s.steps_scored} steps scored; "
             f"MSE {s.mse:.6g}, MAE {s.mae:.6g}", "", "| joint | MSE | MAE |", "|---|---|---|"]
    lines += [f"| {j} | {m:.6g} | {a:.6g} |" for j, m, a in zip(s.joints, s.mse_per_joint, s.mae_per_joint)]
    lines += ["", "| step | MSE | MAE |", "|---|---|---|"]
    lines += [f"| {i} | {m:.6g} | {a:.6g} |" for i, (m, a) in enumerate(zip(s.mse_per_step, s.mae_per_step))]
    if png:
        lines += ["", f"![{png}]({png})"]
    return "\n".join(lines) + "\n"
