"""Replay recorded inputs through the Engine offline, as the node would have consumed them.

Input events (camera images, joint states, ~/ask and ~/instruction strings) are taken in the
order they were recorded (log time) and handed to the node's own Pairer with the node's own
conversions (robot/images.py, robot/values.py): each camera message (sensor_msgs/Image or
CompressedImage, per `camera_transports`) gets the node's cheap checks when it is fed and is
decoded, at its own size, only for a pair that is inferred (a frame that does not decode is a bad
input and its pair is skipped, as in the node); the engine prepares it for the model. Each
joint state is ordered by the joint names; an unstamped message uses its log time, like
the node uses its arrival time. As in the node's inference worker, the cameras are placed in model
order (values.place_cameras, --camera-keys) and only a checkpoint's n_action_steps of each chunk
are kept. After every event the newest complete pair is taken, as the node
does, and:
- `rate=0` (as fast as possible): every pair is inferred, in order. The node drops pairs that
  arrive while it is busy; offline nothing is dropped, so two settings see identical input and
  their actions and texts can be compared output for output.
- `rate>0`: events are fed at the recorded timing (scaled by `rate`) by one thread while a worker
  thread infers from the node's drop-oldest Mailbox, exactly like the node: what a setting
  would have produced live (pairs arriving during a frame are dropped and counted).
A chunk becomes available at its pair's time + the measured time to the chunk
(FrameOutput.actions_ms: the engine hands the chunk over before the frame's language work, as
the node acts on it) (rate 0) or when the engine handed it over (rate > 0, mapped back to
recorded time); the node's ChunkPlayer produces
joint_command at control_rate_hz (chunk steps on their own axis, chunk_rate_hz, interpolated
as in the node) over the recorded time span, ticked along with the inferences
(chunk_blend as the node's parameter), through the node's CommandShaper (velocity / acceleration
limits, start from the newest recorded joint state, the chunk gate at each chunk's arrival), so
the replayed commands are what the robot would have been sent. The deadman is not replayed
(taken as pressed). With `rtc` each inference is given what the player executes from its
observation on, as in the node; then the chunks depend on the measured frame times, so two rtc
runs are not output-for-output identical: compare them by their seam error.
"""
from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from oxygen_ros.robot.chunk_player import ChunkPlayer
from oxygen_ros.robot.command_config import BLENDS, CommandConfig
from oxygen_ros.robot.engine_port import EnginePort
from oxygen_ros.robot.images import CameraError, CameraFrame, decode_frames, parse_transports
from oxygen_ros.robot.inference import PairInference
from oxygen_ros.robot.pairing import Mailbox, Pair, Pairer
from oxygen_ros.robot.shaper import DEFAULT_TRACKING_ERROR, CommandShaper, MeasuredPose, per_joint
from oxygen_ros.robot.interface import RobotInterface
from oxygen_ros.robot.values import StateMapping, joint_state_to_vector

from .messages import stamp_ns


