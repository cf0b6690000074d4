"""Seam error between consecutive action chunks (oxygen-eval, benchmarks; pure numpy).

A chunk is stamped with its observation's stamp; its step i is meant for stamp + i * dt and is
played during [stamp + i dt, stamp + (i + 1) dt) (ChunkPlayer). For consecutive chunks A, B the
seam error is the mean absolute difference between B's first `steps` steps and A's steps meant
for the same times (A[floor((s_B - s_A) / dt) + j]), over the joints and the steps both have.
A jerk at each seam is what a blend has to hide; a chunk that continues the executed one has a
small seam error.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

SEAM_STEPS = 4


def seam_errors(chunks: Sequence[tuple[float, np.ndarray]], dt: float,
                steps: int = SEAM_STEPS) -> np.ndarray:
    """(stamp seconds, [horizon, joints]) in arrival order -> one error per consecutive pair
    that overlaps in time (pairs out of order or without overlap are skipped)."""
    if not dt > 0:
        raise ValueError(f"dt must be > 0, got {dt}")
    out = []
    for (sa, a), (sb, b) in zip(chunks, chunks[1:]):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if sb < sa or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
            continue
        off = int(np.floor((sb - sa) / dt + 1e-9))
        n = min(steps, b.shape[0], a.shape[0] - off)
        if n <= 0:
            continue
        out.append(float(np.abs(b[:n] - a[off:off + n]).mean()))
    return np.asarray(out, dtype=np.float64)


def seam_error(chunks: Sequence[tuple[float, np.ndarray]], dt: float,
               steps: int = SEAM_STEPS) -> float:
    """Mean of seam_errors (NaN when no pair overlaps)."""
    e = seam_errors(chunks, dt, steps)
    return float(e.mean()) if e.size else float("nan")
