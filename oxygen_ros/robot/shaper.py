"""CommandShaper: the last step before a command leaves the node. Pure (numpy, no rclpy).

The ChunkPlayer says where the chunks want the joints now (joint-limit clipped); the shaper
decides what is sent:
- Velocity / acceleration limits per elapsed time: `step` takes the tick's time; a command
  differs from the previous one by at most `v_max * h` per joint and its velocity from the
  previous velocity by at most `a_max * h`, h being the time since the previous command (clamped
  to [0, MAX_ELAPSED_TICKS nominal periods]: ticks that come early under jitter move less, a
  late one no more than a few ticks' worth). Approaching a target, the step is also capped so
  that the rest of the way can still be braked within `a_max` (velocity v with
  v h + v^2 / (2 a_max) <= distance, solved in a form that cannot underflow): the command stops
  at a target that stands still instead of overshooting it. The distance is taken relative to
  the target's own motion over the last tick (capped at the velocity limit), so a chunk that
  moves within the limits is followed exactly instead of with a lag. A target that jumps can
  still be overshot; the limits themselves are never exceeded (the velocity limit wins when it
  is lowered live below the current speed).
- Start and restarts: the first command after `reset()` (activation: nothing commanded yet) is
  the newest measured joint position (`measured`, which the caller passes only when it is
  fresh); without one no command is made. After a hold (stale chunk, deadman, gate) commands
  resume from the last command with its velocity, so restarts respect the limits too, when the
  measured pose is within `max_tracking_error` of the last command on every joint. A measured
  pose further away is a glitch (a jumped joint state, a robot that stopped following): it is
  never a target, commands go on holding (`Shaped.holding == GLITCH`, `last_glitch` names the
  joint) until it is back within the tolerance. Without a fresh measured pose the hold goes on.
- Hold: while the caller gives a hold reason (stale chunk, deadman, ...) or the last chunk was
  refused by the gate, commands stop following the target and brake to a standstill within the
  acceleration limit (at once without one).
- Chunk gate (`gate`): a chunk whose first playable step (the step the player plays at its
  arrival, clipped like the player clips) is further than `max_start_deviation` from the measured
  pose is refused; commands hold until a chunk passes.
- MeasuredPose: the newest measured joint position and its stamp.
(robot/command_guard.py: the control loop's last check of a command before it is published;
robot/deadman.py: the operator's heartbeat.)
Limits whose per-tick step is below MIN_TICK_STEP are refused (`limit`); non-finite targets
are treated as a hold and non-finite measured poses as none; a state that is not finite is never
stored (and is forgotten if it ever was): no NaN is ever returned. Empty limits leave the
commands as the player made them, except for the start from the measured pose.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .arrays import all_finite
from .values import command_stream

LIMIT_TOL = 1e-9  # a step this close to the target's counts as not limited (float noise)
MIN_TICK_STEP = 1e-12  # rad: a limit that allows less per control tick never moves a joint
MAX_ELAPSED_TICKS = 3.0  # a late tick moves at most this many nominal periods' worth
MIN_ELAPSED_S = 1e-6  # ticks closer than this count as the same instant (nothing moves)
DEFAULT_TRACKING_ERROR = (0.2,)  # rad; see docs/command-safety.md (Restarts)
GLITCH = "measured pose jump"  # Shaped.holding while the measured pose is beyond the tolerance

# parameter name -> (zero allowed (0 = off), power of dt in its per-tick step; 0: not a rate)
LIMITS = {"joint_velocity_limits": (False, 1), "joint_acceleration_limits": (False, 2),
          "max_start_deviation": (True, 0), "max_tracking_error": (False, 0)}


def per_joint(values: Sequence[float] | None, num_joints: int, name: str, zero_ok: bool
              ) -> np.ndarray | None:
    """[] -> None (off); one value -> every joint; one per joint. ValueError with the reason for
    another length, a non-finite value, a negative one, or zero where zero makes no sense."""
    if values is None or len(values) == 0:
        return None
    a = np.asarray(list(values), dtype=np.float64)
    if a.ndim != 1 or a.size not in (1, num_joints):
        raise ValueError(f"{name} has {a.size} entries: give one value or one per joint "
                         f"({num_joints}), or none")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must hold finite numbers, got {a.tolist()}")
    if np.any(a < 0) or (not zero_ok and np.any(a == 0)):
        what = ">= 0 (0 = off)" if zero_ok else "> 0 (empty = no limit)"
        raise ValueError(f"{name} must be {what}, got {a.tolist()}")
    return np.broadcast_to(a, (num_joints,)).copy()


def limit(name: str, values: Sequence[float] | None, num_joints: int, dt: float
          ) -> np.ndarray | None:
    """One of LIMITS checked like `per_joint`, and a velocity / acceleration limit also refused
    when its step per control tick (limit x dt, limit x dt^2) is below MIN_TICK_STEP: such a
    limit pins the joint (like a zero one) and its arithmetic underflows."""
    zero_ok, power = LIMITS[name]
    a = per_joint(values, num_joints, name, zero_ok)
    if a is None or not power:
        return a
    step = a * dt ** power
    if np.any(step < MIN_TICK_STEP):
        unit = "limit x dt" + ("^2" if power == 2 else "")
        raise ValueError(f"{name} {a.tolist()} allows a step of {float(step.min()):.3g} rad per "
                         f"control tick ({unit} at {1.0 / dt:g} Hz), below {MIN_TICK_STEP:g}: "
                         "a joint could never move; give a real limit, or none")
    return a


@dataclass(frozen=True)
class Limits:
    """The shaper's live settings, replaced whole (one reference swap) by `configure`."""
    velocity: np.ndarray | None = None  # rad/s per joint
    acceleration: np.ndarray | None = None  # rad/s^2 per joint
    deviation: np.ndarray | None = None  # rad per joint (0: that joint unchecked)
    tracking: np.ndarray | None = None  # rad per joint: max measured-vs-command at a restart

    def __post_init__(self) -> None:
        # `limit` says why in parameter terms; this is the shape of what may be stored at all
        for name in ("velocity", "acceleration", "deviation", "tracking"):
            a = getattr(self, name)
            if a is None:
                continue
            # velocity / acceleration / tracking may be inf on a command they do not limit
            # (a velocity command's second order, a command without a measured value)
            ok = (a >= 0) if name == "deviation" else (a > 0)
            finite = np.isfinite(a) if name == "deviation" else ~np.isnan(a)
            if a.ndim != 1 or not np.all(finite) or not np.all(ok):
                raise ValueError(f"Limits.{name} must be a vector "
                                 f"{'>= 0' if name == 'deviation' else '> 0'}, got {a!r}")