@dataclass
class ReplayConfig:
    camera_topics: list[str]
    joint_state_topic: str
    joint_names: list[str]
    instruction: str = ""
    ask_topic: str | None = None
    instruction_topic: str | None = None
    stamp_tolerance_s: float = 0.05
    max_stamp_offset_s: float = 1.0  # the node's input check against its clock (log time here); 0: off
    control_rate_hz: float = 50.0
    chunk_rate_hz: float = 0.0  # the chunk's step rate (the node's chunk_rate_hz); 0 = control_rate_hz
    crossfade_s: float = 0.1
    chunk_blend: str = "crossfade"  # crossfade | rtc | none, as the node's parameter
    chunk_skip_latency: bool = True  # as the node's parameter (False: a deliberate fault)
    chunk_execution: str = "stream"  # stream | sync, as the node's parameter
    chunk_replan_steps: int = 0  # as the node's parameter (0: every newer chunk at once)
    observation_timeout_s: float = 0.5
    rate: float = 0.0  # 0 = as fast as possible, else x recorded speed
    drain: bool = True  # after the last input, finish every language request (see Replayer.drain)
    camera_slots: tuple[int, ...] = ()  # model camera of each topic (robot/values.camera_slots)
    n_action_steps: int = 0  # the checkpoint's executed steps per chunk (0 = all), as the node
    # the node's command shaping parameters (one value or one per joint; [] = off)
    joint_velocity_limits: list[float] = field(default_factory=list)
    joint_acceleration_limits: list[float] = field(default_factory=list)
    max_start_deviation: list[float] = field(default_factory=list)
    max_tracking_error: list[float] = field(default_factory=lambda: list(DEFAULT_TRACKING_ERROR))
    camera_transports: tuple[str, ...] = ()  # raw | compressed per camera topic; () = all raw
    # the robot's state values and commands, as the node's parameters (robot/interface.py);
    # empty = joint_names, all position
    state_names: list[str] = field(default_factory=list)
    command_names: list[str] = field(default_factory=list)
    command_kinds: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.joint_names:
            raise ValueError("replay needs joint names")
        n = self.robot.num_commands  # the limits are per command, as the node's
        per_joint(self.joint_velocity_limits, n, "joint_velocity_limits", False)
        per_joint(self.joint_acceleration_limits, n, "joint_acceleration_limits", False)
        per_joint(self.max_start_deviation, n, "max_start_deviation", True)
        per_joint(self.max_tracking_error, n, "max_tracking_error", False)
        if not self.camera_topics:
            raise ValueError("replay needs at least one camera topic")
        self.camera_transports = parse_transports(list(self.camera_transports), len(self.camera_topics))
        if self.max_stamp_offset_s < 0:
            raise ValueError(f"max_stamp_offset_s must be >= 0 (0 = not checked), got {self.max_stamp_offset_s}")
        if self.rate < 0:
            raise ValueError(f"rate must be >= 0 (0 = as fast as possible), got {self.rate}")
        if not self.control_rate_hz > 0:
            raise ValueError(f"control_rate_hz must be > 0, got {self.control_rate_hz}")
        if not self.chunk_rate_hz >= 0:
            raise ValueError(f"chunk_rate_hz must be >= 0 (0 = control_rate_hz), got {self.chunk_rate_hz}")
        if self.chunk_blend not in BLENDS:
            raise ValueError(f"chunk_blend must be one of {', '.join(BLENDS)}, got {self.chunk_blend!r}")
        # the command path's own checks (the execution, with the blend) where the settings
        # enter, not first when a Replayer builds its player
        self.command_config(StateMapping(n))

    @property
    def robot(self) -> RobotInterface:
        """The state values and the commands' kinds (ValueError with the reason)."""
        return RobotInterface.from_params(self.joint_names, self.state_names, self.command_names,
                                          self.command_kinds)

    @property
    def step_s(self) -> float:
        """The chunk's step period (chunk_rate_hz, else the control period)."""
        return 1.0 / (self.chunk_rate_hz or self.control_rate_hz)

    def command_config(self, mapping: StateMapping) -> CommandConfig:
        """The command path's configuration, as the node builds it from its parameters."""
        robot = self.robot
        return CommandConfig(
            robot.num_commands, self.step_s, 1.0 / self.control_rate_hz,
            rates=robot.rates, measured=robot.measured,
            lower=() if mapping.lower is None else mapping.lower,
            upper=() if mapping.upper is None else mapping.upper, crossfade_s=self.crossfade_s,
            observation_timeout_s=self.observation_timeout_s, blend=self.chunk_blend,
            skip_latency=self.chunk_skip_latency, execution=self.chunk_execution,
            replan_steps=self.chunk_replan_steps,
            velocity_limits=self.joint_velocity_limits,
            acceleration_limits=self.joint_acceleration_limits,
            max_start_deviation=self.max_start_deviation,
            max_tracking_error=self.max_tracking_error)


@dataclass
class Frame:
    """One inference: the engine's output plus when it happened on the recorded clock."""

    pair: Pair
    header_ns: int  # the observation's exact stamp (camera 0's header)
    done_ns: int  # recorded-clock time the frame ended (its language updates)
    chunk: np.ndarray  # [horizon, joints] robot units
    out: Any  # FrameOutput
    # every head's chunk in robot units by name (a model with several heads; node: its topics)
    heads: dict[str, np.ndarray] = field(default_factory=dict)
    # recorded-clock time the chunk became available: the engine hands it over before the
    # frame's language work (FrameOutput.actions_ms); 0 = at done_ns
    chunk_ns: int = 0

    @property
    def ready_ns(self) -> int:
        """When the player takes the chunk."""
        return self.chunk_ns or self.done_ns


