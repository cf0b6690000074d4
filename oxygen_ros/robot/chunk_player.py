"""ChunkPlayer: turns action chunks (one per inference) into a fixed-rate command stream. Pure (no rclpy).

Two clocks (robot/command_config.py, CommandConfig):
- the chunk's time axis, `step_s` (the checkpoint's action period): a chunk is `[horizon, joints]`
  in robot units, stamped with its SOURCE observation's stamp, and step i is meant for
  `stamp + i * step_s`;
- the control tick, `tick_s` (1 / control_rate_hz), which may be several times shorter.
The player plays a *position* on the chunk's axis, in chunk steps, and interpolates between
steps: a monotone cubic Hermite curve through the steps (PCHIP tangents), so positions and
velocities are continuous inside a chunk and never overshoot two neighbouring steps. A whole
position is the step itself: with tick_s == step_s every tick plays exactly a step, as before.

- Position by time (``crossfade`` and ``none``): the tick slot of the chunk's age,
  floor(age / tick_s) * tick_s / step_s. Steps already in the past when the chunk arrives
  (inference latency) are skipped.
- `skip_latency` False (a deliberate fault, for sensitivity runs): the chunk's axis starts at its
  ARRIVAL instead of its observation's stamp, so every new chunk plays from step 0, one latency
  late (rtc: it takes over at 0, not at d). Staleness still goes by the observation's age.
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
- Velocity commands (CommandConfig.rates; robot/interface.py) are not positions: each step's
  value is held for its step (`curve_at`), 0 after the chunk's last step.
- The joint limits clip every output (command_config.clip_to_limits). A chunk with NaN/inf (or
  the wrong shape) is rejected (`set_chunk` returns False) and the last good chunk keeps
  playing; `value_at` never returns a non-finite value.
- ``rtc`` (real-time chunking): the new chunk takes over at position d without a fade, where d
  is the ticks played between its observation's stamp and the hand-over, counted (never
  estimated from latency) and converted to chunk steps (d = ticks * tick_s / step_s); it then
  advances tick_s / step_s steps per tick. A live switch to rtc continues from the position
  the time axis gives at the next tick (it never restarts from a stale count).
  `leftover(stamp)` gives, on the chunk's axis (one entry per chunk step from the stamp on),
  what is executed: the values already played, then the current chunk's remaining plan: what
  the engine's next chunk should continue (docs/rtc.md).
- ``execution`` sync (openpi's and LeRobot's synchronous loop; ``stream`` is everything above):
  each chunk plays from its first step at its hand-over (the robot stood still since its
  observation, so no step is due to be skipped and there is nothing to fade from) to its last
  step, then the robot holds that step at rest. A chunk is taken (`takes`) only when its
  observation was made at rest: stamped at least one chunk step after the last step was first
  played. Chunks made from observations taken in motion are passed over (counted in `passed`),
  so inference time becomes the robot's waiting time, as on a synchronous robot. Staleness
  counts from the hand-over (a chunk older than `observation_timeout_s` then is not started)
  and from the rest (no fresh chunk within `observation_timeout_s` of it), never during the
  chunk's own play. rtc is refused with sync (CommandConfig).
- ``replan_steps`` M (stream only): a newer chunk takes over only once the one playing has been
  played for M chunk steps since its hand-over, or its plan has run out; chunks arriving sooner
  are passed over (`passed`). The robot keeps moving (no wait as with sync); the first chunk
  finished after M steps takes over by time, its latency skipped, so a plan is followed for M
  steps plus at most one inference frame. Staleness then goes by the newest chunk offered, taken
  or passed over: the plan being followed is older by choice, the observations are not.
- `tick(now)` is the control loop's call (one per control tick: it is what is counted);
  `value_at(now)` only looks.
Every setting comes in one CommandConfig, replaced whole by `configure` (never merged).
All times are seconds on one clock (the node uses its ROS clock, as the stamps do).
"""
from __future__ import annotations

import collections
import math
import threading
from dataclasses import dataclass

import numpy as np

from .command_config import CommandConfig, clip_to_limits

EPS = 1e-9  # float noise on positions and time slots


@dataclass(frozen=True)
class Sample:
    values: np.ndarray  # [joints] float64, finite, clipped
    stale: bool  # newest chunk older than observation_timeout_s (holding)
    index: int  # chunk step played (floor of the position; -1 while holding a stale value)
    fading: bool  # inside a cross-fade window
    chunk_age_s: float  # now - the current chunk's observation stamp
    future: bool = False  # the chunk's stamp is ahead of now beyond the tolerance (held)
    position: float = -1.0  # the position on the chunk's axis, in chunk steps (-1 while holding)


