"""OxygenNode: the lifecycle node `oxygen` (thin: conversions + threads around Engine.step).

Threads and callback groups (main() spins a SingleThreadedExecutor, see main.py for why; the groups
still keep the callbacks correct under a MultiThreadedExecutor):
- input group (mutually exclusive): camera / joint-state / ~/instruction / ~/ask callbacks.
  They only convert + store (Pairer, Mailbox, queues); they never run the model.
- worker thread (plain Python thread, started on activate): takes the newest complete
  observation from the drop-oldest Mailbox, applies pending parameter changes
  (Engine.update_config) and questions (Engine.ask), runs Engine.step, publishes
  ~/action_chunk, ~/frame_stats, ~/memory, ~/answer, ~/markers and hands the chunk to the
  ChunkPlayer.
- control timer: publishes ~/joint_command from the ChunkPlayer at control_rate_hz. It is a
  dedicated thread with absolute monotonic deadlines (optionally SCHED_FIFO, parameter
  control_priority; the inference thread then runs one level below it so that it is never
  preempted while holding the GIL the control thread needs). With use_sim_time it is a ROS
  timer in its own callback group instead (sim time cannot be slept on). Measured here (2
  shared cores, tiny model at ~25-30 Hz, quiet machine): executor timer p99 |period - 20 ms|
  13-17 ms, thread 4-17 ms, thread + FIFO priorities ~1-3 ms; with another process keeping a
  core busy still 15-60 ms (the executor's normal-priority threads also take the GIL).
- diagnostics group: a 1 Hz timer publishing /diagnostics (from configure on, so an inactive
  node is visible to diagnostic aggregators; /diagnostics is a plain publisher for that reason).
Lifecycle services and parameter services use the default group.

Bad inputs (unknown encoding, wrong data size, NaN or missing joints) raise ValueError in
conversions; the callback drops the message, logs a throttled warning and records it for
diagnostics. Silent inputs are reported stale after observation_timeout_s.
"""
from __future__ import annotations

import collections
import gc
import os
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, HistoryPolicy, qos_profile_sensor_data

from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from oxygen_ros.msg import FrameStats, TextMemory

from . import conversions as conv
from . import params as P
from .chunk_player import ChunkPlayer
from .pairing import Mailbox, Pair, Pairer

NODE_NAME = "oxygen"
WARN_PERIOD_S = 2.0  # throttle of repeated warnings, per input and kind


@dataclass
class InputStats:
    """Health of one input topic (for diagnostics)."""

    topic: str
    ok: int = 0
    bad: int = 0
    last_ok: float | None = None  # monotonic seconds
    last_bad: float | None = None
    last_error: str = ""
    times: collections.deque = field(default_factory=lambda: collections.deque(maxlen=64))

    def good(self, now: float) -> None:
        self.ok += 1
        self.last_ok = now
        self.times.append(now)

    def rate(self, now: float) -> float:
        return recent_rate(self.times, now)


def recent_rate(times: collections.deque, now: float, window: float = 2.0) -> float:
    """Events per second over the last `window` seconds of monotonic stamps."""
    recent = [t for t in list(times) if now - t < window]  # list(): atomic copy
    if len(recent) < 2:
        return 0.0
    return (len(recent) - 1) / max(recent[-1] - recent[0], 1e-6)