@dataclass
class ReplayResult:
    frames: list[Frame] = field(default_factory=list)
    source_ns: dict[int, int] = field(default_factory=dict)  # engine frame -> observation stamp
    pairs: int = 0
    dropped: int = 0
    bad_inputs: int = 0
    errors: list[str] = field(default_factory=list)
    commands: list[tuple[int, np.ndarray, bool]] = field(default_factory=list)  # (ns, values, stale)
    drained: list[Frame] = field(default_factory=list)  # frames run only to finish language
    limited_ticks: int = 0  # commands changed by the velocity / acceleration limits
    gated: int = 0  # chunks refused by the start gate


def _stamp(msg: Any, log_ns: int, max_offset_s: float) -> int:
    """The message's stamp (its log time when unstamped, as the node uses its arrival time);
    ValueError when it is further than max_offset_s from the log time (the node refuses inputs
    that far from its clock)."""
    ns = stamp_ns(msg.header.stamp)
    if not ns:
        return log_ns
    off = (ns - log_ns) * 1e-9
    if max_offset_s and abs(off) > max_offset_s:
        where = "ahead of" if off > 0 else "behind"
        raise ValueError(f"stamp {abs(off):.2f} s {where} the log time (max_stamp_offset_s {max_offset_s:g})")
    return ns


