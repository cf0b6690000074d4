"""ChunkPlayer: turns action chunks (one per inference) into a fixed-rate command stream. Pure (no rclpy).

- A chunk is `[horizon, joints]` in robot units, stamped with its SOURCE observation's stamp;
  step i is meant for time `stamp + i * dt`. `value_at(now)` plays step floor((now - stamp) / dt):
  steps already in the past when the chunk arrives (inference latency) are skipped.
- A new chunk replacing the current one is blended in linearly over `crossfade_s`, starting
  from the exact value the player was outputting at that moment (so never a jump, even when a
  chunk arrives during a running fade).
- After the last step the player holds the last step. When the newest chunk's observation is
  older than `observation_timeout_s` the player is *stale*: it holds the last value it output
  (it does not keep walking an old plan) and reports `stale=True`.
- A chunk whose observation stamp lies more than `future_tolerance_s` AHEAD of `now` (the clock
  jumped back, or a stamp from the future slipped in) is never played: the player holds the last
  value it output (stale, `future=True`), and a newer-arriving chunk replaces it even though its
  stamp is older. Within the tolerance a negative age plays step 0.
- Optional per-joint limits clip every output. A chunk with NaN/inf (or the wrong shape) is
  rejected (`set_chunk` returns False) and the last good chunk keeps playing; `value_at` never
  returns a non-finite value.
- `blend` chooses how a new chunk replaces the current one: ``crossfade`` (above), ``none``
  (switch at once, no fade) or ``rtc`` (real-time chunking: the new chunk takes over at step d
  without a fade, where d is the number of control steps played between its observation's stamp
  and the moment it is handed over, counted from the ticks actually played, never estimated
  from latency; it then advances one step per tick). `leftover(stamp)` gives the steps that
  are executed from an observation's stamp on (already played ones as played, then the current
  chunk's remaining plan): what the engine's next chunk should continue (docs/rtc.md).
- `tick(now)` is the control loop's call (one per control step: it is what is counted);
  `value_at(now)` only looks.
All times are seconds on one clock (the node uses its ROS clock, as the stamps do).
"""
from __future__ import annotations

import collections
import threading
from dataclasses import dataclass

import numpy as np

from .values import command_stream


@dataclass(frozen=True)
class Sample:
    values: np.ndarray  # [joints] float64, finite, clipped
    stale: bool  # newest chunk older than observation_timeout_s (holding)
    index: int  # chunk step played (-1 while holding a stale value)
    fading: bool  # inside a cross-fade window
    chunk_age_s: float  # now - the current chunk's observation stamp
    future: bool = False  # the chunk's stamp is ahead of now beyond the tolerance (held)


BLENDS = ("crossfade", "rtc", "none")
HISTORY_TICKS = 4096  # played ticks remembered for delays and leftovers (bounded; > any horizon)


