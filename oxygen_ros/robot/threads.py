"""How many CPU threads the model's torch ops get (the node's `model.num_threads`), and which
CPUs the node's inference and control threads run on (`inference_cpus`, `control_cpus`).

torch's own default is one thread per core. The node never runs alone: its control loop, camera
and joint-state callbacks and the robot's other processes (drivers, a simulator) need a core at
the moment they wake up, and torch's threads wait for each other at every operation, so one
preempted thread stalls a whole frame. With every core taken by the model, frames get slower and
irregular instead of faster. So 0 (the default) means every core this process may run on but one
(at least one), and an explicit count that takes every core is accepted with a warning.
"""
from __future__ import annotations

import os
from typing import Sequence

PARAM = "model.num_threads"


def allowed_cpus() -> frozenset[int]:
    """The CPUs this process may run on (its affinity: taskset, cpusets), or every CPU where
    that is unknown (not Linux)."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset(range(os.cpu_count() or 1))


def usable_cores() -> int:
    """How many cores this process may run on (allowed_cpus)."""
    return max(1, len(allowed_cpus()))


def default_threads(cores: int | None = None) -> int:
    """model.num_threads 0: every usable core but one, at least one."""
    cores = usable_cores() if cores is None else cores
    return max(1, cores - 1)


def resolve_threads(requested: int, cores: int | None = None,
                    model_cpus: int = 0) -> tuple[int, str | None]:
    """(threads to use, a warning naming the cost or None) for model.num_threads `requested`;
    `model_cpus`: how many CPUs inference_cpus gives the model (0: none pinned). Pinned, the
    model's threads are started by the pinned inference thread and share its CPUs: the default
    is one per CPU, and more are warned about."""
    if requested < 0:
        raise ValueError(f"{PARAM} must be >= 0 (0 = every core but one), got {requested}")
    if model_cpus > 0:
        if requested > model_cpus:
            return requested, (f"{PARAM} {requested} runs more threads than the {model_cpus} CPUs "
                               f"of inference_cpus: they take turns on them, and frames get slower; "
                               f"{PARAM} 0 uses {model_cpus}")
        return requested or model_cpus, None
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


# -- CPU affinity ------------------------------------------------------------------------------
# inference_cpus gives the model's thread CPUs of its own and keeps every other thread of the
# process off them; control_cpus puts the control thread on its own. Where the robot has cores to
# spare (a Jetson's 14), the model then runs undisturbed by the hundreds of wake-ups a second of
# the control loop, the drivers and the middleware, which otherwise land on its core and move it.
# On the 2-core VM here the measurements did not resolve a gain (docs/node.md, CPU affinity): the
# robot's drivers and the control thread then share the one other core.


def check_cpus(name: str, cpus: Sequence[int], allowed: frozenset[int] | None = None) -> str | None:
    """Why `cpus` cannot be a thread's affinity (duplicates, or a CPU this process may not
    use), else None. Empty is fine: the thread keeps the process's CPUs."""
    cpus = list(cpus)
    if len(set(cpus)) != len(cpus):
        return f"{name} has duplicates: {cpus}"
    allowed = allowed_cpus() if allowed is None else allowed
    outside = [c for c in cpus if c not in allowed]
    if outside:
        return (f"{name}: CPU {', '.join(map(str, outside))} is not one this process may run on "
                f"(its affinity: {sorted(allowed)})")
    return None


def pin_thread(cpus: Sequence[int]) -> str:
    """Put the calling thread on `cpus` (empty: leave it where it is); the words for the
    diagnostics: 'CPUs 0, 1', 'any CPU', or why the pinning failed."""
    if not cpus:
        return "any CPU"
    try:
        os.sched_setaffinity(0, set(cpus))  # pid 0: the calling thread (Linux)
    except (AttributeError, OSError) as exc:
        return f"any CPU (pinning to {list(cpus)} failed: {exc})"
    return "CPUs " + ", ".join(str(c) for c in sorted(cpus))


def process_threads() -> list[int]:
    """The ids of this process's threads (Linux /proc; empty elsewhere)."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return []


def keep_off(cpus: Sequence[int]) -> dict[int, frozenset[int]] | None:
    """Move every thread of this process off `cpus` (onto the rest of each one's CPUs): the
    executor, the middleware's threads and whatever they start later (a new thread inherits
    its creator's CPUs). Returns each moved thread's CPUs before, for `restore`; None when
    nothing was moved (`cpus` empty, or no CPU would be left to a thread)."""
    off = set(cpus)
    if not off:
        return None
    before: dict[int, frozenset[int]] = {}
    for tid in process_threads():
        try:
            had = frozenset(os.sched_getaffinity(tid))
            rest = had - off
            if rest and rest != had:
                os.sched_setaffinity(tid, rest)
                before[tid] = had
        except OSError:  # a thread that ended meanwhile
            continue
    return before or None


def restore(before: dict[int, frozenset[int]] | None) -> None:
    """Give the threads `keep_off` moved their CPUs back (those still running)."""
    for tid, had in (before or {}).items():
        try:
            os.sched_setaffinity(tid, had)
        except OSError:
            continue
