"""How many CPU threads the model's torch ops get (the node's `model.num_threads`).

torch's own default is one thread per core. The node never runs alone: its control loop, camera
and joint-state callbacks and the robot's other processes (drivers, a simulator) need a core at
the moment they wake up, and torch's threads wait for each other at every operation, so one
preempted thread stalls a whole frame. With every core taken by the model, frames get slower and
irregular instead of faster. So 0 (the default) means every core this process may run on but one
(at least one), and an explicit count that takes every core is accepted with a warning.
"""
from __future__ import annotations

import os

PARAM = "model.num_threads"


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity: taskset, cpusets), else os.cpu_count()."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def default_threads(cores: int | None = None) -> int:
    """model.num_threads 0: every usable core but one, at least one."""
    cores = usable_cores() if cores is None else cores
    return max(1, cores - 1)


def resolve_threads(requested: int, cores: int | None = None) -> tuple[int, str | None]:
    """(threads to use, a warning naming the cost or None) for model.num_threads `requested`."""
    if requested < 0:
        raise ValueError(f"{PARAM} must be >= 0 (0 = every core but one), got {requested}")
    cores = usable_cores() if cores is None else cores
    if requested == 0:
        return default_threads(cores), None
    if cores > 1 and requested >= cores:
        over = "more threads than" if requested > cores else "every one of"
        return requested, (
            f"{PARAM} {requested} takes {over} the {cores} cores this process may use: the control "
            f"loop, the camera and joint-state callbacks and every other process here (drivers, a "
            f"simulator) then wait for the model's threads, so frames get slower and irregular and "
            f"commands late; {PARAM} 0 uses {default_threads(cores)} (every core but one)")
    return requested, None
