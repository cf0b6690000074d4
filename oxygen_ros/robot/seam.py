"""Seam error between consecutive action chunks (oxygen-eval, benchmarks; pure numpy).

A chunk is stamped with its observation's stamp; its step i is meant for stamp + i * dt and is
played during [stamp + i dt, stamp + (i + 1) dt) (ChunkPlayer). For consecutive chunks A, B the
seam error is the mean absolute difference between B's first `steps` steps and A's steps meant
for the same times (A[floor((s_B - s_A) / dt) + j]), over the joints and the steps both have.
A jerk at each seam is what a blend has to hide; a chunk that continues the executed one has a
small seam error.

"The same times" has two readings, both computed:
- on the stamps' grid (no tick times given): B[j] against A[floor((s_B - s_A) / dt) + j], the
  step of A whose interval contains s_B + j dt;
- at the control ticks (`ticks`: the joint_command stamps): for each of the first `steps` ticks
  tau at or after s_B, B[floor((tau - s_B) / dt)] against A[floor((tau - s_A) / dt)], the steps
  both chunks command at the moment a command is actually sent.
The two differ by one step of A whenever A's step boundary falls between s_B + j dt and the
tick inside B's step j (the ticks' phase), which is about every other seam when observation and
control clocks are unrelated. For a smooth policy one step is a small difference; for a random
model, whose consecutive steps are unrelated, it is as large as two independent samples, so
only the tick reading measures whether a chunk continues what is executed (docs/rtc.md).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

SEAM_STEPS = 4


def _step(t: float | np.ndarray, stamp: float, dt: float):
    return np.floor((np.asarray(t) - stamp) / dt + 1e-9).astype(np.int64)


def seam_errors(chunks: Sequence[tuple[float, np.ndarray]], dt: float,
                steps: int = SEAM_STEPS, ticks: Sequence[float] | None = None) -> np.ndarray:
    """(stamp seconds, [horizon, joints]) in arrival order -> one error per consecutive pair
    that overlaps in time (pairs out of order or without overlap are skipped). `ticks`: the
    control tick times (sorted, seconds): align at the ticks instead of the stamps' grid."""
    if not dt > 0:
        raise ValueError(f"dt must be > 0, got {dt}")
    tick_t = None if ticks is None else np.asarray(ticks, dtype=np.float64)
    out = []
    for (sa, a), (sb, b) in zip(chunks, chunks[1:]):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if sb < sa or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
            continue
        if tick_t is None:
            jb = np.arange(steps)
            ja = _step(sb, sa, dt) + jb
        else:
            i = int(np.searchsorted(tick_t, sb - 1e-9))
            tau = tick_t[i:i + steps]
            jb, ja = _step(tau, sb, dt), _step(tau, sa, dt)
        ok = (jb < b.shape[0]) & (ja < a.shape[0]) & (jb >= 0)
        if not ok.any():
            continue
        out.append(float(np.abs(b[jb[ok]] - a[ja[ok]]).mean()))
    return np.asarray(out, dtype=np.float64)


def seam_error(chunks: Sequence[tuple[float, np.ndarray]], dt: float,
               steps: int = SEAM_STEPS, ticks: Sequence[float] | None = None) -> float:
    """Mean of seam_errors (NaN when no pair overlaps)."""
    e = seam_errors(chunks, dt, steps, ticks)
    return float(e.mean()) if e.size else float("nan")
