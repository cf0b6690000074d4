"""Record a KVManager's calls and replay them back to back (measurement only, never serving).

Inside a frame the manager's Python runs between model kernels that evict its data from the
CPU caches; replaying the very same calls, from the very same state, in one tight loop measures
what the bookkeeping itself costs. The bench and `oxygen-bench profile --kv`
report both.

The recorder is a proxy in front of the manager (composition): the manager itself is never
modified, and the engine talks to the proxy only while it is attached (`attach(engine)`)."""
from __future__ import annotations

import copy
import statistics
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..engine.core.kv import KVManager

if TYPE_CHECKING:
    from ..engine.core.engine import Engine

# the manager's public calls the engine and scheduler make; everything else (pool, usage
# counters) is read through to the manager unrecorded
PUBLIC = ("create", "free", "append", "slots", "block_table", "length", "writable_blocks",
          "can_fit", "usage")


class KVCallRecorder:
    """A stand-in for `kv` that forwards every public call to it, records (name, args, kwargs)
    and times the call (`busy_s`, seconds inside the manager's calls, proxy overhead included).
    `replay_s()` times the recorded calls again on a copy of the state `kv` had when recording
    started.

    `with KVCallRecorder(kv).attach(engine) as rec: ...` puts the proxy where the engine and its
    scheduler keep their manager for the duration of the block and puts the manager back after."""

    def __init__(self, kv: KVManager) -> None:
        self.kv = kv
        self.calls: list[tuple[str, tuple, dict]] = []
        self.busy_s = 0.0
        self._start: KVManager | None = None
        self._owners: list[Any] = []

    # -- the proxy ------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        # only reached for names not defined on the recorder: the recorded calls, or a plain
        # read-through to the manager (pool, check_invariants, ...)
        kv = self.__dict__["kv"]
        attr = getattr(kv, name)
        if name not in PUBLIC:
            return attr
        calls = self.calls

        def record(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, args, kwargs))
            t0 = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self.busy_s += time.perf_counter() - t0
        return record

    # -- recording window -----------------------------------------------------------------------
    def start(self) -> None:
        """Snapshot the manager's state (the replay's start) and begin a fresh recording."""
        self._start = copy.deepcopy(self.kv)
        self.calls.clear()
        self.busy_s = 0.0

    def attach(self, engine: Engine) -> "KVCallRecorder":
        """Make `engine` call the manager through this recorder until detach(); starts
        recording. Every place the engine's calls reach the manager from is rerouted: a direct
        reference (`engine.kv`, `engine.scheduler.kv`) or the `inner` of a wrapper in front of
        it (the engine's stage timer)."""
        holders = [engine, getattr(engine, "scheduler", None)]
        holders += [getattr(h, name, None) for h in list(holders) if h is not None
                    for name in ("kv", "_kv")]
        self._owners = [(h, name) for h in holders if h is not None and h is not self
                        for name in ("kv", "_kv", "inner")
                        if getattr(h, "__dict__", {}).get(name) is self.kv]
        if not self._owners:
            raise ValueError("the engine does not hold this recorder's KV manager")
        self.start()
        for owner, name in self._owners:
            setattr(owner, name, self)
        return self

    def detach(self) -> None:
        for owner, name in self._owners:
            setattr(owner, name, self.kv)
        self._owners = []

    def __enter__(self) -> "KVCallRecorder":
        if self._start is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.detach()

    # -- replay ---------------------------------------------------------------------------------
    def replay_s(self, repeats: int = 5) -> float:
        """Median seconds to replay every recorded call on a fresh copy of the start state."""
        if self._start is None:
            raise RuntimeError("nothing recorded: use the recorder as a context manager first")
        times = []
        for _ in range(repeats):
            fresh = copy.deepcopy(self._start)
            bound = [(getattr(fresh, name), args, kwargs) for name, args, kwargs in self.calls]
            t0 = time.perf_counter()
            for fn, args, kwargs in bound:
                fn(*args, **kwargs)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)