class ChunkPlayer:
    def __init__(self, num_joints: int, dt: float, crossfade_s: float = 0.1,
                 observation_timeout_s: float = 0.5, lower: np.ndarray | None = None,
                 upper: np.ndarray | None = None, future_tolerance_s: float = 1.0,
                 blend: str = "crossfade") -> None:
        self.num_joints, self.dt = command_stream(num_joints, dt)
        self._lock = threading.Lock()
        self.configure(crossfade_s=crossfade_s, observation_timeout_s=observation_timeout_s,
                       lower=lower, upper=upper, future_tolerance_s=future_tolerance_s,
                       blend=blend)
        # rtc: the played ticks (time, value), the current chunk's start step and ticks since
        self._played_t: collections.deque[float] = collections.deque(maxlen=HISTORY_TICKS)
        self._played_v: collections.deque[np.ndarray] = collections.deque(maxlen=HISTORY_TICKS)
        self._start = 0
        self._ticks = 0
        self._holding = False  # the last tick held a stale / future value
        self.last_delay = 0  # d counted at the last hand-over (clamped to that chunk's length)
        self._chunk: np.ndarray | None = None
        self._stamp = 0.0
        self._fade_from: np.ndarray | None = None
        self._fade_start = 0.0
        self._last: np.ndarray | None = None
        self.accepted = 0
        self.rejected = 0

    def configure(self, crossfade_s: float | None = None, observation_timeout_s: float | None = None,
                  lower: np.ndarray | None = None, upper: np.ndarray | None = None,
                  future_tolerance_s: float | None = None, blend: str | None = None) -> None:
        """Change the live settings. lower/upper: both None = no limits (pass both to set)."""
        if blend is not None:
            if blend not in BLENDS:
                raise ValueError(f"blend must be one of {', '.join(BLENDS)}, got {blend!r}")
            self.blend = blend
        if future_tolerance_s is not None:
            if not future_tolerance_s >= 0:
                raise ValueError(f"future_tolerance_s must be >= 0, got {future_tolerance_s}")
            self.future_tolerance_s = float(future_tolerance_s)
        if crossfade_s is not None:
            if crossfade_s < 0:
                raise ValueError(f"crossfade_s must be >= 0, got {crossfade_s}")
            self.crossfade_s = float(crossfade_s)
        if observation_timeout_s is not None:
            if not observation_timeout_s > 0:
                raise ValueError(f"observation_timeout_s must be > 0, got {observation_timeout_s}")
            self.observation_timeout_s = float(observation_timeout_s)
        lo = None if lower is None or len(lower) == 0 else np.asarray(lower, dtype=np.float64)
        hi = None if upper is None or len(upper) == 0 else np.asarray(upper, dtype=np.float64)
        for name, arr in (("lower", lo), ("upper", hi)):
            if arr is not None and (arr.shape != (self.num_joints,) or not np.all(np.isfinite(arr))):
                raise ValueError(f"{name} limits must be {self.num_joints} finite values")
        if lo is not None and hi is not None and np.any(lo > hi):
            raise ValueError("lower limits must be <= upper limits")
        self.lower, self.upper = lo, hi

    # -- input ----------------------------------------------------------------------------------
    def set_chunk(self, chunk: np.ndarray, stamp: float, now: float) -> bool:
        """Replace the chunk (observation stamp `stamp`, arriving at `now`). False if rejected."""
        a = np.asarray(chunk, dtype=np.float64)
        if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] != self.num_joints or not np.all(np.isfinite(a)):
            with self._lock:
                self.rejected += 1
            return False
        with self._lock:
            in_future = self._chunk is not None and self._stamp - now > self.future_tolerance_s
            if self._chunk is not None and stamp < self._stamp and not in_future:
                self.rejected += 1  # older than what plays: out of order, ignore
                return False
            current = self._value_locked(now) if self._chunk is not None else None
            if current is not None and self.crossfade_s > 0 and self.blend == "crossfade":
                self._fade_from, self._fade_start = current.values.copy(), float(now)
            else:
                self._fade_from = None
            if self.blend == "rtc":  # take over at step d: the ticks played since its stamp
                d = self._ticks_since(float(stamp))
                self.last_delay = min(d, a.shape[0])
                self._start, self._ticks = min(d, a.shape[0] - 1), 0
            self._chunk, self._stamp = a.copy(), float(stamp)
            self.accepted += 1
            return True

    def _ticks_since(self, stamp: float) -> int:
        """Ticks played at or after `stamp` (the newest HISTORY_TICKS at most)."""
        n = 0
        for t in reversed(self._played_t):
            if t < stamp:
                break
            n += 1
        return n

    def delay_since(self, stamp: float) -> int:
        """Control steps played since an observation's stamp (counted ticks)."""
        with self._lock:
            return self._ticks_since(float(stamp))

    def leftover(self, stamp: float) -> np.ndarray | None:
        """[n, joints] robot units: what is executed from `stamp` on, as far as known now: the
        values played by the ticks at or after it, then the current chunk's steps not yet
        played (rtc: from the next counted step; otherwise from the step due now). None
        without a chunk, while holding (stale / future) or when nothing is left."""
        with self._lock:
            if self._chunk is None or self._last is None or self._holding:
                return None
            n = self._ticks_since(float(stamp))
            played = list(self._played_v)[len(self._played_v) - n:] if n else []
            if self.blend == "rtc":
                nxt = self._start + self._ticks
            else:  # the step due at the next tick (or at `stamp`, before any tick since it)
                due = self._played_t[-1] + self.dt if played else max(float(stamp), self._stamp)
                nxt = int(np.floor((due - self._stamp) / self.dt + 1e-9))
            length = self._chunk.shape[0]
            rest = self._clip(self._chunk[min(nxt, length - 1):]) if nxt < length or not played \
                else np.zeros((0, self.num_joints))
            out = np.concatenate([np.asarray(played).reshape(-1, self.num_joints), rest])
            return out if out.shape[0] else None

    def clear(self) -> None:
        with self._lock:
            self._chunk, self._fade_from, self._last = None, None, None
            self._played_t.clear()
            self._played_v.clear()

    @property
    def horizon(self) -> int:
        """Steps of the current chunk (0 before the first)."""
        chunk = self._chunk
        return 0 if chunk is None else int(chunk.shape[0])

    @property
    def has_chunk(self) -> bool:
        return self._chunk is not None

    # -- output ---------------------------------------------------------------------------------
    def value_at(self, now: float) -> Sample | None:
        """The command for time `now`; None before the first chunk (or while the only chunk so
        far is stamped ahead of `now`: nothing to hold). Looks only: `tick` plays."""
        with self._lock:
            if self._chunk is None:
                return None
            return self._value_locked(now)

    def tick(self, now: float) -> Sample | None:
        """One control step: the command for `now`, counted as played (rtc advances one step)."""
        with self._lock:
            if self._chunk is None:
                return None
            sample = self._value_locked(now)
            if sample is not None:
                self._played_t.append(float(now))
                self._played_v.append(sample.values.copy())
                self._holding = sample.stale
                if not sample.stale:
                    self._ticks += 1
            return sample

    def _value_locked(self, now: float) -> Sample | None:
        age = now - self._stamp
        if -age > self.future_tolerance_s:  # never trust a negative age: hold
            if self._last is None:
                return None
            return Sample(self._last.copy(), True, -1, False, age, future=True)
        if age > self.observation_timeout_s and self._last is not None:
            return Sample(self._last.copy(), True, -1, False, age)
        if self.blend == "rtc":  # counted steps from the take-over step
            idx = self._start + self._ticks
        else:
            idx = int(np.floor(max(age, 0.0) / self.dt + 1e-9))
        idx = min(idx, self._chunk.shape[0] - 1)
        target = self._chunk[idx]
        fading = False
        if self._fade_from is not None:
            a = (now - self._fade_start) / self.crossfade_s if self.crossfade_s > 0 else 1.0
            if a < 1.0:
                a = max(a, 0.0)
                target = (1.0 - a) * self._fade_from + a * target
                fading = True
            else:
                self._fade_from = None
        values = self._clip(target)
        self._last = values
        return Sample(values.copy(), age > self.observation_timeout_s, idx, fading, age)

    def _clip(self, v: np.ndarray) -> np.ndarray:
        out = np.asarray(v, dtype=np.float64)
        if self.lower is not None:
            out = np.maximum(out, self.lower)
        if self.upper is not None:
            out = np.minimum(out, self.upper)
        return out
