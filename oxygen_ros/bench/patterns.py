"""Request arrival patterns: how many language requests are asked before each frame.

Every generator is deterministic (fixed seed) so every mode sees exactly the same arrivals.
"""
from __future__ import annotations

import numpy as np

PATTERNS = ("per_frame", "bursty", "poisson", "sparse")
FLUCT_CYCLE = 119  # frames in one cycle of the fluctuating workload (the paper's fig. 12)


def arrivals(pattern: str, frames: int, seed: int = 0, rate: float = 1.0, burst: int = 4,
             sparse_every: int = 5) -> list[int]:
    """Requests per frame for `frames` frames.

    per_frame: `rate` (rounded, >= 1) requests every frame.
    bursty:    `burst` requests at once every round(burst / rate) frames (mean `rate`).
    poisson:   Poisson(rate) requests per frame (numpy Generator seeded with `seed`).
    sparse:    one request every `sparse_every` frames (mean 1 / sparse_every).
    """
    if frames < 0:
        raise ValueError("frames must be >= 0")
    if pattern == "per_frame":
        return [max(1, round(rate))] * frames
    if pattern == "bursty":
        period = max(1, round(burst / rate))
        return [burst if i % period == 0 else 0 for i in range(frames)]
    if pattern == "poisson":
        rng = np.random.default_rng(seed)
        return [int(x) for x in rng.poisson(rate, size=frames)]
    if pattern == "sparse":
        return [1 if i % sparse_every == 0 else 0 for i in range(frames)]
    raise ValueError(f"unknown arrival pattern {pattern!r}; choose from {PATTERNS}")


def fluctuating_rate(frames: int = FLUCT_CYCLE, peak: float = 2.0) -> list[float]:
    """Mean requests per frame over one cycle: idle, ramp up, plateau, half load, ramp down,
    idle (long enough for every request to finish, so memory can return to its baseline)."""
    out = []
    for i in range(frames):
        x = i / frames
        if x < 0.08 or x >= 0.80:
            r = 0.0
        elif x < 0.30:
            r = peak * (x - 0.08) / 0.22
        elif x < 0.50:
            r = peak
        elif x < 0.65:
            r = peak / 2
        else:
            r = peak / 2 * (0.80 - x) / 0.15
        out.append(r)
    return out


def fluctuating(frames: int = FLUCT_CYCLE, peak: float = 2.0) -> list[int]:
    """Integer requests per frame following fluctuating_rate (error diffusion: deterministic,
    and the running total never drifts from the running sum of the rate by a request or more)."""
    out, acc = [], 0.0
    for r in fluctuating_rate(frames, peak):
        acc += r
        n = int(acc + 1e-9)
        out.append(n)
        acc -= n
    return out
