"""Record a KVManager's calls and replay them back to back (profiling only).

Inside a frame the manager's Python runs between model kernels that evict its data from the
CPU caches; replaying the very same calls, from the very same state, in one tight loop measures
what the bookkeeping itself costs. The bench and `python -m oxygen_ros.engine.profile --kv`
report both."""
from __future__ import annotations

import copy
import statistics
import time
from types import TracebackType

from .kv_manager import KVManager

_PUBLIC = ("create", "free", "append", "slots", "block_table", "length", "writable_blocks",
           "can_fit", "usage")


class KVCallRecorder:
    """`with KVCallRecorder(kv) as rec: ...` (or start() ... stop()) records every public call
    made on `kv` in between (the manager behaves exactly as before); `rec.replay_s()` then times
    the calls again on a copy of the state `kv` had at the start."""

    def __init__(self, kv: KVManager) -> None:
        self.kv = kv
        self.calls: list[tuple[str, tuple, dict]] = []
        self.busy_s = 0.0  # the manager's own timer over the block (in-context cost)
        self._start: KVManager | None = None
        self._busy0 = 0.0

    def start(self) -> None:
        self._start = copy.deepcopy(self.kv)
        self._busy0 = self.kv.busy_s
        for name in _PUBLIC:
            setattr(self.kv, name, self._recording(name))

    def stop(self) -> None:
        for name in _PUBLIC:
            delattr(self.kv, name)  # back to the class's methods
        self.busy_s = self.kv.busy_s - self._busy0

    def __enter__(self) -> "KVCallRecorder":
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _recording(self, name: str):
        method = getattr(self.kv, name)
        calls = self.calls

        def record(*args, **kwargs):
            calls.append((name, args, kwargs))
            return method(*args, **kwargs)
        return record

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
