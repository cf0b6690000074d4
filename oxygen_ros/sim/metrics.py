"""Closed-loop metrics (ROS-free): success intervals, progress curves, memory-text correctness."""
from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .episodes import Status
from .tasks import get_task


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a success rate (good at 0% and 100%, unlike p +- z*se)."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} not in 0..{n}")
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def progress_curve(statuses: Sequence[Status], grid: np.ndarray) -> np.ndarray:
    """Mean task progress over episodes at each time of `grid` (s since each episode's start).
    An episode counts with its newest progress at or before t; after it ended, with 1 if it
    succeeded, else its last progress (a timed-out episode does not improve)."""
    by_ep: dict[int, list[Status]] = {}
    for s in statuses:
        by_ep.setdefault(s.episode, []).append(s)
    curves = []
    for eps in by_ep.values():
        eps.sort(key=lambda s: (s.t, s.done))
        ts = [s.t for s in eps]
        vals = [1.0 if s.success else s.progress for s in eps]
        idx = np.searchsorted(ts, grid, side="right") - 1
        curves.append(np.where(idx >= 0, np.asarray(vals)[np.clip(idx, 0, None)], 0.0))
    return np.mean(curves, axis=0) if curves else np.zeros_like(grid)


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]+", "", text.lower()).strip()


@dataclass(frozen=True)
class MemoryCheck:
    text: str
    task: str  # the sim's task at the memory's source observation
    caption: str  # the sim's caption then
    names_stage: bool  # the text states that caption
    names_task: bool  # the text states one of the task's captions or its instruction


class Timeline:
    """What the sim showed when: (wall time ns, task, caption), appended in time order."""

    def __init__(self) -> None:
        self._t: list[int] = []
        self._rows: list[tuple[str, str]] = []

    def add(self, t_ns: int, task: str, caption: str) -> None:
        self._t.append(t_ns)
        self._rows.append((task, caption))

    def at(self, t_ns: int) -> tuple[str, str] | None:
        i = bisect.bisect_right(self._t, t_ns) - 1
        return self._rows[i] if i >= 0 else None


def check_memory(text: str, where: tuple[str, str]) -> MemoryCheck:
    task, caption = where
    t = get_task(task)
    said = _norm(text)
    named = {_norm(c) for c in t.captions} | {_norm(t.instruction)}
    return MemoryCheck(text, task, caption, said == _norm(caption) or _norm(caption) in said,
                       any(n and (said == n or n in said) for n in named))


def summarize_memory(checks: Iterable[MemoryCheck], top: int = 10) -> dict:
    checks = list(checks)
    counts: dict[str, int] = {}
    for c in checks:
        counts[c.text] = counts.get(c.text, 0) + 1
    common = sorted(counts.items(), key=lambda kv: -kv[1])[:top]
    n = len(checks)
    return {"count": n,
            "names_stage": sum(c.names_stage for c in checks) / n if n else None,
            "names_task": sum(c.names_task for c in checks) / n if n else None,
            "most_common": [{"text": t, "count": k} for t, k in common]}