HISTORY_TICKS = 8192  # played ticks remembered for delays and leftovers (bounded; > any horizon)


def pchip_slopes(chunk: np.ndarray) -> np.ndarray:
    """[horizon, joints] -> the tangent at every step (per step) of the monotone cubic Hermite
    curve through them (Fritsch-Carlson / PCHIP on a uniform grid: 0 at a local extremum, else
    the harmonic mean of the neighbouring secants; one-sided secants at the ends)."""
    h = chunk.shape[0]
    m = np.zeros_like(chunk)
    if h < 2:
        return m
    d = np.diff(chunk, axis=0)  # secants
    m[0], m[-1] = d[0], d[-1]
    a, b = d[:-1], d[1:]
    same = a * b > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        harm = np.where(same, 2.0 * a * b / (a + b), 0.0)
    m[1:-1] = np.where(same, harm, 0.0)
    return m


def hermite_at(chunk: np.ndarray, slopes: np.ndarray, position: float) -> np.ndarray:
    """The curve at `position` (chunk steps, clamped to [0, horizon - 1]); a whole position is
    that step exactly."""
    last = chunk.shape[0] - 1
    s = min(max(float(position), 0.0), float(last))
    i = min(int(math.floor(s + EPS)), last)
    u = s - i
    if i >= last or u <= EPS:
        return chunk[i].copy()
    u2, u3 = u * u, u * u * u
    return ((2 * u3 - 3 * u2 + 1) * chunk[i] + (u3 - 2 * u2 + u) * slopes[i]
            + (-2 * u3 + 3 * u2) * chunk[i + 1] + (u3 - u2) * slopes[i + 1])


def curve_at(chunk: np.ndarray, slopes: np.ndarray, position: float,
             rates: np.ndarray | None = None) -> np.ndarray:
    """The chunk's value at `position` (chunk steps): positions on the Hermite curve
    (hermite_at); `rates` (velocity commands) held over each step, step i's value from i to i + 1
    and 0 after the last step (a velocity is not a position to interpolate, nor one to hold
    once its plan is over)."""
    v = hermite_at(chunk, slopes, position)
    if rates is not None:
        i = int(math.floor(max(float(position), 0.0) + EPS))
        v[rates] = chunk[i, rates] if i < chunk.shape[0] else 0.0
    return v


