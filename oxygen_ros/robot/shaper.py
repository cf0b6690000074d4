"""CommandShaper: the last step before a command leaves the node. Pure (numpy, no rclpy).

The ChunkPlayer says where the chunks want the joints now (joint-limit clipped); the shaper
decides what is sent:
- Velocity / acceleration limits: every command differs from the previous one by at most
  `v_max * dt` per joint, and that step differs from the previous step by at most
  `a_max * dt^2`. Approaching a target, the step is also capped so that the rest of the way can
  still be braked within `a_max` (step s with s + s^2 / (2 a_max dt^2) <= distance): the command
  stops at a target that stands still instead of overshooting it. The distance is taken relative
  to the target's own motion over the last tick (capped at the velocity limit), so a chunk that
  moves within the limits is followed exactly instead of with a lag. A target that jumps can still
  be overshot; the limits themselves are never exceeded (the velocity limit wins when it is
  lowered live below the current speed).
- Start from the measured pose: the first command after `reset()` (activation), after any hold
  and after the deadman comes back is the newest measured joint position (`measured`, which the
  caller passes only when it is fresh); without one no command is made (before the first
  command) or the hold goes on. From there the limits bring the commands to the chunk.
- Hold: while the caller gives a hold reason (stale chunk, deadman, ...) or the last chunk was
  refused by the gate, commands stop following the target and brake to a standstill within the
  acceleration limit (at once without one).
- Chunk gate (`gate`): a chunk whose first playable step (the step the player plays at its
  arrival, clipped like the player clips) is further than `max_start_deviation` from the measured
  pose is refused; commands hold until a chunk passes.
- Deadman: `Deadman` tells whether a fresh `true` arrived within its timeout.
Non-finite targets are treated as a hold and non-finite measured poses as none: no NaN is ever
returned. Empty limits (the defaults) leave the commands as the player made them, except for the
start from the measured pose.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .values import command_stream

LIMIT_TOL = 1e-9  # a step this close to the target's counts as not limited (float noise)


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
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must hold finite numbers, got {a.tolist()}")
    if np.any(a < 0) or (not zero_ok and np.any(a == 0)):
        what = ">= 0 (0 = off)" if zero_ok else "> 0 (empty = no limit)"
        raise ValueError(f"{name} must be {what}, got {a.tolist()}")
    return np.broadcast_to(a, (num_joints,)).copy()


@dataclass(frozen=True)
class Shaped:
    values: np.ndarray  # [joints] float64, finite: the command to send
    limited: np.ndarray  # [joints] bool: a limit changed this command (following the target)
    start: bool  # this command is the measured pose (activation, after a hold, deadman back)
    holding: str  # why commands hold ("" while following the target)


@dataclass(frozen=True)
class GateRefusal:
    joint: int  # index of the joint furthest over its allowed deviation (-1: no measured pose)
    distance: float  # |first playable step - measured| of that joint (rad)
    limit: float  # its max_start_deviation
    step: int  # the chunk step that would have played first


class CommandShaper:
    def __init__(self, num_joints: int, dt: float, velocity_limits: Sequence[float] = (),
                 acceleration_limits: Sequence[float] = (), max_start_deviation: Sequence[float] = ()
                 ) -> None:
        self.num_joints, self.dt = command_stream(num_joints, dt)
        self._lock = threading.Lock()
        self.velocity = self.acceleration = self.deviation = None
        self.configure(velocity_limits, acceleration_limits, max_start_deviation)
        self._last: np.ndarray | None = None  # the last command
        self._step = np.zeros(num_joints)  # its step from the one before (velocity * dt)
        self._restart = True  # the next followed command starts from the measured pose
        self._gated = False  # the newest chunk was refused by the gate: hold
        self._target: np.ndarray | None = None  # the target followed on the last tick
        self.limited_ticks = 0
        self.gated = 0  # chunks refused by the gate
        self.last_refusal: GateRefusal | None = None

    def configure(self, velocity_limits: Sequence[float] | None = None,
                  acceleration_limits: Sequence[float] | None = None,
                  max_start_deviation: Sequence[float] | None = None) -> None:
        """Change the live limits (None: keep; [] = off). ValueError names the problem."""
        n = self.num_joints
        vel = self.velocity if velocity_limits is None else per_joint(
            velocity_limits, n, "joint_velocity_limits", zero_ok=False)
        acc = self.acceleration if acceleration_limits is None else per_joint(
            acceleration_limits, n, "joint_acceleration_limits", zero_ok=False)
        dev = self.deviation if max_start_deviation is None else per_joint(
            max_start_deviation, n, "max_start_deviation", zero_ok=True)
        if dev is not None and not np.any(dev > 0):
            dev = None  # all zero: off
        with self._lock:
            self.velocity, self.acceleration, self.deviation = vel, acc, dev

    def reset(self) -> None:
        """Activation: forget the last command; the next one is the measured pose."""
        with self._lock:
            self._last, self._restart, self._gated, self._target = None, True, False, None
            self._step = np.zeros(self.num_joints)

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
            dev = self.deviation
            if dev is None:
                self._gated = False
                return None
            a = np.asarray(chunk, dtype=np.float64)
            step = int(np.floor(max(now - stamp, 0.0) / self.dt + 1e-9))
            step = min(step, a.shape[0] - 1)
            m = None if measured is None else np.asarray(measured, dtype=np.float64)
            if m is None or not np.all(np.isfinite(m)):
                refusal = GateRefusal(-1, float("nan"), float("nan"), step)
            else:
                row = a[step]
                if lower is not None:
                    row = np.maximum(row, lower)
                if upper is not None:
                    row = np.minimum(row, upper)
                dist = np.abs(row - m)
                over = np.where(dev > 0, dist - dev, -np.inf)
                over = np.where(np.isfinite(dist), over, np.inf)  # a NaN step is over
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
    def step(self, target: np.ndarray | None, measured: np.ndarray | None, hold: str = "") -> Shaped | None:
        """The command for this tick, or None (nothing to send).

        target: the player's value (None before the first chunk); measured: the newest measured
        joint position when fresh, else None; hold: a reason to hold ("" = follow the target)."""
        n = self.num_joints
        t = None if target is None else np.asarray(target, dtype=np.float64)
        if t is not None and (t.shape != (n,) or not np.all(np.isfinite(t))):
            t = None
            hold = hold or "non-finite target"
        m = None if measured is None else np.asarray(measured, dtype=np.float64)
        if m is not None and (m.shape != (n,) or not np.all(np.isfinite(m))):
            m = None
        with self._lock:
            if self._gated and not hold:
                hold = "gate"
            following = not hold and t is not None
            if following and self._restart:
                if m is not None:  # start here: the measured pose, at rest
                    self._last, self._step, self._restart = m.copy(), np.zeros(n), False
                    self._target = t.copy()
                    return Shaped(m.copy(), np.zeros(n, bool), True, "")
                hold = "no measured joint pose"
                following = False
            if self._last is None:
                return None  # nothing commanded yet: nothing to hold
            if not following:
                self._restart, self._target = True, None
                return self._move(np.zeros(n), np.zeros(n), hold or "no target", count=False)
            moved = t - self._target if self._target is not None else np.zeros(n)
            self._target = t.copy()
            return self._move(t - self._last, moved, "", count=True)

    def _move(self, distance: np.ndarray, moved: np.ndarray, holding: str, count: bool) -> Shaped:
        """Step towards `distance` (per joint) within the limits, the target having moved by
        `moved` since the last tick; holding: brake to rest."""
        dt, prev = self.dt, self._step
        vstep = np.inf if self.velocity is None else self.velocity * dt
        dstep = np.inf if self.acceleration is None else self.acceleration * dt * dt
        if holding:
            desired = np.zeros_like(prev)
        elif self.acceleration is None:
            desired = distance
        else:
            u = np.clip(moved, -vstep, vstep)  # move with the target, brake on what is left
            rel = distance - u
            d = np.abs(rel)
            brake = dstep * (np.sqrt(1.0 + 2.0 * d / dstep) - 1.0)  # can still stop after it
            cap = np.where(d <= dstep, d, np.minimum(d, brake))  # close: land exactly
            desired = u + np.sign(rel) * cap
        s = np.clip(desired, prev - dstep, prev + dstep)
        s = np.clip(s, -vstep, vstep)
        limited = np.abs(s - distance) > LIMIT_TOL if count else np.zeros(s.shape, bool)
        if count and limited.any():
            self.limited_ticks += 1
        self._last = self._last + s
        self._step = s
        return Shaped(self._last.copy(), limited, False, holding)


class MeasuredPose:
    """The newest measured joint position and its stamp (node clock seconds). Written by the
    joint-state callback, read by the control loop: one tuple, swapped atomically."""

    def __init__(self) -> None:
        self._latest: tuple[float, np.ndarray] | None = None

    def update(self, stamp: float, values: np.ndarray) -> None:
        v = np.asarray(values, dtype=np.float64)
        if np.all(np.isfinite(v)):
            self._latest = (float(stamp), v.copy())

    def fresh(self, now: float, max_age_s: float) -> np.ndarray | None:
        """The position when it is at most max_age_s old (and not from the future beyond it)."""
        latest = self._latest
        if latest is None or abs(now - latest[0]) > max_age_s:
            return None
        return latest[1].copy()

    def clear(self) -> None:
        self._latest = None


class Deadman:
    """Operator heartbeat: go while the newest message is true and arrived within timeout_s.
    enabled False (no topic): always go. Times are monotonic seconds of arrival."""

    def __init__(self, enabled: bool, timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError(f"deadman timeout_s must be > 0, got {timeout_s}")
        self.enabled = bool(enabled)
        self.timeout_s = float(timeout_s)
        self._last: tuple[float, bool] | None = None  # (arrival, value), swapped atomically

    def press(self, value: bool, now: float) -> None:
        self._last = (float(now), bool(value))

    def go(self, now: float) -> tuple[bool, str]:
        """(go, why not); no side effects (read from the control and the inference thread)."""
        if not self.enabled:
            return True, ""
        last = self._last
        if last is None:
            return False, "no message yet"
        if not last[1]:
            return False, "released (false)"
        if now - last[0] > self.timeout_s:
            return False, f"no true for {now - last[0]:.2f} s (timeout {self.timeout_s:g} s)"
        return True, ""
