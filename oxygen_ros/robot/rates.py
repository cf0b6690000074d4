"""Windowed event rates from monotonic stamps (pure; shared by inputs and the control loop)."""
from __future__ import annotations

import collections


def recent_rate(times: collections.deque, now: float, window: float = 2.0) -> float:
    """Events per second over the last `window` seconds of monotonic stamps."""
    recent = [t for t in list(times) if now - t < window]  # list(): atomic copy
    if len(recent) < 2:
        return 0.0
    return (len(recent) - 1) / max(recent[-1] - recent[0], 1e-6)
