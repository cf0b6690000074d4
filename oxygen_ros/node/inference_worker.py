"""The inference worker: one thread taking the newest paired observation and running Engine.step.

Per frame, in order: decode the pair's camera frames (once, here: the subscription callbacks
only check and keep the messages; a frame that does not decode is refused on its topic and the
pair skipped, never a failing frame; so is a pair the inputs retired when the instruction changed),
apply the newest live engine config (Engine.apply_config),
hand queued questions to the engine (Engine.ask), build the Observation, run Engine.step; the
moment the step has the action chunk (before the frame's language work) map it to robot units,
give it to the ChunkPlayer and publish it (and, for a model with several heads, every head's);
after the step, stats, text updates and markers. A failing frame is counted and reported
(diagnostics) and the loop goes on with the next observation. This module knows engine types,
never message types.
"""
from __future__ import annotations

import collections
import os
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

from oxygen_ros.robot.chunk_player import ChunkPlayer
from oxygen_ros.robot.engine_port import EnginePort
from oxygen_ros.robot.inference import PairInference
from oxygen_ros.robot.pairing import Mailbox, Pair
from oxygen_ros.robot.threads import pin_thread

# frame -> source header stamp, for text updates of requests born earlier (~80 s at 25 Hz; a
# request older than that is stamped with the current frame's stamp)
STAMPS_KEPT = 2048
ERROR_WINDOW_S = 5.0  # an error is "recent" (diagnostics) this long, unless a frame succeeded since