class ChunkPlayer:
    def __init__(self, num_joints: int, dt: float, crossfade_s: float = 0.1,
                 observation_timeout_s: float = 0.5, lower: np.ndarray | None = None,
                 upper: np.ndarray | None = None, future_tolerance_s: float = 1.0,
                 blend: str = "crossfade", tick_s: float | None = None,
                 skip_latency: bool = True, execution: str = "stream") -> None:
        """A player with a fresh CommandConfig (dt: the chunk's step period; tick_s: the
        control period, None = dt). `ChunkPlayer.from_config` takes a config as it is."""
        self._init(CommandConfig(num_joints, dt, tick_s, () if lower is None else lower,
                                 () if upper is None else upper, crossfade_s, observation_timeout_s,
                                 future_tolerance_s, blend, skip_latency=skip_latency,
                                 execution=execution))

    @classmethod
    def from_config(cls, config: CommandConfig) -> "ChunkPlayer":
        player = cls.__new__(cls)
        player._init(config)
        return player

    def _init(self, config: CommandConfig) -> None:
        self._lock = threading.Lock()
        self._config = config
        self._lower, self._upper = config.lower_array, config.upper_array
        self._rates = config.rate_mask if config.rates else None  # velocity commands
        # rtc: the played ticks (time, value), the current chunk's take-over position, ticks since
        self._played_t: collections.deque[float] = collections.deque(maxlen=HISTORY_TICKS)
        self._played_v: collections.deque[np.ndarray] = collections.deque(maxlen=HISTORY_TICKS)
        self._start = 0.0
        self._ticks = 0
        self._rebase = False  # blend switched to rtc: the next tick starts counting from time
        self._holding = False  # the last tick held a stale / future value
        self.last_delay = 0  # d counted at the last hand-over, chunk steps (clamped to its length)
        self._chunk: np.ndarray | None = None
        self._slopes: np.ndarray | None = None
        self._stamp = 0.0
        self._offered = -math.inf  # replan_steps: the newest stamp of a chunk passed over
        self._arrival = 0.0  # when the current chunk was handed over (skip_latency False: its origin)
        self._chunk_sync = False  # the current chunk was taken under execution sync (plays from rest)
        self._rest_from: float | None = None  # sync: when the robot is at rest after its last step
        # crossfade: the outgoing plan keeps moving in time while the new chunk fades in. It is
        # the outgoing chunk (None: a held value) at its own time position, plus the offset
        # between it and what was commanded at the hand-over (a fade still running, clipping)
        self._fade_from: np.ndarray | None = None  # the offset (or, with no chunk, the value)
        self._fade_chunk: tuple[np.ndarray, np.ndarray, float] | None = None  # chunk, slopes, origin
        self._fade_start = 0.0
        self._last: np.ndarray | None = None
        self.accepted = 0
        self.rejected = 0
        self.passed = 0  # chunks not played: sync, observed in motion; replan_steps, too soon

    # -- settings (one immutable CommandConfig) -------------------------------------------------
    def configure(self, config: CommandConfig) -> None:
        """Replace EVERY live setting with `config` (nothing is kept from the old one). Its
        joints and time axes must be the player's own (they are fixed at configure time)."""
        if not isinstance(config, CommandConfig):
            raise TypeError(f"configure takes a whole CommandConfig, got {type(config).__name__}")
        old = self._config
        if (config.num_joints, config.step_s, config.tick_s, config.rates, config.measured) != (
                old.num_joints, old.step_s, old.tick_s, old.rates, old.measured):
            raise ValueError("a live change cannot change the commands, their kinds, the chunk's "
                             f"step or the control tick ({old.num_joints}, {old.step_s}, "
                             f"{old.tick_s} s)")
        with self._lock:
            if config.blend == "rtc" and old.blend != "rtc":
                self._rebase = True  # continue from where the time axis is, not a stale count
            self._config = config
            self._lower, self._upper = config.lower_array, config.upper_array

    @property
    def config(self) -> CommandConfig:
        return self._config

    # read-only views of the config for callers (the gate, the diagnostics, the rtc prior)
    num_joints = property(lambda self: self._config.num_joints)
    dt = property(lambda self: self._config.step_s, doc="the chunk's step period (s)")
    tick_s = property(lambda self: self._config.tick_s, doc="the control tick period (s)")
    blend = property(lambda self: self._config.blend)
    observation_timeout_s = property(lambda self: self._config.observation_timeout_s)
    crossfade_s = property(lambda self: self._config.crossfade_s)
    future_tolerance_s = property(lambda self: self._config.future_tolerance_s)

    @property
    def lower(self) -> np.ndarray | None:
        return None if self._lower is None else self._lower.copy()

    @property
    def upper(self) -> np.ndarray | None:
        return None if self._upper is None else self._upper.copy()

    # -- input ----------------------------------------------------------------------------------
    def takes(self, stamp: float, now: float | None = None) -> bool:
        """Whether a chunk from the observation stamped `stamp`, handed over at `now` (None: not
        asked), would be played: with execution stream always, or with replan_steps once the
        current chunk has played that many steps; with sync only once the current chunk has
        played to its end and the observation was taken at rest (or while holding a stale /
        future chunk)."""
        with self._lock:
            return self._takes_locked(float(stamp), now)

    def _takes_locked(self, stamp: float, now: float | None) -> bool:
        cfg = self._config
        if self._chunk is None or self._holding:
            return True
        if cfg.execution != "sync":
            if not cfg.replan_steps or now is None:
                return True
            # played long enough, or its plan is over (never wait at a chunk's end for M)
            return (now - self._arrival >= cfg.replan_steps * cfg.step_s - EPS
                    or now >= self._origin() + (self._chunk.shape[0] - 1) * cfg.step_s - EPS)
        if not self._chunk_sync:  # taken while streaming: at rest once its plan has run out
            return stamp >= self._origin() + self._chunk.shape[0] * self._config.step_s - EPS
        return self._rest_from is not None and stamp >= self._rest_from - EPS

    def pass_over(self, stamp: float) -> None:
        """A chunk from the observation stamped `stamp` that `takes` refused is not played: counted
        in `passed`; under replan_steps it still shows the observations are fresh (staleness)."""
        with self._lock:
            self._pass_locked(float(stamp))

    def _pass_locked(self, stamp: float) -> None:
        # sync: observed in motion, the synchronous robot does not play it; stream with
        # replan_steps: the playing chunk has not played its steps yet (fresh all the same)
        self.passed += 1
        if self._config.execution != "sync":
            self._offered = max(self._offered, stamp)

    def set_chunk(self, chunk: np.ndarray, stamp: float, now: float) -> bool:
        """Replace the chunk (observation stamp `stamp`, arriving at `now`). False if rejected."""
        a = np.asarray(chunk, dtype=np.float64)
        cfg = self._config
        if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] != cfg.num_joints or not np.all(np.isfinite(a)):
            with self._lock:
                self.rejected += 1
            return False
        with self._lock:
            cfg = self._config
            in_future = self._chunk is not None and self._stamp - now > cfg.future_tolerance_s
            if self._chunk is not None and stamp < self._stamp and not in_future:
                self.rejected += 1  # older than what plays: out of order, ignore
                return False
            sync = cfg.execution == "sync"
            if not self._takes_locked(float(stamp), float(now)):
                self._pass_locked(float(stamp))
                return False
            current = self._value_locked(now) if self._chunk is not None else None
            self._fade_from, self._fade_chunk = None, None
            if current is not None and cfg.crossfade_s > 0 and cfg.blend == "crossfade" and not sync:
                self._fade_start = float(now)
                if current.stale:  # a held value fades out as it is
                    self._fade_from = current.values.copy()
                else:  # the outgoing chunk fades out moving, as it would have played
                    old = (self._chunk, self._slopes, self._origin())
                    self._fade_chunk = old
                    self._fade_from = current.values - self._plan_at(old, now)
            if cfg.blend == "rtc":  # take over at d: the ticks played since its stamp, in steps
                d = self._ticks_since(float(stamp)) * cfg.steps_per_tick
                self.last_delay = min(math.ceil(d - EPS), a.shape[0])
                start = min(d, a.shape[0] - 1.0) if cfg.skip_latency else 0.0
                self._start, self._ticks, self._rebase = start, 0, False
            self._chunk, self._slopes, self._stamp = a.copy(), pchip_slopes(a), float(stamp)
            self._arrival = float(now)
            self._chunk_sync, self._rest_from = sync, None
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
        """Chunk steps played since an observation's stamp (counted ticks, converted; a step
        begun counts)."""
        with self._lock:
            return math.ceil(self._ticks_since(float(stamp)) * self._config.steps_per_tick - EPS)

    def leftover(self, stamp: float) -> np.ndarray | None:
        """[n, joints] robot units, one entry per chunk step from `stamp` on, as far as known
        now: the values played by the ticks at or after it (the tick of each step), then the
        current chunk's plan from the next tick on (rtc: the next counted position; otherwise
        the position due at the next tick, or at `stamp` before any tick since it). None
        without a chunk, while holding (stale / future) or when nothing is left."""
        with self._lock:
            if self._chunk is None or self._last is None or self._holding:
                return None
            cfg = self._config
            r = cfg.steps_per_tick
            n = self._ticks_since(float(stamp))
            played = list(self._played_v)[len(self._played_v) - n:] if n else []
            if cfg.blend == "rtc" and not self._rebase:
                nxt = self._start + self._ticks * r
            else:
                due = self._played_t[-1] + cfg.tick_s if played else max(float(stamp), self._origin())
                nxt = self._time_position(due)
            last = self._chunk.shape[0] - 1
            done = n * r  # chunk steps played since the stamp
            out = [played[min(int(math.floor(i / r + EPS)), n - 1)]
                   for i in range(math.ceil(done - EPS))]
            i = len(out)
            while nxt + i - done <= last + EPS:
                out.append(self._clip(curve_at(self._chunk, self._slopes, nxt + i - done, self._rates)))
                i += 1
            if not out:  # nothing played since and the plan is over: its last step
                out.append(self._clip(self._chunk[last]))
            return np.asarray(out, dtype=np.float64).reshape(-1, cfg.num_joints)

    def first_value(self, chunk: np.ndarray, stamp: float, now: float) -> np.ndarray:
        """What `chunk` (observation `stamp`) would play first if handed over at `now`: the
        position by time, clipped (the start gate compares it with the measured pose)."""
        a = np.asarray(chunk, dtype=np.float64)
        cfg = self._config
        pos = self._time_position(now, stamp if cfg.skip_latency and cfg.execution != "sync" else now)
        return self._clip(curve_at(a, pchip_slopes(a), pos, self._rates))

    def clear(self) -> None:
        with self._lock:
            self._chunk, self._slopes, self._fade_from, self._last = None, None, None, None
            self._fade_chunk, self._rest_from, self._offered = None, None, -math.inf
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
        """One control tick: the command for `now`, counted as played (rtc advances)."""
        with self._lock:
            if self._chunk is None:
                return None
            sample = self._value_locked(now)
            if sample is not None:
                self._played_t.append(float(now))
                self._played_v.append(sample.values.copy())
                self._holding = sample.stale
                if (self._chunk_sync and self._rest_from is None and not sample.stale
                        and sample.position >= self._chunk.shape[0] - 1 - EPS):
                    # the last step is commanded now: the robot is at rest one step later
                    self._rest_from = float(now) + self._config.step_s
                if not sample.stale:
                    if self._rebase and self._config.blend == "rtc":
                        self._start, self._ticks, self._rebase = sample.position, 0, False
                    self._ticks += 1
            return sample

    def _origin(self) -> float:
        """When the current chunk's step 0 is due: its observation's stamp (the steps that
        elapsed during inference are skipped), or its arrival with skip_latency False or when
        it was taken under execution sync (it starts from rest)."""
        return self._stamp if self._config.skip_latency and not self._chunk_sync else self._arrival

    def _time_position(self, now: float, origin: float | None = None) -> float:
        """The position by time: the tick slot of the time since `origin` (default: the
        current chunk's, _origin), in chunk steps."""
        cfg = self._config
        age = max(now - (self._origin() if origin is None else origin), 0.0)
        return math.floor(age / cfg.tick_s + EPS) * cfg.steps_per_tick

    def _value_locked(self, now: float) -> Sample | None:
        cfg = self._config
        age = now - self._stamp
        if -age > cfg.future_tolerance_s:  # never trust a negative age: hold
            if self._last is None:
                return None
            return Sample(self._held(), True, -1, False, age, future=True)
        stale = self._stale_locked(now)
        if stale and self._last is not None:
            return Sample(self._held(), True, -1, False, age)
        if cfg.blend == "rtc" and not self._rebase:  # counted ticks from the take-over
            pos = self._start + self._ticks * cfg.steps_per_tick
        else:
            pos = self._time_position(now)
        last = self._chunk.shape[0] - 1
        target = curve_at(self._chunk, self._slopes, pos, self._rates)  # rates: 0 past the end
        pos = min(pos, float(last))
        fading = False
        if self._fade_from is not None:
            a = (now - self._fade_start) / cfg.crossfade_s if cfg.crossfade_s > 0 else 1.0
            if a < 1.0:
                a = max(a, 0.0)
                outgoing = self._fade_from if self._fade_chunk is None else \
                    self._plan_at(self._fade_chunk, now) + self._fade_from
                target = (1.0 - a) * outgoing + a * target
                fading = True
            else:
                self._fade_from, self._fade_chunk = None, None
        values = self._clip(target)
        self._last = values
        return Sample(values.copy(), stale, min(int(math.floor(pos + EPS)), last), fading, age,
                      position=pos)

    def _stale_locked(self, now: float) -> bool:
        """The newest chunk's observation is too old to act on: by its age (stream); for a
        chunk taken under sync, by its age at the hand-over or by the time waited at rest."""
        timeout = self._config.observation_timeout_s
        if not self._chunk_sync:
            newest = max(self._stamp, self._offered) if self._config.replan_steps else self._stamp
            return now - newest > timeout
        if self._arrival - self._stamp > timeout:
            return True
        return self._rest_from is not None and now - self._rest_from > timeout

    def _plan_at(self, plan: tuple[np.ndarray, np.ndarray, float], now: float) -> np.ndarray:
        """A chunk's value by time at `now` (its step by time since `origin`; hermite_at holds
        the last step after its end), unclipped."""
        chunk, slopes, origin = plan
        return curve_at(chunk, slopes, self._time_position(now, origin), self._rates)

    def _held(self) -> np.ndarray:
        """The last output, held: clipped again (the limits may have changed live since)."""
        self._last = self._clip(self._last)
        return self._last.copy()

    def _clip(self, v: np.ndarray) -> np.ndarray:
        return clip_to_limits(v, self._lower, self._upper)