@dataclass(frozen=True)
class Shaped:
    values: np.ndarray  # [joints] float64, finite: the command to send
    limited: np.ndarray  # [joints] bool: a limit changed this command (following the target)
    start: bool  # this command is the measured pose (the first command of an activation)
    holding: str  # why commands hold ("" while following the target)


@dataclass(frozen=True)
class GateRefusal:
    joint: int  # index of the joint furthest over its allowed deviation (-1: no measured pose)
    distance: float  # |first playable step - measured| of that joint (rad)
    limit: float  # its max_start_deviation
    step: int  # the chunk step that would have played first


@dataclass(frozen=True)
class Glitch:
    joint: int  # the joint furthest beyond max_tracking_error
    distance: float  # |measured - last command| of that joint (rad)
    limit: float  # its max_tracking_error


def per_kind(vel: np.ndarray | None, acc: np.ndarray | None, dev: np.ndarray | None,
             tracking: np.ndarray | None, rates: np.ndarray, measured: np.ndarray
             ) -> tuple[np.ndarray | None, ...]:
    """The parameters' limits (per command) -> the shaper's Limits per command kind: a velocity
    command's value changes by at most its acceleration limit per second (its first order) and
    has no second order (its magnitude is bounded by the velocity limit in the clip:
    CommandConfig); a command without a measured value has no start gate or restart check."""
    if not rates.any() and measured.all():
        return vel, acc, dev, tracking
    inf = np.full(rates.shape, np.inf)
    first = np.where(rates, inf if acc is None else acc, inf if vel is None else vel)
    second = np.where(rates, inf, inf if acc is None else acc)
    if dev is not None:
        dev = np.where(measured, dev, 0.0)
    if tracking is not None:
        tracking = np.where(measured, tracking, np.inf)
    return (None if np.isinf(first).all() else first, None if np.isinf(second).all() else second,
            dev, tracking)


