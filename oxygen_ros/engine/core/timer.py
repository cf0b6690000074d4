"""StageTimer: where a frame's time goes, by stage (the one measuring object in Engine.step).

Stages nest and are exclusive: a KV call made inside scheduling counts as `kv`, not `sched`.
Threads (parallel mode) keep their own nesting; their times add up. `TimedKV` puts every call
on the KV manager under stage `kv` by composition (the manager itself has no timing code); a
recorder or another observer can wrap the manager the same way and sit in `TimedKV.inner`.
"""
from __future__ import annotations

import copy
import threading
import time
from typing import Any

# kv: the KV manager's calls, prefix-cache keys and copy-on-write block copies; sched: scheduling
# policy and request bookkeeping around them.
STAGES = ("vision_prefill", "denoise", "decode", "kv", "sched", "detokenize")


class StageTimer:
    def __init__(self, stages: tuple[str, ...] = STAGES) -> None:
        self.stages = stages
        self._local = threading.local()
        self._lock = threading.Lock()
        self._totals = dict.fromkeys(stages, 0.0)
        self._stages = {name: _Stage(self, name) for name in stages}

    def reset(self) -> None:
        with self._lock:
            self._totals = dict.fromkeys(self.stages, 0.0)

    def stage(self, name: str) -> "_Stage":
        """`with timer.stage("decode"): ...` adds the block's own time (less nested stages)."""
        return self._stages[name]

    def _stack(self) -> list[list[float]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _add(self, name: str, seconds: float) -> None:
        with self._lock:
            self._totals[name] += seconds

    def ms(self) -> dict[str, float]:
        with self._lock:
            return {k: v * 1e3 for k, v in self._totals.items()}


class _Stage:
    """Re-entrant across threads: the start times live on the calling thread's stack."""

    __slots__ = ("timer", "name")

    def __init__(self, timer: StageTimer, name: str) -> None:
        self.timer, self.name = timer, name

    def __enter__(self) -> None:
        # [start, time spent in stages nested in this one]
        self.timer._stack().append([time.perf_counter(), 0.0])

    def __exit__(self, *exc: object) -> None:
        stack = self.timer._stack()
        start, inner = stack.pop()
        dt = time.perf_counter() - start
        if stack:
            stack[-1][1] += dt
        self.timer._add(self.name, dt - inner)


class TimedKV:
    """A KV manager seen through a StageTimer: every method call is timed as stage `kv`;
    attributes (block_size, pool) pass through. `inner` is the wrapped manager."""

    def __init__(self, inner: Any, timer: StageTimer) -> None:
        self.inner = inner
        self.timer = timer

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr
        stage = self.timer.stage

        def timed(*args: Any, **kwargs: Any) -> Any:
            with stage("kv"):
                return attr(*args, **kwargs)
        return timed

    def __contains__(self, seq_id: object) -> bool:
        return seq_id in self.inner

    def __deepcopy__(self, memo: dict) -> "TimedKV":
        """A copy of the manager's state behind a fresh timer (for replaying recorded calls)."""
        return TimedKV(copy.deepcopy(self.inner, memo), StageTimer(self.timer.stages))