class Replayer:
    def __init__(self, engine: EnginePort, mapping: StateMapping, cfg: ReplayConfig) -> None:
        self.engine = engine
        self.mapping = mapping
        self.cfg = cfg
        self.pairer = Pairer(len(cfg.camera_topics), tolerance_s=cfg.stamp_tolerance_s)
        self.result = ReplayResult()
        self._asks: list[str] = []
        self._instruction = cfg.instruction or engine.config.instruction
        self._last_log = 0
        # the node's inference worker's own step (robot/inference.py): cameras in model order,
        # the rtc prior, the checkpoint's n_action_steps of the chunk in robot units
        self._inference = PairInference(tuple(cfg.camera_slots), cfg.n_action_steps)
        command = cfg.command_config(mapping)
        self.player = ChunkPlayer.from_config(command)
        self.robot = cfg.robot
        self.shaper = CommandShaper(command.num_joints, command.tick_s, *command.shaper_limits(),
                                    rates=command.rates, measured=command.measured)
        self._pose = MeasuredPose()  # the newest joint state stamped up to the current tick
        # joint states fed but stamped after the current tick (consumed as the ticks pass them)
        self._poses: collections.deque[tuple[int, np.ndarray]] = collections.deque()
        self._period_ns = int(round(1e9 / cfg.control_rate_hz))
        self._tick_ns: int | None = None  # the next control tick (recorded clock)
        # the shaper's time origin: seconds since the first tick keep float precision (an epoch
        # in float seconds has ~0.2 us steps, which the per-elapsed-time limits would feel)
        self._origin_ns: int | None = None
        self._ready: list[tuple[int, int, Frame]] = []  # chunks not yet handed over (heap by time)

    def _feed(self, ts: int, topic: str, msg: Any) -> Pair | None:
        cfg = self.cfg
        off = cfg.max_stamp_offset_s
        if topic in cfg.camera_topics or topic == cfg.joint_state_topic:
            if off and ts < self._last_log - off * 1e9:  # the clock jumped back: the node restarts pairing
                self.pairer.reset()
            self._last_log = ts
        try:
            if topic in cfg.camera_topics:
                cam = cfg.camera_topics.index(topic)
                ns = _stamp(msg, ts, off)
                frame = CameraFrame.checked(msg, cfg.camera_transports[cam])
                self.pairer.add_image(cam, ns * 1e-9, frame, ns)
            elif topic == cfg.joint_state_topic:
                vec = joint_state_to_vector(msg, self.robot.state_names)
                ns = _stamp(msg, ts, off)
                self.pairer.add_state(ns * 1e-9, vec, ns)
                self._poses.append((ns, vec))
            elif topic == cfg.ask_topic:
                if str(msg.data).strip():
                    self._asks.append(str(msg.data))
                return None
            elif topic == cfg.instruction_topic:
                text = str(msg.data).strip()
                if text and text != self._instruction:
                    self.pairer.retire()  # as the node: frames received before it never run under it
                    self._instruction = text
                return None
        except ValueError as exc:  # the node drops a bad input with a warning
            self._bad(topic, ts, str(exc))
            return None
        return self.pairer.newest_pair()

    def _bad(self, topic: str, ts: int, reason: str) -> None:
        self.result.bad_inputs += 1
        if len(self.result.errors) < 10:
            self.result.errors.append(f"{topic} at {ts} ns: {reason}")

    def _decoded(self, pair: Pair) -> Pair | None:
        """The pair with its camera frames decoded (once: a drained frame reuses them), or None
        when one does not decode: a bad input, the pair skipped (the node does the same)."""
        try:
            return dataclasses.replace(pair, images=tuple(decode_frames(pair.images)))
        except CameraError as exc:
            self._bad(self.cfg.camera_topics[exc.camera], int(pair.image_stamps[exc.camera] * 1e9),
                      str(exc))
            return None

    def _infer(self, pair: Pair, on_chunk: Callable[..., None] | None = None
               ) -> tuple[np.ndarray, Any]:
        from oxygen_ros.engine import RequestKind

        asks, self._asks = self._asks, []
        for prompt in asks:
            try:
                self.engine.ask(prompt, priority=1, kind=RequestKind.QUESTION)
            except ValueError as exc:
                self.result.errors.append(f"question rejected: {exc}")
        out, chunk = self._inference.step(self.engine, pair, pair.images, self.mapping, self.player,
                                          self._instruction, on_chunk=on_chunk)
        self.result.source_ns[out.frame] = int(pair.header_stamp)
        return chunk, out

    def input_topics(self) -> list[str]:
        cfg = self.cfg
        return [t for t in (*cfg.camera_topics, cfg.joint_state_topic, cfg.ask_topic,
                            cfg.instruction_topic) if t]

    def run(self, events: Iterable[tuple[int, str, Any]],
            progress: Callable[[Frame], None] | None = None) -> ReplayResult:
        """events: (log time ns, topic, message) of the input topics in log-time order (a
        stream: reader.messages(...)); nothing but the pairer's few frames is held."""
        span = [None, None]

        def seen(it: Iterable[tuple[int, str, Any]]):
            for ev in it:
                if span[0] is None:  # the control ticks run from the first recorded event on
                    span[0] = self._tick_ns = ev[0]
                span[1] = ev[0]
                yield ev
        events = seen(events)
        if self.cfg.rate > 0:
            self._run_timed(events, progress)
        else:
            for ts, topic, msg in events:
                pair = self._feed(ts, topic, msg)
                if pair is None:
                    continue
                self.result.pairs += 1
                pair = self._decoded(pair)
                if pair is None:
                    continue
                self._advance(ts)
                chunk, out = self._infer(pair)
                # the chunk is out when the engine has it (FrameOutput.actions_ms), as in the node
                fr = Frame(pair, int(pair.header_stamp), ts + int(out.frame_ms * 1e6), chunk, out,
                           self._inference.head_chunks(out.chunks, self.mapping, pair.state),
                           chunk_ns=ts + int(out.actions_ms * 1e6))
                self._hand(fr)
                if progress:
                    progress(fr)
        if span[0] is not None:
            last = max([span[1]] + [f.done_ns for f in self.result.frames])
            self._advance(last + self._period_ns - 1)
        self.result.limited_ticks, self.result.gated = self.shaper.limited_ticks, self.shaper.gated
        if self.cfg.drain:
            self._drain()
        return self.result

    def _drain(self, limit: int = 10_000) -> None:
        """Finish every language request still running when the inputs end: Engine.drain steps
        on the last observation with no new periodic requests (their action chunks are not
        output). Modes finish requests in different frames; draining makes every request end
        with its final message, so two settings' texts compare one for one."""
        frames = self.result.frames
        if not frames or not self.engine.has_unfinished():
            return
        last, t = frames[-1], frames[-1].done_ns
        for out in self.engine.drain(max_frames=limit):
            t += int(out.frame_ms * 1e6)
            self.result.source_ns[out.frame] = last.header_ns
            chunk = self.mapping.to_robot(out.actions[: self.cfg.n_action_steps or None],
                                          last.pair.state)
            self.result.drained.append(Frame(last.pair, last.header_ns, t, chunk, out))

    def _run_timed(self, events: Iterable[tuple[int, str, Any]],
                   progress: Callable[[Frame], None] | None) -> None:
        mailbox: Mailbox[tuple[Pair, int]] = Mailbox()
        rate = self.cfg.rate
        events = iter(events)
        first = next(events, None)
        if first is None:
            return
        t0_ns = first[0]
        wall0 = time.perf_counter()
        done = threading.Event()
        skipped = [0]  # pairs whose camera frames did not decode

        def recorded_now() -> int:
            return t0_ns + int((time.perf_counter() - wall0) * rate * 1e9)

        def worker() -> None:
            while True:
                item = mailbox.get(timeout=0.05)
                if item is None:
                    if done.is_set():
                        return
                    continue
                pair = self._decoded(item[0])
                if pair is None:
                    skipped[0] += 1
                    continue
                self._advance(recorded_now())
                ready: list[int] = []  # when the engine handed the chunk (recorded clock)
                chunk, out = self._infer(pair, on_chunk=lambda *_: ready.append(recorded_now()))
                fr = Frame(pair, int(pair.header_stamp), recorded_now(), chunk, out,
                           self._inference.head_chunks(out.chunks, self.mapping, pair.state),
                           chunk_ns=ready[0] if ready else 0)
                self._hand(fr)
                if progress:
                    progress(fr)

        th = threading.Thread(target=worker, name="replay-worker", daemon=True)
        th.start()
        for ts, topic, msg in itertools.chain([first], events):
            delay = (ts - t0_ns) / 1e9 / rate - (time.perf_counter() - wall0)
            if delay > 0:
                time.sleep(delay)
            pair = self._feed(ts, topic, msg)
            if pair is not None:
                self.result.pairs += 1
                mailbox.put((pair, ts))
        # let the worker finish every pair it has not dropped before stopping it
        while th.is_alive() and \
                len(self.result.frames) + skipped[0] < mailbox.put_count - mailbox.dropped:
            time.sleep(0.005)
        done.set()
        th.join()
        mailbox.close()
        self.result.dropped = mailbox.dropped

    def _hand(self, fr: Frame) -> None:
        """A finished frame: its chunk goes to the player at its ready time."""
        self.result.frames.append(fr)
        heapq.heappush(self._ready, (fr.ready_ns, len(self.result.frames), fr))

    def _measured(self, ns: int) -> np.ndarray | None:
        """The fresh measured value of each command at `ns` (NaN: a command without one)."""
        return self.robot.measured_commands(self._pose.fresh(ns * 1e-9,
                                                             self.cfg.observation_timeout_s))

    def _poses_until(self, ns: int) -> None:
        while self._poses and self._poses[0][0] <= ns:
            stamp, vec = self._poses.popleft()
            self._pose.update(stamp * 1e-9, vec)

    def _advance(self, until_ns: int) -> None:
        """The node's control loop up to `until_ns`: at every tick, first the chunks done by
        then pass the start gate (against the newest joint state stamped by then) to the
        player, then the tick plays (ChunkPlayer.tick) through the CommandShaper."""
        cfg = self.cfg
        if self._tick_ns is None:
            self._tick_ns = until_ns
        if self._origin_ns is None:
            self._origin_ns = self._tick_ns
        while self._tick_ns <= until_ns:
            now = self._tick_ns
            while self._ready and self._ready[0][0] <= now:
                fr = heapq.heappop(self._ready)[2]
                at = fr.ready_ns
                if not self.player.takes(fr.header_ns * 1e-9, at * 1e-9):
                    # sync: observed in motion; replan_steps: too soon (as the node)
                    self.player.pass_over(fr.header_ns * 1e-9)
                    continue
                self._poses_until(at)
                measured = self._measured(at)
                first = self.player.first_value(fr.chunk, fr.header_ns * 1e-9, at * 1e-9)
                if self.shaper.gate(first[None], at * 1e-9, at * 1e-9, measured) is None:
                    self.player.set_chunk(fr.chunk, fr.header_ns * 1e-9, at * 1e-9)
            self._poses_until(now)
            sample = self.player.tick(now * 1e-9)
            hold = "stale" if sample is not None and sample.stale else ""
            shaped = self.shaper.step(None if sample is None else sample.values,
                                      self._measured(now), hold, now=(now - self._origin_ns) * 1e-9)
            if shaped is not None and sample is not None:
                self.result.commands.append((now, shaped.values, bool(shaped.holding)))
            self._tick_ns += self._period_ns
