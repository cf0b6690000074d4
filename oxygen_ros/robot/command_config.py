"""CommandConfig: every setting of the command path (ChunkPlayer + CommandShaper) in one immutable
value. Pure (numpy, no rclpy).

A live parameter change never edits one setting in place: the node builds a NEW CommandConfig
from the FULL current parameter map and hands it whole to the player and the shaper
(ChunkPlayer.configure, CommandShaper.configure), so that no parameter can reset another (a
partial update used to drop the joint limits: issue 26).

`clip_to_limits` is THE joint-limit clip: ~/joint_command (the player), ~/action_chunk (the
node's publishers) and oxygen-replay's commands and chunks all go through it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .shaper import DEFAULT_TRACKING_ERROR, limit

BLENDS = ("crossfade", "rtc", "none")
# stream: chunks replace each other as they come, the robot never stops for inference while a
# chunk lasts; sync: each chunk plays to its end, the robot holds still, and only a chunk made
# from an observation taken at rest is played next (openpi's and LeRobot's synchronous loop)
EXECUTIONS = ("stream", "sync")
MAX_REPLAN_STEPS = 10000  # the node's chunk_replan_steps bound (n_action_steps's)


def clip_to_limits(values: np.ndarray, lower: np.ndarray | None, upper: np.ndarray | None
                   ) -> np.ndarray:
    """values (any leading shape, joints last) clipped to the per-joint limits (None = none),
    float64."""
    out = np.asarray(values, dtype=np.float64)
    if lower is not None:
        out = np.maximum(out, lower)
    if upper is not None:
        out = np.minimum(out, upper)
    return out


def _floats(values: Sequence[float] | np.ndarray | None) -> tuple[float, ...]:
    return () if values is None else tuple(float(v) for v in np.asarray(values, np.float64).ravel())


@dataclass(frozen=True)
class CommandConfig:
    num_joints: int
    step_s: float  # the chunk's time axis: step i of a chunk is meant for stamp + i * step_s
    tick_s: float | None = None  # the control tick period (None = step_s: one step per tick)
    lower: tuple[float, ...] = ()  # per-joint joint limits (both empty = none)
    upper: tuple[float, ...] = ()
    crossfade_s: float = 0.1
    observation_timeout_s: float = 0.5
    future_tolerance_s: float = 1.0
    blend: str = "crossfade"
    # the shaper's limits as the parameters give them: one value or one per joint; () = off
    velocity_limits: tuple[float, ...] = ()
    acceleration_limits: tuple[float, ...] = ()
    max_start_deviation: tuple[float, ...] = ()
    max_tracking_error: tuple[float, ...] = DEFAULT_TRACKING_ERROR  # restarts (shaper.py)
    # True (right): a new chunk plays from the step due now, skipping the steps whose time
    # passed during inference. False plays every chunk from step 0 at its arrival, one latency
    # late: a deliberate fault for sensitivity runs (a loop that forgot its latency)
    skip_latency: bool = True
    execution: str = "stream"  # EXECUTIONS
    # stream: a newer chunk takes over only once the one playing has played this many chunk
    # steps since its hand-over (or its plan ran out); chunks that come sooner are passed over.
    # 0: every newer chunk at once. A policy that re-decides every few steps can dither between
    # its modes; openpi's replan_steps, without stopping the robot. sync: no effect
    replan_steps: int = 0
    # per command (robot/interface.py; () = every command a measured position, a joint robot):
    # rates: a velocity command (held per step, 0 when holding; the velocity limit bounds its
    # value, the acceleration limit its change per second); measured: has a measured value
    rates: tuple[bool, ...] = ()
    measured: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        n = self.num_joints
        if not (isinstance(n, (int, np.integer)) and n >= 1):
            raise ValueError(f"num_joints must be an integer >= 1, got {n!r}")
        tick = self.step_s if self.tick_s is None else self.tick_s
        for name, value in (("step_s", self.step_s), ("tick_s", tick)):
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite period > 0 s, got {value!r}")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 - frozen: normalise once
        set_("num_joints", int(n))
        set_("step_s", float(self.step_s))
        set_("tick_s", float(tick))
        for name in ("lower", "upper", "velocity_limits", "acceleration_limits",
                     "max_start_deviation", "max_tracking_error"):
            set_(name, _floats(getattr(self, name)))
        lo, hi = self.lower, self.upper
        if bool(lo) != bool(hi):
            raise ValueError("joint limits need both lower and upper (or neither)")
        for name, arr in (("lower", lo), ("upper", hi)):
            if arr and (len(arr) != n or not np.all(np.isfinite(arr))):
                raise ValueError(f"{name} joint limits must be {n} finite values, got {list(arr)}")
        if lo and any(a > b for a, b in zip(lo, hi)):
            raise ValueError("lower joint limits must be <= upper joint limits for every joint")
        if self.blend not in BLENDS:
            raise ValueError(f"blend must be one of {', '.join(BLENDS)}, got {self.blend!r}")
        if not (np.isfinite(self.crossfade_s) and self.crossfade_s >= 0):
            raise ValueError(f"crossfade_s must be >= 0, got {self.crossfade_s!r}")
        if not (np.isfinite(self.observation_timeout_s) and self.observation_timeout_s > 0):
            raise ValueError(f"observation_timeout_s must be > 0, got {self.observation_timeout_s!r}")
        if not (np.isfinite(self.future_tolerance_s) and self.future_tolerance_s >= 0):
            raise ValueError(f"future_tolerance_s must be >= 0, got {self.future_tolerance_s!r}")
        if self.execution not in EXECUTIONS:
            raise ValueError(f"execution must be one of {', '.join(EXECUTIONS)}, got {self.execution!r}")
        if self.execution == "sync" and self.blend == "rtc":
            raise ValueError("chunk_blend rtc continues a plan the robot is executing; with "
                             "chunk_execution sync every chunk starts from rest: use crossfade or "
                             "none (both play it as it is)")
        if not (isinstance(self.replan_steps, (int, np.integer)) and not isinstance(self.replan_steps, bool)
                and 0 <= self.replan_steps <= MAX_REPLAN_STEPS):
            raise ValueError(f"replan_steps must be an integer in 0..{MAX_REPLAN_STEPS} chunk steps, "
                             f"got {self.replan_steps!r}")
        set_("replan_steps", int(self.replan_steps))
        if not isinstance(self.skip_latency, (bool, np.bool_)):
            raise ValueError(f"skip_latency must be true or false, got {self.skip_latency!r}")
        set_("skip_latency", bool(self.skip_latency))
        for name in ("rates", "measured"):
            flags = tuple(bool(x) for x in getattr(self, name))
            if flags and len(flags) != n:
                raise ValueError(f"{name} must have one flag per command ({n}), got {len(flags)}")
            set_(name, flags if any(f != (name == "measured") for f in flags) else ())
        set_("crossfade_s", float(self.crossfade_s))
        set_("observation_timeout_s", float(self.observation_timeout_s))
        set_("future_tolerance_s", float(self.future_tolerance_s))
        # the shaper's own check, per control tick (a limit whose step underflows is refused)
        for name, values in (("joint_velocity_limits", self.velocity_limits),
                             ("joint_acceleration_limits", self.acceleration_limits),
                             ("max_start_deviation", self.max_start_deviation),
                             ("max_tracking_error", self.max_tracking_error)):
            limit(name, values, n, self.tick_s)

    # -- derived (arrays are fresh copies: the config itself never changes) -------------------
    @property
    def rate_mask(self) -> np.ndarray:
        return np.array(self.rates or (False,) * self.num_joints, dtype=bool)

    @property
    def measured_mask(self) -> np.ndarray:
        return np.array(self.measured or (True,) * self.num_joints, dtype=bool)

    def _bound(self, limits: tuple[float, ...], sign: float) -> np.ndarray | None:
        """The clip bound on one side: the joint limits, and for velocity commands also the
        velocity limit (+-) on their value."""
        out = np.asarray(limits, dtype=np.float64) if limits else None
        if self.rates and self.velocity_limits:
            v = np.broadcast_to(np.asarray(self.velocity_limits, np.float64), (self.num_joints,))
            rate = np.where(self.rate_mask, sign * v, sign * np.inf)
            out = rate if out is None else (np.minimum if sign > 0 else np.maximum)(out, rate)
        return out

    @property
    def lower_array(self) -> np.ndarray | None:
        return self._bound(self.lower, -1.0)

    @property
    def upper_array(self) -> np.ndarray | None:
        return self._bound(self.upper, 1.0)

    @property
    def steps_per_tick(self) -> float:
        """Chunk steps one control tick advances (1 when the control rate is the chunk's rate;
        0.25 for 200 Hz control from a 50 Hz chunk)."""
        return self.tick_s / self.step_s

    def clip(self, values: np.ndarray) -> np.ndarray:
        return clip_to_limits(values, self.lower_array, self.upper_array)

    def shaper_limits(self) -> tuple[tuple[float, ...], ...]:
        """CommandShaper.configure's arguments, all four, every time (as the parameters give
        them: the shaper applies them per command kind, robot/shaper.py)."""
        return (self.velocity_limits, self.acceleration_limits, self.max_start_deviation,
                self.max_tracking_error)

    def replace(self, **changes: Any) -> "CommandConfig":
        """A new config with `changes` (validated again); this one is unchanged."""
        return dataclasses.replace(self, **changes)
