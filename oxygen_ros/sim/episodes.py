"""Which episode comes next, and the small status record the sim publishes (ROS-free).

Episodes cycle through the tasks (task-major: E episodes of the first task, then the next), each
with its own layout seed: seed = base_seed + 1000 * task index + episode index, so a run of any
length reproduces the same layouts, and two settings evaluated with the same base seed see the
same scenes in the same order.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from .tasks import ALL_TASKS


@dataclass(frozen=True)
class Episode:
    index: int  # 0.. over the whole run
    task: str
    seed: int
    instruction: str


def schedule(tasks: Sequence[str], episodes_per_task: int, base_seed: int = 0,
             known: Mapping[str, Any] = ALL_TASKS) -> list[Episode]:
    """The run's episodes in order (task-major), `tasks` among `known` (name -> a task with its
    `instruction`: Meta-World's by default, aloha/tasks.py's for the bimanual robot); the task
    index of the seed is the task's place in `known`, so a run of one task sees the same layouts
    as a run of several."""
    if episodes_per_task < 1:
        raise ValueError(f"episodes_per_task must be >= 1, got {episodes_per_task}")
    if not tasks:
        raise ValueError("no tasks")
    unknown = [t for t in tasks if t not in known]
    if unknown:
        raise ValueError(f"unknown tasks {unknown}; known: {', '.join(known)}")
    out: list[Episode] = []
    for name in tasks:
        task_index = list(known).index(name)
        for e in range(episodes_per_task):
            out.append(Episode(len(out), name, base_seed + 1000 * task_index + e, known[name].instruction))
    return out


def stamp_ns(stamp: Any) -> int:
    """A message stamp (builtin_interfaces Time: sec, nanosec) in ns; None: 0 (unknown)."""
    return 0 if stamp is None else stamp.sec * 1_000_000_000 + stamp.nanosec


@dataclass(frozen=True)
class Status:
    """One message on the sim's episode topic (std_msgs/String holding this as JSON)."""

    episode: int
    task: str
    seed: int
    instruction: str
    step: int  # control steps since the episode started (after the reset hold)
    t: float  # seconds of wall time since the episode started
    progress: float
    stage: int  # the furthest stage of the episode (index into the task's captions)
    caption: str  # the stage the scene shows now
    success: bool
    done: bool  # the episode ended (success or timeout); the next status is a new episode
    timed_out: bool
    late_steps: int  # control steps this episode that ran behind the wall clock (caught up)
    # the stamp (ns, wall clock) of the scene this status describes: the stamp its step's joint
    # state and image carry, so a memory text's source stamp finds its scene exactly (0: unknown)
    stamp_ns: int = 0
    # seconds of wall time from the episode's start to its first success (None: not yet); the
    # episode may go on after it (the ALOHA robot's after_success_s), `t` going on with it
    success_t: float | None = None

    @property
    def time_to_success(self) -> float:
        """Seconds from the episode's start to its success (an episode that ended at success:
        its `t`)."""
        return self.t if self.success_t is None else self.success_t

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "Status":
        return cls(**json.loads(text))
