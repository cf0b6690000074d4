"""Closed-loop metrics (ROS-free): success intervals, progress curves, memory-text correctness."""
from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .episodes import Status
from .tasks import ALL_TASKS, get_task

# A completion claim whose observation was taken more than this before the simulator reported
# success (or in an episode that never succeeds) is false: the memory said what had not happened.
CLAIM_SLACK_S = 0.5


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
    episode: int = -1  # the sim's episode then (-1: unknown)
    stamp_ns: int = 0  # the source observation's stamp
    claimed: str | None = None  # the task whose success the text states (completion_claim)

    @property
    def claims_done(self) -> bool:
        """The text says a task is done."""
        return self.claimed is not None


@dataclass(frozen=True)
class Scene:
    """What the sim showed at one time: its task, stage caption and episode."""

    task: str
    caption: str
    episode: int = -1


class Timeline:
    """What the sim showed when: (stamp ns, task, caption, episode), appended in time order,
    and when each episode first reported success."""

    def __init__(self) -> None:
        self._t: list[int] = []
        self._rows: list[Scene] = []
        self.success_ns: dict[int, int] = {}  # episode -> stamp of its first successful status

    def add(self, t_ns: int, task: str, caption: str, episode: int = -1, success: bool = False) -> None:
        self._t.append(t_ns)
        self._rows.append(Scene(task, caption, episode))
        if success and episode not in self.success_ns:
            self.success_ns[episode] = t_ns

    def scene_at(self, t_ns: int) -> Scene | None:
        i = bisect.bisect_right(self._t, t_ns) - 1
        return self._rows[i] if i >= 0 else None

    def at(self, t_ns: int) -> tuple[str, str] | None:
        scene = self.scene_at(t_ns)
        return None if scene is None else (scene.task, scene.caption)


# Meta-World's completion claims: each task's success caption (its `done`)
DONE = {name: t.done for name, t in ALL_TASKS.items()}


def completion_claim(text: str, done: dict[str, str] | None = None) -> str | None:
    """The task whose success caption (`done`: task -> its success caption; default Meta-World's
    `done`, e.g. "the door is unlocked") the text states, or None: the text claims no completion."""
    said = _norm(text)
    for name, caption in (DONE if done is None else done).items():
        c = _norm(caption)
        if said == c or re.search(rf"\b{re.escape(c)}\b", said):
            return name
    return None


def check_memory(text: str, where: tuple[str, str] | Scene, stamp_ns: int = 0) -> MemoryCheck:
    return check_scene(text, where, stamp_ns, get_task, completion_claim(text))


def check_scene(text: str, where: tuple[str, str] | Scene, stamp_ns: int,
                task_of: Callable[[str], Any], claimed: str | None) -> MemoryCheck:
    """A memory text against the scene of its source observation: does it name that stage, or
    one of the task's stages or its instruction (`task_of`: the simulator's task lookup; its
    tasks have `captions` and `instruction`)."""
    scene = where if isinstance(where, Scene) else Scene(*where)
    task, caption = scene.task, scene.caption
    t = task_of(task)
    said = _norm(text)
    named = {_norm(c) for c in t.captions} | {_norm(t.instruction)}
    return MemoryCheck(text, task, caption, said == _norm(caption) or _norm(caption) in said,
                       any(n and (said == n or n in said) for n in named), scene.episode, stamp_ns,
                       claimed)


def claim_is_true(check: MemoryCheck, success_ns: dict[int, int | None],
                  slack_s: float = CLAIM_SLACK_S) -> bool:
    """A completion claim is true only when it names its own task's success and its observation
    was taken at most `slack_s` before the simulator reported that episode's success. A claim in
    an episode that never succeeded (None, or missing from `success_ns`) is false."""
    if check.claimed != check.task:
        return False  # another task's success (e.g. "the door is locked" while unlocking)
    done_ns = success_ns.get(check.episode)
    return done_ns is not None and check.stamp_ns >= done_ns - int(slack_s * 1e9)


def _memory_counts(checks: list[MemoryCheck], success_ns: dict[int, int | None] | None) -> dict:
    n = len(checks)
    out = {"count": n,
           "names_stage": sum(c.names_stage for c in checks) / n if n else None,
           "names_task": sum(c.names_task for c in checks) / n if n else None}
    if success_ns is not None:
        claims = [c for c in checks if c.claims_done]
        false = [c for c in claims if not claim_is_true(c, success_ns)]
        by_stage: dict[str, int] = {}
        for c in false:
            by_stage[c.caption] = by_stage.get(c.caption, 0) + 1
        out.update({"claims": len(claims), "false_claims": len(false),
                    "claim_precision": (len(claims) - len(false)) / len(claims) if claims else None,
                    # where the false ones were made: episodes that never succeeded, and the
                    # true stage of the scene each was said about
                    "false_claims_in_failed_episodes": sum(success_ns.get(c.episode) is None
                                                           for c in false),
                    "false_claims_by_true_stage": by_stage})
    return out


def summarize_memory(checks: Iterable[MemoryCheck], top: int = 10,
                     success_ns: dict[int, int | None] | None = None) -> dict:
    """Stage and task naming over all texts (and per task); with `success_ns` (episode -> stamp
    of its success, None: never succeeded) the completion claims and their precision too."""
    checks = list(checks)
    counts: dict[str, int] = {}
    for c in checks:
        counts[c.text] = counts.get(c.text, 0) + 1
    common = sorted(counts.items(), key=lambda kv: -kv[1])[:top]
    misses: dict[tuple[str, str], int] = {}  # (the stage shown, the text said) where they differ
    for c in checks:
        if not c.names_stage:
            misses[(c.caption, c.text)] = misses.get((c.caption, c.text), 0) + 1
    tasks = sorted({c.task for c in checks})
    return {**_memory_counts(checks, success_ns),
            "per_task": {t: _memory_counts([c for c in checks if c.task == t], success_ns)
                         for t in tasks},
            "most_common": [{"text": t, "count": k} for t, k in common],
            "stage_misses": [{"stage": s, "said": t, "count": k} for (s, t), k in
                             sorted(misses.items(), key=lambda kv: -kv[1])[:top]]}
