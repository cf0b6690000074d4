"""Pair camera frames and joint states by stamp; hand the newest pair to the worker. Pure (no rclpy).

`Pairer` keeps the last few (already converted) frames of every camera and joint states. The
observation is the newest *complete* set: a frame of camera 0 (newest first), for every other
camera its frame nearest in stamp, and the joint state nearest in stamp, all within
`tolerance_s` of camera 0's stamp. Each camera-0 frame is used at most once.
`Mailbox` is a single slot, drop-oldest: putting into a full slot replaces the item (counted in
`dropped`), so the worker always takes the newest observation and never a backlog.
"""
from __future__ import annotations

import bisect
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Stamped:
    stamp: float  # seconds
    value: Any
    header_stamp: Any = None  # the exact message stamp (builtin_interfaces/Time) when known


@dataclass(frozen=True)
class Pair:
    stamp: float  # camera 0's stamp: the observation stamp
    images: tuple[Any, ...]  # one per camera, camera order
    state: Any
    header_stamp: Any  # camera 0's exact header stamp
    image_stamps: tuple[float, ...]
    state_stamp: float


class _Buffer:
    def __init__(self, depth: int) -> None:
        self.items: deque[Stamped] = deque(maxlen=depth)

    def add(self, item: Stamped) -> None:
        # keep sorted by stamp (messages normally arrive in order; an older one is inserted)
        if not self.items or item.stamp >= self.items[-1].stamp:
            self.items.append(item)
            return
        items = list(self.items)
        bisect.insort(items, item, key=lambda s: s.stamp)
        self.items = deque(items[-self.items.maxlen:], maxlen=self.items.maxlen)

    def nearest(self, stamp: float, tol: float) -> Stamped | None:
        best, best_d = None, None
        for it in self.items:
            d = abs(it.stamp - stamp)
            if d <= tol and (best_d is None or d < best_d):
                best, best_d = it, d
        return best


class Pairer:
    def __init__(self, num_cameras: int, tolerance_s: float = 0.05, depth: int = 16) -> None:
        if num_cameras < 1:
            raise ValueError(f"num_cameras must be >= 1, got {num_cameras}")
        if tolerance_s < 0:
            raise ValueError(f"tolerance_s must be >= 0, got {tolerance_s}")
        self.tolerance_s = float(tolerance_s)
        self._cams = [_Buffer(depth) for _ in range(num_cameras)]
        self._states = _Buffer(max(depth * 4, 32))  # joint states usually come faster
        self._used_stamp = float("-inf")
        self._retired = float("-inf")  # camera-0 frames up to this stamp were retired (retire)
        self._lock = threading.Lock()

    @property
    def num_cameras(self) -> int:
        return len(self._cams)

    def reset(self) -> None:
        """Forget every buffered message and the newest used stamp (after a clock jump back,
        so that pairing starts again from the new time line)."""
        with self._lock:
            for buf in (*self._cams, self._states):
                buf.items.clear()
            self._used_stamp = self._retired = float("-inf")

    def retire(self) -> None:
        """Never pair the camera frames received so far, nor a pair already made from them (see
        `retired`): after a new instruction, which applies to frames received after it. Stamps
        rather than a clock: unlike the node clock, they cannot wedge this after a clock jump
        (reset forgets them)."""
        with self._lock:
            if self._cams[0].items:
                self._used_stamp = max(self._used_stamp, self._cams[0].items[-1].stamp)
            self._retired = self._used_stamp

    def retired(self, stamp: float) -> bool:
        """Whether a pair of camera-0 stamp `stamp` was made from a frame retire() retired."""
        with self._lock:
            return stamp <= self._retired

    def add_image(self, camera: int, stamp: float, image: Any, header_stamp: Any = None) -> None:
        with self._lock:
            self._cams[camera].add(Stamped(stamp, image, header_stamp))

    def add_state(self, stamp: float, state: Any, header_stamp: Any = None) -> None:
        with self._lock:
            self._states.add(Stamped(stamp, state, header_stamp))

    def newest_pair(self) -> Pair | None:
        """The newest complete observation not returned before, or None."""
        with self._lock:
            tol = self.tolerance_s
            for ref in reversed(self._cams[0].items):
                if ref.stamp <= self._used_stamp:
                    return None
                others = [buf.nearest(ref.stamp, tol) for buf in self._cams[1:]]
                if any(o is None for o in others):
                    continue
                st = self._states.nearest(ref.stamp, tol)
                if st is None:
                    continue
                self._used_stamp = ref.stamp
                frames = [ref, *others]
                return Pair(stamp=ref.stamp, images=tuple(f.value for f in frames), state=st.value,
                            header_stamp=ref.header_stamp,
                            image_stamps=tuple(f.stamp for f in frames), state_stamp=st.stamp)
            return None


class Mailbox(Generic[T]):
    """Single-slot, drop-oldest hand-over between threads."""

    def __init__(self) -> None:
        self._item: T | None = None
        self._full = False
        self._closed = False
        self._cond = threading.Condition()
        self.dropped = 0
        self.put_count = 0

    def put(self, item: T) -> None:
        with self._cond:
            if self._full:
                self.dropped += 1
            self._item, self._full = item, True
            self.put_count += 1
            self._cond.notify()

    def get(self, timeout: float | None = None) -> T | None:
        """The newest item (emptying the slot), or None on timeout / when closed."""
        with self._cond:
            if not self._full and not self._closed:
                self._cond.wait(timeout)
            if not self._full:
                return None
            item, self._item, self._full = self._item, None, False
            return item

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def reopen(self) -> None:
        with self._cond:
            self._closed, self._item, self._full = False, None, False