class CommandShaper:
    def __init__(self, num_joints: int, dt: float, velocity_limits: Sequence[float] = (),
                 acceleration_limits: Sequence[float] = (), max_start_deviation: Sequence[float] = (),
                 max_tracking_error: Sequence[float] = DEFAULT_TRACKING_ERROR,
                 rates: Sequence[bool] = (), measured: Sequence[bool] = ()) -> None:
        """rates / measured: per command (CommandConfig.rates / .measured; () = every command
        a measured position): velocity commands, and commands with a measured value."""
        self.num_joints, self.dt = command_stream(num_joints, dt)
        self._rates = np.array(rates or (False,) * self.num_joints, dtype=bool)
        self._measured = np.array(measured or (True,) * self.num_joints, dtype=bool)
        if self._rates.shape != (self.num_joints,) or self._measured.shape != (self.num_joints,):
            raise ValueError(f"rates and measured need one flag per command ({self.num_joints})")
        self._measures = bool(self._measured.any())  # fixed per shaper: read on every tick
        self._lock = threading.Lock()
        self.limits = Limits()
        self.configure(velocity_limits, acceleration_limits, max_start_deviation,
                       max_tracking_error)
        self._last: np.ndarray | None = None  # the last command
        self._vel = np.zeros(num_joints)  # its velocity (rad/s)
        self._time: float | None = None  # its time (None: a nominal period before the next)
        self._restart = False  # after a hold: resume once the measured pose agrees
        self._gated = False  # the newest chunk was refused by the gate: hold
        self._target: np.ndarray | None = None  # the target followed on the last tick
        self.limited_ticks = 0
        self.gated = 0  # chunks refused by the gate
        self.glitches = 0  # ticks held because the measured pose was beyond max_tracking_error
        self.faults = 0  # non-finite state found or refused (never expected; counted if it is)
        self.last_refusal: GateRefusal | None = None
        self.last_glitch: Glitch | None = None

    @property
    def measures(self) -> bool:
        """Some command has a measured value (then commands start only from a measured pose)."""
        return self._measures

    # the live limits (read-only views of the current Limits)
    velocity = property(lambda self: self.limits.velocity)
    acceleration = property(lambda self: self.limits.acceleration)
    deviation = property(lambda self: self.limits.deviation)
    tracking = property(lambda self: self.limits.tracking)

    def configure(self, velocity_limits: Sequence[float], acceleration_limits: Sequence[float],
                  max_start_deviation: Sequence[float], max_tracking_error: Sequence[float]) -> None:
        """Replace the live limits whole, in one swap: every value is given ([] = off; an empty
        max_tracking_error resumes from the last command whatever the measured pose).
        ValueError names the problem (nothing changes then)."""
        n, dt = self.num_joints, self.dt
        vel = limit("joint_velocity_limits", velocity_limits, n, dt)
        acc = limit("joint_acceleration_limits", acceleration_limits, n, dt)
        dev = limit("max_start_deviation", max_start_deviation, n, dt)
        tracking = limit("max_tracking_error", max_tracking_error, n, dt)
        vel, acc, dev, tracking = per_kind(vel, acc, dev, tracking, self._rates, self._measured)
        if dev is not None and not np.any(dev > 0):
            dev = None  # all zero: off
        with self._lock:
            self.limits = Limits(vel, acc, dev, tracking)

    def reset(self) -> None:
        """Activation: forget the last command; the next one is the measured pose."""
        with self._lock:
            self._last, self._restart, self._gated, self._target = None, False, False, None
            self._vel, self._time = np.zeros(self.num_joints), None

    def override(self, values: np.ndarray, now: float | None = None) -> None:
        """The command really sent was `values` (the control loop's last check held it instead
        of this tick's): continue from it, at rest, after a restart check."""
        v = np.asarray(values, dtype=np.float64)
        with self._lock:
            if v.shape == (self.num_joints,) and np.isfinite(v).all():
                self._last, self._time = v.copy(), now
            else:
                self._last, self._time = None, None  # start again from the measured pose
            self._vel = np.zeros(self.num_joints)
            self._restart, self._target = self._last is not None, None

    @property
    def last(self) -> np.ndarray | None:
        last = self._last
        return None if last is None else last.copy()

    # -- chunk gate (inference thread) ----------------------------------------------------------
    def gate(self, chunk: np.ndarray, stamp: float, now: float, measured: np.ndarray | None,
             lower: np.ndarray | None = None, upper: np.ndarray | None = None) -> GateRefusal | None:
        """None when the chunk may play (the gate is off, or its first playable step is within
        max_start_deviation of `measured`); else the refusal, and commands hold until a chunk
        passes. `lower` / `upper`: the player's joint limits (the step is compared clipped)."""
        with self._lock:
            dev = self.limits.deviation
            if dev is None:
                self._gated = False
                return None
            a = np.asarray(chunk, dtype=np.float64)
            step = int(np.floor(max(now - stamp, 0.0) / self.dt + 1e-9))
            step = min(step, a.shape[0] - 1)
            m = None if measured is None else np.asarray(measured, dtype=np.float64)
            checked = dev > 0  # commands with a measured value (the others have deviation 0)
            if m is None or not np.isfinite(m[checked]).all():
                refusal = GateRefusal(-1, float("nan"), float("nan"), step)
            else:
                row = a[step]
                if lower is not None:
                    row = np.maximum(row, lower)
                if upper is not None:
                    row = np.minimum(row, upper)
                dist = np.abs(row - m)
                over = np.where(checked, dist - dev, -np.inf)
                over = np.where(np.isfinite(dist) | ~checked, over, np.inf)  # a NaN step is over
                j = int(np.argmax(over))
                if over[j] <= 0:
                    self._gated = False
                    return None
                refusal = GateRefusal(j, float(dist[j]), float(dev[j]), step)
            self._gated = True
            self.gated += 1
            self.last_refusal = refusal
            return refusal

    @property
    def gate_holding(self) -> bool:
        return self._gated

    # -- one command (control thread) -----------------------------------------------------------
    def step(self, target: np.ndarray | None, measured: np.ndarray | None, hold: str = "",
             now: float | None = None) -> Shaped | None:
        """The command for this tick, or None (nothing to send).

        target: the player's value (None before the first chunk); measured: the newest measured
        value of each command when fresh, else None (commands without one: any value, NaN);
        hold: a reason to hold ("" = follow the target); now: the tick's time in seconds (None:
        one nominal period after the previous command)."""
        n = self.num_joints
        t = None if target is None else np.asarray(target, dtype=np.float64)
        if t is not None and (t.shape != (n,) or not all_finite(t)):
            t = None
            hold = hold or "non-finite target"
        m = None if measured is None else np.asarray(measured, dtype=np.float64)
        if m is not None and (m.shape != (n,) or not all_finite(m[self._measured])):
            m = None
        if m is None and not self._measures:
            m = np.full(n, np.nan)  # nothing to measure: no measured value is ever missing
        with self._lock:
            lim = self.limits
            self._heal()
            h = self._elapsed(now)
            if self._gated and not hold:
                hold = "gate"
            following = not hold and t is not None
            if self._last is None:
                if not following or m is None:
                    return None  # nothing commanded yet: nothing to hold, nowhere to start
                # the first command of an activation: the measured pose, at rest (a command
                # without a measured value: its target; a velocity command: 0)
                start = np.where(self._measured, m, np.where(self._rates, 0.0, t))
                self._last, self._vel, self._time = start, np.zeros(n), now
                self._restart, self._target = False, t.copy()
                return Shaped(start.copy(), np.zeros(n, bool), True, "")
            if following and self._restart:
                hold = self._resume_problem(m, lim)
                following = not hold
                if following:
                    self._restart, self._target = False, None
            if not following:
                self._restart, self._target = True, None
                return self._move(np.zeros(n), np.zeros(n), hold or "no target", False, h, now, lim)
            moved = t - self._target if self._target is not None else np.zeros(n)
            self._target = t.copy()
            return self._move(t - self._last, moved, "", True, h, now, lim)

    def _heal(self) -> None:
        """A state that is not finite is forgotten (never expected: counted in `faults`)."""
        if self._last is not None and not all_finite(self._last):
            self._last, self._time, self._target, self._restart = None, None, None, False
            self.faults += 1
        if not all_finite(self._vel):
            self._vel = np.zeros(self.num_joints)
            self.faults += 1

    def _elapsed(self, now: float | None) -> float:
        """Seconds since the last command, clamped to [0, MAX_ELAPSED_TICKS * dt]; shorter than
        MIN_ELAPSED_S counts as 0 (nothing moves)."""
        if now is None or self._time is None:
            return self.dt
        h = float(now) - self._time
        if not h >= MIN_ELAPSED_S:  # also NaN
            return 0.0
        return min(h, MAX_ELAPSED_TICKS * self.dt)

    def _resume_problem(self, m: np.ndarray | None, lim: Limits) -> str:
        """Why commands may not resume from the last command now ("" = they may)."""
        if m is None:
            return "no measured joint pose"
        if lim.tracking is None:
            return ""
        dist = np.where(self._measured, np.abs(m - self._last), 0.0)
        over = dist - lim.tracking
        j = int(np.argmax(over))
        if over[j] <= 0:
            return ""
        self.glitches += 1
        self.last_glitch = Glitch(j, float(dist[j]), float(lim.tracking[j]))
        return GLITCH

    def _move(self, distance: np.ndarray, moved: np.ndarray, holding: str, count: bool, h: float,
              now: float | None, lim: Limits) -> Shaped:
        """Step towards `distance` (per joint) within the limits over h seconds, the target
        having moved by `moved` since the last tick; holding: brake to rest."""
        v0 = self._vel
        amax = lim.acceleration
        if h <= 0.0:
            s = np.zeros_like(v0)  # no time passed: no step; the velocity stays
        else:
            vstep = np.inf if lim.velocity is None else lim.velocity * h
            if holding:  # positions stop where they are, velocity commands go to 0
                desired = np.where(self._rates, -self._last, 0.0)
            elif amax is None:
                desired = distance
            else:
                # move with the target, brake on what is left
                u = np.minimum(np.maximum(moved, -vstep), vstep)
                rel = distance - u
                d = np.abs(rel)
                with np.errstate(over="ignore"):  # d / amax may be inf: then no step (cap 0)
                    brake = 2.0 * d * h / (h + np.sqrt(h * h + 2.0 * (d / amax)))
                # no "land exactly" shortcut: its velocity d / h could not be braked within the
                # limit if the next tick came sooner; near the target this converges
                # quadratically (what is left after a step is about d^2 / (2 a h^2))
                cap = np.minimum(d, brake)
                desired = u + np.sign(rel) * cap
            s = desired
            # np.minimum / np.maximum: np.clip's result (NaN included), at half its cost per tick
            if amax is not None:
                s = np.minimum(np.maximum(s, (v0 - amax * h) * h), (v0 + amax * h) * h)
            s = np.minimum(np.maximum(s, -vstep), vstep)
        limited = np.abs(s - distance) > LIMIT_TOL if count else np.zeros(s.shape, bool)
        new = self._last + s
        vel = v0 if h <= 0.0 else s / h
        if not (all_finite(new) and all_finite(vel)):
            self.faults += 1  # never expected: keep the last command, at rest
            self._vel, self._time, self._restart, self._target = np.zeros_like(v0), now, True, None
            return Shaped(self._last.copy(), np.zeros(s.shape, bool), False, "non-finite step")
        if count and np.count_nonzero(limited):
            self.limited_ticks += 1
        self._last, self._vel, self._time = new, vel, now
        return Shaped(new.copy(), limited, False, holding)


class MeasuredPose:
    """The newest measured joint position and its stamp (node clock seconds). Written by the
    joint-state callback, read by the control loop: one tuple, swapped atomically."""

    def __init__(self) -> None:
        self._latest: tuple[float, np.ndarray] | None = None

    def update(self, stamp: float, values: np.ndarray) -> None:
        v = np.array(values, dtype=np.float64)  # a copy of its own, whatever the caller keeps
        if all_finite(v):
            self._latest = (float(stamp), v)

    def fresh(self, now: float, max_age_s: float) -> np.ndarray | None:
        """The position when it is at most max_age_s old (and not from the future beyond it)."""
        latest = self._latest
        if latest is None or abs(now - latest[0]) > max_age_s:
            return None
        return latest[1].copy()

    def clear(self) -> None:
        self._latest = None