class InferenceWorker:
    def __init__(self, engine: EnginePort, mapping: Callable[[], Any], player: ChunkPlayer, mailbox: Mailbox[Pair],
                 publishers, text, joint_names: list[str], instruction: str, frame_id: str,
                 warn: Callable[[str, str], None], node, camera_slots: tuple[int, ...] = (),
                 n_action_steps: int = 0, decode: Callable[[Pair], list | None] | None = None,
                 admit: Callable[..., tuple[str | None, bool]] | None = None,
                 cpu: Any = None, retired: Callable[[float], bool] | None = None) -> None:
        self.engine = engine
        self._cpu = cpu  # robot/input_health.CpuTime: the frames' CPU time, for the diagnostics
        self._decode = decode  # Inputs.decode_pair: the pair's camera images, None if refused
        # (chunk, stamp, now) -> (refusal, publish): the control loop's start gate / deadman
        self._admit = admit
        # Pairer.retired: a pair made before the instruction changed, whose picture would be run
        # (and described) as the new task (measured: "the window is open" said of the pressed
        # button of the episode before)
        self._retired = retired
        # pair -> Observation -> step -> robot chunk, as oxygen-replay does (camera_slots: model
        # camera of each topic; n_action_steps: the checkpoint's executed steps per chunk)
        self._infer = PairInference(tuple(camera_slots), n_action_steps, tracking=True)
        self._mapping = mapping  # () -> the current StateMapping (joint limits are live)
        self.player = player
        self.mailbox = mailbox
        self._pubs = publishers
        self._text = text  # routes request updates to ~/memory, ~/answer and ~/ask goals
        self._names = joint_names
        self._node = node
        self._warn = warn
        self._lock = threading.Lock()
        self._pending: Any = None  # the newest validated EngineConfig, not applied yet
        self.instruction = instruction
        self.frame_id = frame_id
        self._thread: threading.Thread | None = None
        self._stamps: collections.OrderedDict[int, Any] = collections.OrderedDict()
        # statistics (diagnostics, ~/frame_stats)
        self.frames = 0
        self.step_errors = 0
        self.placement = "any CPU"  # the inference thread's CPUs (inference_cpus)
        self.last_error = ""
        self.last_error_at: float | None = None  # monotonic
        self.last_frame_at: float | None = None  # monotonic, last successful frame
        self.action_rate = 0.0
        self.tokens_per_s = 0.0
        self.last_frame_ms = 0.0
        self.last_out = None
        self.memory_text = ""
        self.retired_pairs = 0  # pairs skipped: made before the instruction changed

    # -- live settings (called from parameter callbacks) ---------------------------------------
    def update_engine(self, config: Any) -> None:
        """An EngineConfig that Engine.validate_changes returned (in the parameter callback),
        applied before the next frame without checking it again; a newer one replaces it (each
        carries every live setting)."""
        with self._lock:
            self._pending = config

    # -- thread ---------------------------------------------------------------------------------
    def start(self, stop: threading.Event, priority: int, cpus: Sequence[int] = ()) -> None:
        self._thread = threading.Thread(target=self._loop, args=(stop, priority, cpus),
                                        name="oxygen-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """The run's stop event must be set (and the mailbox closed) by the caller first."""
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)
            if thread.is_alive():
                self._node.get_logger().error(f"inference worker did not stop within {timeout} s")

    def _loop(self, stop: threading.Event, priority: int, cpus: Sequence[int] = ()) -> None:
        # With control_priority set, this thread runs SCHED_FIFO one level BELOW the control
        # thread: both share Python's GIL, and a normal-priority worker preempted by other
        # processes while holding it blocks the control thread (priority inversion; measured
        # on a loaded 2-core machine: period p99 deviation 20-40 ms -> 2 ms).
        if priority > 1:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority - 1))
            except (AttributeError, OSError):
                pass  # the control thread already warned
        if cpus:  # inference_cpus: the model's thread stays on its cores (robot/threads.py)
            self.placement = pin_thread(cpus)
            if not self.placement.startswith("CPUs"):
                self._warn("cpus", f"inference_cpus: {self.placement}")
        while not stop.is_set():
            pair = self.mailbox.get(timeout=0.1)
            if pair is None or stop.is_set():
                continue
            cpu0 = time.thread_time()
            try:
                self.frame(pair)
            except Exception as exc:  # noqa: BLE001 - keep running; report in diagnostics
                if not self._node.context.ok():
                    return  # shutting down (Ctrl-C): publishers are gone
                self.step_errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                self.last_error_at = time.monotonic()
                self._warn("step", f"inference failed on a frame: {self.last_error}")
            finally:
                if self._cpu is not None:
                    self._cpu.add("inference", time.thread_time() - cpu0)

    # -- one frame ------------------------------------------------------------------------------
    def frame(self, pair: Pair) -> Any:
        # the instruction first, then the pair's check: the instruction's applier retires the
        # pairs before it sets the new text, so a pair that passes was made for this text
        instruction = self.instruction
        if self._retired is not None and self._retired(pair.stamp):
            self.retired_pairs += 1
            return None  # the player goes on with its chunk until the next camera frame
        cams = self._decode(pair) if self._decode is not None else list(pair.images)
        if cams is None:
            return None  # a camera frame did not decode: refused on its topic
        engine = self.engine
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            try:
                engine.apply_config(pending)  # validated where it entered (on_set)
            except ValueError as exc:
                self.last_error, self.last_error_at = f"apply_config: {exc}", time.monotonic()
                self._warn("apply_config", f"parameter change not applied: {exc}")
        self._text.hand_over(engine)  # cancelled questions out, queued ones in
        mapping = self._mapping()
        stamp = pair.header_stamp

        def hand(chunk: np.ndarray, heads: dict[str, np.ndarray]) -> None:
            # inside Engine.step, the moment the chunk exists: the robot acts on it while the
            # frame's language work runs (isolated mode decodes whole texts after it)
            now = self._node.get_clock().now().nanoseconds * 1e-9
            if not self.player.takes(pair.stamp, now):
                # chunk_execution sync: observed in motion; chunk_replan_steps: the playing
                # chunk has not played its steps yet. Neither played nor published
                self.player.pass_over(pair.stamp)
                return
            refusal, publish = self._admit(chunk, pair.stamp, now) if self._admit else (None, True)
            if refusal is None and not self.player.set_chunk(chunk, pair.stamp, now):
                self._warn("chunk", "action chunk rejected (non-finite values): holding the last command")
            if publish:
                self._pubs.chunk(chunk, self._names, stamp, self.player.dt, self.frame_id,
                                 heads=heads, lower=self.player.lower, upper=self.player.upper)

        # with chunk_blend rtc the step continues what the player executes (robot/rtc_prior.py)
        out, _ = self._infer.step(engine, pair, cams, mapping, self.player, instruction,
                                  on_chunk=hand)
        self._stamps[out.frame] = stamp
        while len(self._stamps) > STAMPS_KEPT:
            self._stamps.popitem(last=False)
        self._account(out)
        self._pubs.stats(out, stamp, self.action_rate, self.tokens_per_s)
        for up in out.updates:
            src = self._stamps.get(up.birth_frame, stamp)
            self._text.route(up, src)
            if up.kind == "memory" and up.is_final:
                self.memory_text = up.text
        stats = (f"{out.mode} k={out.k} N={out.n} S={out.s} | {out.frame_ms:.0f} ms/frame "
                 f"{self.action_rate:.1f} Hz | batch {out.batch_size} | "
                 f"KV {out.kv.blocks_used}/{out.kv.blocks_total}")
        self._pubs.markers_text(self.memory_text, stats, stamp, self.frame_id)
        return out

    def _account(self, out) -> None:
        wall = time.monotonic()
        if self.last_frame_at is not None:
            dt = max(wall - self.last_frame_at, 1e-6)
            a = 0.2
            self.action_rate = (1 - a) * self.action_rate + a / dt if self.action_rate else 1 / dt
            self.tokens_per_s = (1 - a) * self.tokens_per_s + a * out.tokens_this_frame / dt
        self.last_frame_at = wall
        self.frames += 1
        self.last_frame_ms = out.frame_ms
        self.last_out = out

    def source_stamp(self, frame: int) -> Any:
        return self._stamps.get(frame)

    # -- diagnostics ----------------------------------------------------------------------------
    def status(self, active: bool, state: str, timeout_s: float) -> tuple[str, str]:
        now = time.monotonic()
        if not active:
            return "OK", f"{state}: not running"
        recent_error = (self.last_error_at is not None and now - self.last_error_at < ERROR_WINDOW_S
                        and (self.last_frame_at is None or self.last_frame_at < self.last_error_at))
        if recent_error:
            return ("ERROR" if self.frames == 0 else "WARN"), f"last error: {self.last_error}"
        if self.last_frame_at is None or now - self.last_frame_at > max(timeout_s, 1.0):
            return "WARN", "no inference frame recently (waiting for paired inputs)"
        return "OK", "running"