class OxygenNode(LifecycleNode):
    def __init__(self, node_name: str = NODE_NAME, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        P.declare(self)
        self.add_on_set_parameters_callback(
            P.on_set_callback(self, lambda: self._configured, self._apply_params))
        self._configured = False
        self._active = False
        self._lock = threading.Lock()  # pending changes, asks, stats
        self._warned: dict[str, float] = {}
        self._reset_runtime()

    # -- state ----------------------------------------------------------------------------------
    def _reset_runtime(self) -> None:
        self.engine = None
        self.model_config = None
        self.mapping: conv.StateMapping | None = None
        self.player: ChunkPlayer | None = None
        self.pairer: Pairer | None = None
        self.mailbox: Mailbox[Pair] | None = None
        self._pubs: dict[str, Any] = {}
        self._diag_pub = None
        self._subs: list[Any] = []
        self._control_timer = None
        self._control_thread: threading.Thread | None = None
        self._diag_timer = None
        self._worker: threading.Thread | None = None
        self._stop = threading.Event()
        self._pending: dict[str, Any] = {}
        self._asks: collections.deque[str] = collections.deque(maxlen=64)
        self._stamps: collections.OrderedDict[int, Any] = collections.OrderedDict()
        self._inputs: dict[str, InputStats] = {}
        self._frames = 0
        self._step_errors = 0
        self._last_error = ""
        self._last_frame_wall: float | None = None
        self._action_rate = 0.0
        self._tokens_per_s = 0.0
        self._last_frame_ms = 0.0
        self._last_out = None
        self._memory_text = ""
        self._ticks = collections.deque(maxlen=256)
        self._commands = 0
        self._stale_ticks = 0
        self._player_stale = False
        self._instruction = ""
        self._frame_id = "base_link"
        self._joint_names: list[str] = []
        self._ask_errors = 0

    @property
    def state_label(self) -> str:
        return self._state_machine.current_state[1]

    def _warn(self, key: str, message: str) -> None:
        now = time.monotonic()
        if now - self._warned.get(key, -1e9) >= WARN_PERIOD_S:
            self._warned[key] = now
            self.get_logger().warning(message)

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # -- lifecycle ------------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._build()
        except Exception as exc:  # noqa: BLE001 - any failure: stay unconfigured
            self.get_logger().error(f"configure failed: {type(exc).__name__}: {exc}")
            self.get_logger().debug(traceback.format_exc())
            self._teardown()
            return TransitionCallbackReturn.FAILURE
        self._configured = True
        mc = self.model_config
        self.get_logger().info(
            f"configured: model {mc.name} on {self.engine.config.device} ({self.engine.config.dtype}), "
            f"{len(self._joint_names)} joints, cameras {P.get(self, 'camera_topics')}, "
            f"control {P.get(self, 'control_rate_hz')} Hz")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        ret = super().on_activate(state)  # FIRST: enables the lifecycle publishers
        if ret != TransitionCallbackReturn.SUCCESS:
            return ret
        self.player.clear()
        self.mailbox.reopen()
        # the model, tokenizer and ROS objects are long-lived: move them out of the cyclic
        # collector's sight so a full collection does not stall the control loop for ~10 ms
        gc.collect()
        gc.freeze()
        self._stop.clear()
        self._worker = threading.Thread(target=self._work, name="oxygen-worker", daemon=True)
        self._worker.start()
        rate = float(P.get(self, "control_rate_hz"))
        self._active = True
        if self.get_parameter("use_sim_time").value:
            # simulated time cannot be slept on: a ROS timer on /clock, own callback group
            self._control_timer = self.create_timer(1.0 / rate, self._control_tick,
                                                    callback_group=self._control_group)
        else:
            self._control_thread = threading.Thread(
                target=self._control_loop, args=(1.0 / rate, int(P.get(self, "control_priority"))),
                name="oxygen-control", daemon=True)
            self._control_thread.start()
        self.get_logger().info("activated")
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        ret = super().on_deactivate(state)
        self._stop_active()
        self.get_logger().info("deactivated (model kept)")
        return ret

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        ret = super().on_cleanup(state)
        self._teardown()
        self.get_logger().info("cleaned up")
        return ret

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        ret = super().on_shutdown(state)
        self._teardown()
        return ret

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.get_logger().error(f"error processing from state {state.label}: tearing down")
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def stop(self) -> None:
        """Stop threads and drop resources (main() calls it on exit)."""
        self._teardown()

    # -- configure ------------------------------------------------------------------------------
    def _build(self) -> None:
        import torch

        from oxygen_ros.engine.config import EngineConfig, load_model_config
        from oxygen_ros.engine.engine import Engine

        p = P.values(self)
        for name, value in p.items():  # the params file bypasses no check
            reason = P.validate_value(P.SPECS[name], value)
            if reason:
                raise ValueError(reason)
        if p["model.num_threads"] > 0:
            torch.set_num_threads(int(p["model.num_threads"]))
        norm, model, tokenizer = None, None, None
        if p["model.checkpoint"]:
            from oxygen_ros.engine.model import load_checkpoint

            model, mc, tokenizer, norm = load_checkpoint(p["model.checkpoint"], device=p["model.device"],
                                                         dtype=p["model.dtype"])
        else:
            mc = load_model_config(p["model.preset"])
        names = list(p["joint_names"])
        cams = list(p["camera_topics"])
        if len(names) > mc.action_dim:
            raise ValueError(f"{len(names)} joint_names but the model has action_dim {mc.action_dim}")
        if len(cams) > mc.num_cameras:
            raise ValueError(f"{len(cams)} camera_topics but the model takes at most {mc.num_cameras}")
        lower, upper = p["joint_limits_lower"], p["joint_limits_upper"]
        reason = P.validate({"joint_limits_lower": lower, "joint_limits_upper": upper}, p, False)
        if reason:
            raise ValueError(reason)
        ec = EngineConfig(device=p["model.device"], dtype=p["model.dtype"],
                          num_blocks=int(p["kv.num_blocks"]), **P.engine_changes(p))
        self.engine = Engine(mc, ec, model=model, tokenizer=tokenizer)
        # first frames allocate and pick kernels: pay that now, not in the first control frames
        self.engine.warmup()
        self.model_config = mc
        self._model_name = p["model.checkpoint"] or f"preset:{p['model.preset']}"
        self._joint_names = names
        self._instruction = p["instruction"]
        self._frame_id = p["markers.frame_id"]
        lo = np.asarray(lower, np.float32) if lower else None
        hi = np.asarray(upper, np.float32) if upper else None
        self.mapping = conv.StateMapping(len(names), lo, hi, norm)
        self.player = ChunkPlayer(len(names), dt=1.0 / float(p["control_rate_hz"]),
                                  crossfade_s=p["crossfade_s"],
                                  observation_timeout_s=p["observation_timeout_s"], lower=lo, upper=hi)
        self.pairer = Pairer(len(cams), tolerance_s=p["stamp_tolerance_s"])
        self.mailbox = Mailbox()

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                              history=HistoryPolicy.KEEP_LAST)
        mk = self.create_lifecycle_publisher
        self._pubs = {
            "joint_command": mk(JointState, "~/joint_command", reliable),
            "action_chunk": mk(JointTrajectory, "~/action_chunk", reliable),
            "memory": mk(TextMemory, "~/memory", QoSProfile(depth=50)),
            "answer": mk(TextMemory, "~/answer", QoSProfile(depth=50)),
            "frame_stats": mk(FrameStats, "~/frame_stats", QoSProfile(depth=10)),
            "markers": mk(MarkerArray, "~/markers", QoSProfile(depth=1)),
        }
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", QoSProfile(depth=10))

        self._input_group = MutuallyExclusiveCallbackGroup()
        self._control_group = MutuallyExclusiveCallbackGroup()
        self._diag_group = MutuallyExclusiveCallbackGroup()
        size = mc.vision.image_size
        for i, topic in enumerate(cams):
            self._inputs[topic] = InputStats(topic)
            self._subs.append(self.create_subscription(
                Image, topic, self._image_cb(i, topic, size), qos_profile_sensor_data,
                callback_group=self._input_group))
        js = p["joint_state_topic"]
        self._inputs[js] = InputStats(js)
        self._joint_topic = js
        # best effort matches reliable and best-effort publishers (drivers use either)
        js_qos = QoSProfile(depth=20, reliability=ReliabilityPolicy.BEST_EFFORT,
                            history=HistoryPolicy.KEEP_LAST)
        self._subs.append(self.create_subscription(JointState, js, self._joint_cb, js_qos,
                                                   callback_group=self._input_group))
        self._subs.append(self.create_subscription(String, "~/instruction", self._instruction_cb, 10,
                                                   callback_group=self._input_group))
        self._subs.append(self.create_subscription(String, "~/ask", self._ask_cb, 10,
                                                   callback_group=self._input_group))
        self._diag_timer = self.create_timer(1.0, self._publish_diagnostics,
                                             callback_group=self._diag_group)

    def _stop_active(self) -> None:
        self._active = False
        if self._control_timer is not None:
            self.destroy_timer(self._control_timer)
            self._control_timer = None
        self._stop.set()
        control, self._control_thread = self._control_thread, None
        if control is not None and control is not threading.current_thread():
            control.join(timeout=5.0)
        if self.mailbox is not None:
            self.mailbox.close()
        worker, self._worker = self._worker, None
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=30.0)
            if worker.is_alive():
                self.get_logger().error("inference worker did not stop within 30 s")
        if self.player is not None:
            self.player.clear()

    def _teardown(self) -> None:
        self._stop_active()
        for sub in self._subs:
            self.destroy_subscription(sub)
        for pub in self._pubs.values():
            self.destroy_lifecycle_publisher(pub)
        if self._diag_timer is not None:
            self.destroy_timer(self._diag_timer)
        if self._diag_pub is not None:
            self.destroy_publisher(self._diag_pub)
        device = getattr(getattr(self.engine, "config", None), "device", "cpu")
        self._configured = False
        self._reset_runtime()
        gc.unfreeze()  # let the dropped engine be collected
        gc.collect()
        if str(device).startswith("cuda"):
            try:
                import torch

                torch.cuda.empty_cache()
            except Exception:  # noqa: BLE001
                pass

    # -- parameters -----------------------------------------------------------------------------
    def _apply_params(self, changes: dict[str, Any]) -> None:
        """Called from the on-set callback once `changes` are valid (not yet stored)."""
        merged = {**P.values(self), **changes}
        eng = {k: merged[k] for k in changes if k in P.ENGINE_KEYS}
        if "memory.enabled" in changes or "memory.every_n_frames" in changes:
            eng["memory.enabled"] = merged["memory.enabled"]
            eng["memory.every_n_frames"] = merged["memory.every_n_frames"]
        if eng:
            with self._lock:
                self._pending.update(P.engine_changes(eng))
        if "instruction" in changes:
            self._instruction = changes["instruction"]
        if "markers.frame_id" in changes:
            self._frame_id = changes["markers.frame_id"]
        if self.player is not None and any(k in changes for k in (
                "crossfade_s", "observation_timeout_s", "joint_limits_lower", "joint_limits_upper")):
            lo, hi = merged["joint_limits_lower"], merged["joint_limits_upper"]
            self.player.configure(crossfade_s=merged["crossfade_s"],
                                  observation_timeout_s=merged["observation_timeout_s"],
                                  lower=np.asarray(lo) if lo else None,
                                  upper=np.asarray(hi) if hi else None)
        if self.pairer is not None and "stamp_tolerance_s" in changes:
            self.pairer.tolerance_s = float(changes["stamp_tolerance_s"])

    # -- input callbacks (convert + store only) -------------------------------------------------
    def _stamp_of(self, header) -> tuple[float, Any]:
        t = conv.stamp_to_sec(header.stamp)
        if t == 0.0:  # unstamped publisher: use the arrival time
            now = self.get_clock().now()
            return now.nanoseconds * 1e-9, now.to_msg()
        return t, conv.copy_stamp(header.stamp)

    def _bad_input(self, topic: str, exc: Exception) -> None:
        st = self._inputs.get(topic)
        if st is not None:
            st.bad += 1
            st.last_bad = time.monotonic()
            st.last_error = str(exc)
        self._warn(f"bad:{topic}", f"dropping input on {topic}: {exc}")

    def _image_cb(self, index: int, topic: str, size: int):
        def callback(msg: Image) -> None:
            pairer = self.pairer
            if pairer is None:
                return
            try:
                img = conv.image_to_model(msg, size)
            except ValueError as exc:
                self._bad_input(topic, exc)
                return
            t, stamp = self._stamp_of(msg.header)
            pairer.add_image(index, t, img, stamp)
            self._inputs[topic].good(time.monotonic())
            self._offer()
        return callback

    def _joint_cb(self, msg: JointState) -> None:
        pairer = self.pairer
        if pairer is None:
            return
        try:
            vec = conv.joint_state_to_vector(msg, self._joint_names)
        except ValueError as exc:
            self._bad_input(self._joint_topic, exc)
            return
        t, stamp = self._stamp_of(msg.header)
        pairer.add_state(t, vec, stamp)
        self._inputs[self._joint_topic].good(time.monotonic())
        self._offer()

    def _offer(self) -> None:
        pairer, mailbox = self.pairer, self.mailbox
        if not self._active or pairer is None or mailbox is None:
            return
        pair = pairer.newest_pair()
        if pair is not None:
            mailbox.put(pair)

    def _instruction_cb(self, msg: String) -> None:
        text = msg.data.strip()
        if not text:
            self._warn("instruction", "ignoring an empty instruction on ~/instruction")
            return
        result = self.set_parameters([Parameter("instruction", value=text)])[0]
        if not result.successful:
            self._warn("instruction", f"instruction rejected: {result.reason}")

    def _ask_cb(self, msg: String) -> None:
        text = msg.data
        if not text.strip():
            self._warn("ask", "ignoring an empty question on ~/ask")
            return
        with self._lock:
            self._asks.append(text)

    # -- worker ---------------------------------------------------------------------------------
    def _work(self) -> None:
        # With control_priority set, this thread runs SCHED_FIFO one level BELOW the control
        # thread: both share Python's GIL, and a normal-priority worker preempted by other
        # processes while holding it blocks the control thread (priority inversion; measured
        # on a loaded 2-core machine: period p99 deviation 20-40 ms -> 2 ms).
        prio = int(P.get(self, "control_priority"))
        if prio > 1:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio - 1))
            except (AttributeError, OSError):
                pass  # the control thread already warned
        while not self._stop.is_set():
            mailbox = self.mailbox
            if mailbox is None:
                return
            pair = mailbox.get(timeout=0.1)
            if pair is None or self._stop.is_set():
                continue
            try:
                self._infer(pair)
            except Exception as exc:  # noqa: BLE001 - keep running; report in diagnostics
                if not self.context.ok():
                    return  # shutting down (Ctrl-C): publishers are gone
                self._step_errors += 1
                self._last_error = f"{type(exc).__name__}: {exc}"
                self._warn("step", f"inference failed on a frame: {self._last_error}")

    def _infer(self, pair: Pair) -> None:
        from oxygen_ros.engine.observation import Observation
        from oxygen_ros.engine.request import RequestKind

        engine = self.engine
        with self._lock:
            pending, self._pending = self._pending, {}
            asks = list(self._asks)
            self._asks.clear()
        if pending:
            try:
                engine.update_config(**pending)
            except ValueError as exc:
                self._last_error = f"update_config: {exc}"
                self._warn("update_config", f"parameter change not applied: {exc}")
        for prompt in asks:
            try:
                engine.ask(prompt, priority=1, kind=RequestKind.QUESTION)
            except ValueError as exc:
                self._ask_errors += 1
                self._last_error = f"ask: {exc}"
                self._warn("ask", f"question rejected: {exc}")
        obs = Observation(images=np.stack(pair.images), state=self.mapping.to_model(pair.state),
                          instruction=self._instruction, stamp=pair.stamp)
        out = engine.step(obs)
        stamp = pair.header_stamp
        self._stamps[out.frame] = stamp
        while len(self._stamps) > 8192:
            self._stamps.popitem(last=False)

        chunk = self.mapping.to_robot(out.actions)
        now = self._now()
        if not self.player.set_chunk(chunk, pair.stamp, now):
            self._warn("chunk", "action chunk rejected (non-finite values): holding the last command")

        wall = time.monotonic()
        if self._last_frame_wall is not None:
            dt = max(wall - self._last_frame_wall, 1e-6)
            a = 0.2
            self._action_rate = (1 - a) * self._action_rate + a / dt if self._action_rate else 1 / dt
            self._tokens_per_s = (1 - a) * self._tokens_per_s + a * out.tokens_this_frame / dt
        self._last_frame_wall = wall
        self._frames += 1
        self._last_frame_ms = out.frame_ms
        self._last_out = out

        pubs = self._pubs
        pubs["action_chunk"].publish(conv.chunk_to_trajectory(chunk, self._joint_names, stamp,
                                                              self.player.dt, self._frame_id))
        pubs["frame_stats"].publish(conv.frame_stats(out, stamp, self._action_rate, self._tokens_per_s))
        for up in out.updates:
            src = self._stamps.get(up.birth_frame, stamp)
            msg = conv.text_memory(up, src)
            if msg.kind == "memory":
                pubs["memory"].publish(msg)
                if up.is_final:
                    self._memory_text = up.text
            else:
                pubs["answer"].publish(msg)
        stats = (f"{out.mode} k={out.k} N={out.n} S={out.s} | {out.frame_ms:.0f} ms/frame "
                 f"{self._action_rate:.1f} Hz | batch {out.batch_size} | "
                 f"KV {out.kv.blocks_used}/{out.kv.blocks_total}")
        pubs["markers"].publish(conv.markers(self._memory_text, stats, stamp, self._frame_id))

    # -- control --------------------------------------------------------------------------------
    def _control_loop(self, period: float, priority: int) -> None:
        """The control timer: absolute deadlines on the monotonic clock (no drift; a late tick
        does not shift the following ones), optionally SCHED_FIFO. A dedicated thread instead of
        an executor timer: the executor's dispatch adds GIL hand-overs and its own Python work
        between the wake-up and the callback (measured: p99 jitter 13-17 ms vs 4-7 ms on 2 cores)."""
        if priority > 0:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            except (AttributeError, OSError) as exc:
                self.get_logger().warning(
                    f"control_priority {priority}: SCHED_FIFO not permitted ({exc}); running at "
                    "normal priority (set rtprio in /etc/security/limits.conf)")
        nxt = time.monotonic()
        while not self._stop.is_set():
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            elif delay < -period:  # more than a whole period late: skip, do not burst
                nxt = time.monotonic()
            if self._stop.is_set():
                break
            try:
                self._control_tick()
            except Exception as exc:  # noqa: BLE001
                if not self.context.ok():
                    return
                self._warn("control", f"control tick failed: {type(exc).__name__}: {exc}")

    def _control_tick(self) -> None:
        player = self.player
        if not self._active or player is None:
            return
        now = self.get_clock().now()
        sample = player.value_at(now.nanoseconds * 1e-9)
        if sample is None:
            return
        self._pubs["joint_command"].publish(conv.joint_command(self._joint_names, sample.values,
                                                               now.to_msg()))
        self._commands += 1
        self._ticks.append(time.monotonic())
        self._player_stale = sample.stale
        if sample.stale:
            self._stale_ticks += 1
            self._warn("stale", f"no fresh observation for {sample.chunk_age_s:.2f} s: holding the "
                       "last command")

    # -- diagnostics ----------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        try:
            self._diagnostics()
        except Exception as exc:  # noqa: BLE001 - e.g. a cleanup racing this timer
            self._warn("diagnostics", f"diagnostics failed: {type(exc).__name__}: {exc}")

    def _diagnostics(self) -> None:
        pub = self._diag_pub
        if pub is None or self.engine is None:
            return
        now_m = time.monotonic()
        timeout = float(P.get(self, "observation_timeout_s"))
        cfg = self.engine.config
        statuses = []

        # engine
        level, message = "OK", "running"
        if not self._active:
            level, message = "OK", f"{self.state_label}: not running"
        elif self._last_frame_wall is None or now_m - self._last_frame_wall > max(timeout, 1.0):
            level, message = "WARN", "no inference frame recently (waiting for paired inputs)"
        if self._step_errors and self._last_error:
            level, message = "ERROR" if self._frames == 0 else "WARN", f"last error: {self._last_error}"
        out = self._last_out
        statuses.append(conv.diagnostic_status(f"{self.get_name()}: engine", level, message, {
            "state": self.state_label, "model": self._model_name, "device": cfg.device,
            "dtype": cfg.dtype, "mode": cfg.mode, "k": cfg.decode_steps_per_frame,
            "N": cfg.max_decode_steps, "S": cfg.denoise_steps, "frames": self._frames,
            "action_rate_hz": float(self._action_rate), "frame_ms": float(self._last_frame_ms),
            "tokens_per_s": float(self._tokens_per_s),
            "batch_size": out.batch_size if out else 0,
            "kv_blocks": f"{out.kv.blocks_used}/{out.kv.blocks_total}" if out else "0/0",
            "step_errors": self._step_errors, "rejected_questions": self._ask_errors,
            "last_error": self._last_error,
        }, hardware_id=cfg.device))

        # inputs
        problems, values = [], {}
        for topic, st in self._inputs.items():
            age = None if st.last_ok is None else now_m - st.last_ok
            recent_bad = st.last_bad is not None and now_m - st.last_bad < 2.0
            values[f"{topic} rate_hz"] = float(st.rate(now_m))
            values[f"{topic} age_s"] = "never" if age is None else float(age)
            values[f"{topic} bad"] = st.bad
            if st.last_error:
                values[f"{topic} last_error"] = st.last_error
            if age is None or age > timeout:
                problems.append(f"{topic} stale")
            if recent_bad:
                problems.append(f"{topic} bad input: {st.last_error}")
        mb = self.mailbox
        values["dropped_frames"] = mb.dropped if mb else 0
        values["paired_frames"] = mb.put_count if mb else 0
        level = "WARN" if problems and self._active else "OK"
        statuses.append(conv.diagnostic_status(
            f"{self.get_name()}: inputs", level, "; ".join(problems) or "all inputs fresh", values))

        # control
        rate = recent_rate(self._ticks, now_m)
        if not self._active:
            level, message = "OK", "inactive: no commands"
        elif self._player_stale:
            level, message = "WARN", "stale observation: holding the last command"
        elif self.player is not None and not self.player.has_chunk:
            level, message = "WARN", "no action chunk yet"
        else:
            level, message = "OK", "commanding"
        statuses.append(conv.diagnostic_status(f"{self.get_name()}: control", level, message, {
            "command_rate_hz": float(rate),
            "control_rate_hz": float(P.get(self, "control_rate_hz")),
            "commands": self._commands, "stale_ticks": self._stale_ticks,
            "rejected_chunks": self.player.rejected if self.player else 0,
        }))
        pub.publish(conv.diagnostic_array(statuses, self.get_clock().now().to_msg()))
