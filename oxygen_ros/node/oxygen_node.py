"""OxygenNode: the lifecycle node `oxygen`. It only wires the parts (lifecycle_py's shape):

- params.py          the parameter table, validation, descriptors
- build.py           configure: the engine from the parameters
- inputs.py          camera / joint-state subscriptions, pairing by stamp, input health
- text.py            ~/instruction, ~/ask; routes request updates to ~/memory / ~/answer
- questions.py       every question until its one final message
- inference_worker.py  the thread running Engine.step on the newest paired observation
- control_loop.py    ~/joint_command at control_rate_hz: ChunkPlayer -> CommandShaper (limits,
                     start from the measured pose, chunk gate, deadman)
- publishers.py      every publisher (message types: outputs.py's table); diagnostics.py the
                     1 Hz /diagnostics timer
- recording.py       record.* parameters: raw subscriptions into recorder.py's bag writer
- conversions.py     the only module knowing both message and engine types

Parameters: validated once in the on-set callback (_check_params), applied in the post-set
callback (_apply_params), ros2/demos' pattern.

main() spins a SingleThreadedExecutor (see cli/node.py for why), so callbacks never run
concurrently: callbacks only convert and store, the model and the control loop run on their own
threads, and the joint states are not the executor's at all (taken newest-only by the control
thread at each tick: inputs.py).

Lifecycle: configure builds a Runtime (engine, player, parts, topics); activate starts a Run
(one stop Event shared by the worker and control threads of that activation only, never
replaced); deactivate stops the threads FIRST, ends open questions, then deactivates the
publishers; cleanup drops the Runtime.
"""
from __future__ import annotations

import gc
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from oxygen_ros.engine import head_names, rtc_unsupported_reason
from oxygen_ros.robot.chunk_player import ChunkPlayer
from oxygen_ros.robot.command_config import CommandConfig
from oxygen_ros.robot.inference import executed_steps
from oxygen_ros.robot.interface import RobotInterface
from oxygen_ros.robot.shaper import CommandShaper
from oxygen_ros.robot.threads import keep_off, restore
from oxygen_ros.robot.values import StateMapping

from . import params as P
from .build import Built, build
from .control_loop import ControlLoop
from .diagnostics import Diagnostics
from .inference_worker import InferenceWorker
from .inputs import Inputs
from .publishers import Publishers
from .questions import ABORTED_CLEANUP, ABORTED_DEACTIVATE, Questions
from .recording import Recording
from .text import TextIO, text_bound_reason

NODE_NAME = "oxygen"
WARN_PERIOD_S = 2.0  # throttle of repeated warnings, per key


@dataclass
class Runtime:
    """Everything configure builds; dropped by cleanup."""

    built: Built
    joint_names: list[str]  # the command names (robot.command_names)
    mapping: StateMapping
    player: ChunkPlayer
    pubs: Publishers
    inputs: Inputs
    text: TextIO
    worker: InferenceWorker
    control: ControlLoop
    robot: RobotInterface | None = None  # the state values and the commands' kinds
    diag: Diagnostics | None = None
    recording: Recording | None = None


class OxygenNode(LifecycleNode):
    def __init__(self, node_name: str = NODE_NAME, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.rt: Runtime | None = None
        self.state_label = "unconfigured"
        self._run_stop: threading.Event | None = None  # the current run's stop event
        self._moved_threads: dict[int, frozenset[int]] | None = None  # keep_off's, for restore
        self._warned: dict[str, float] = {}
        self._sim_seen: tuple[int, float] | None = None  # (sim time ns, monotonic when it changed)
        # what on_set validated (the engine's new config, the command path's), for post_set to
        # apply without validating again; per thread: rclpy runs both callbacks in the caller's
        self._staged = threading.local()
        P.declare(self)
        self.add_on_set_parameters_callback(
            P.on_set_callback(self, lambda: self.rt is not None, self._check_params))
        self.add_post_set_parameters_callback(P.post_set_callback(self._apply_params))

    @property
    def active(self) -> bool:
        return self._run_stop is not None

    def _warn(self, key: str, message: str) -> None:
        now = time.monotonic()
        if now - self._warned.get(key, -1e9) >= WARN_PERIOD_S:
            self._warned[key] = now
            self.get_logger().warning(message)

    # -- lifecycle ------------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self.rt = self._build(P.values(self))
        except Exception as exc:  # noqa: BLE001 - any failure: stay unconfigured
            self.get_logger().error(f"configure failed: {type(exc).__name__}: {exc}")
            self.get_logger().debug(traceback.format_exc())
            self._teardown(ABORTED_CLEANUP)
            return TransitionCallbackReturn.FAILURE
        self.state_label = "inactive"
        rt = self.rt
        for warning in rt.built.warnings:
            self.get_logger().warning(warning)
        self.get_logger().info(
            f"configured: model {rt.built.model_config.name} on {rt.built.engine.config.device} "
            f"({rt.built.engine.config.dtype}, {rt.built.threads} CPU threads), {_robot_text(rt.robot)}, cameras "
            f"{P.get(self, 'camera_topics')} -> model cameras {list(rt.built.camera_slots)}, control "
            f"{P.get(self, 'control_rate_hz')} Hz, load {rt.built.load_s:.1f} s + warmup "
            f"{rt.built.warmup_s:.1f} s"
            + (f", tokenizer {rt.built.tokenizer_source}" if rt.built.tokenizer_source else ""))
        if rt.built.warmup_note:
            self.get_logger().info(rt.built.warmup_note)
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        ret = super().on_activate(state)  # FIRST: enables the lifecycle publishers
        if ret != TransitionCallbackReturn.SUCCESS:
            return ret
        rt = self.rt
        rt.player.clear()
        # the model, tokenizer and ROS objects are long-lived: move them out of the cyclic
        # collector's sight so a full collection does not stall the control loop for ~10 ms
        gc.collect()
        gc.freeze()
        stop = threading.Event()  # this run's; a new activation makes a new one
        priority = int(P.get(self, "control_priority"))
        if rt.recording is not None:
            rt.recording.start()  # before the threads: the run's first outputs are recorded
        rt.inputs.open()
        # the model's CPUs to the model: this process's other threads (the executor, the
        # middleware's, any they start) move off them before the worker starts and pins itself
        model_cpus = P.get(self, "inference_cpus")
        self._moved_threads = keep_off(model_cpus)
        rt.worker.start(stop, priority, model_cpus)
        rt.control.start(stop, 1.0 / float(P.get(self, "control_rate_hz")), priority,
                         bool(self.get_parameter("use_sim_time").value), P.get(self, "control_cpus"))
        self._run_stop = stop
        self.state_label = "active"
        self.get_logger().info("activated")
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_run()  # threads stop before the publishers go inactive
        self.rt.text.abort_all(ABORTED_DEACTIVATE, self.rt.built.engine)
        ret = super().on_deactivate(state)
        self.state_label = "inactive"
        self.get_logger().info("deactivated (model kept)")
        return ret

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown(ABORTED_CLEANUP)
        ret = super().on_cleanup(state)
        self.state_label = "unconfigured"
        self.get_logger().info("cleaned up")
        return ret

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown(ABORTED_CLEANUP)
        ret = super().on_shutdown(state)
        self.state_label = "finalized"
        return ret

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.get_logger().error(f"error processing from state {state.label}: tearing down")
        self._teardown(ABORTED_CLEANUP)
        self.state_label = "unconfigured"
        return TransitionCallbackReturn.SUCCESS

    def stop(self) -> None:
        """Stop threads and drop resources (main() calls it on exit)."""
        self._teardown(ABORTED_CLEANUP)

    # -- configure ------------------------------------------------------------------------------
    def _build(self, p: dict[str, Any]) -> Runtime:
        built = build(p)
        if p["chunk_blend"] == "rtc" and rtc_unsupported_reason(built.model_config):
            raise ValueError(f"chunk_blend rtc: {rtc_unsupported_reason(built.model_config)}")
        steps = executed_steps(int(p["n_action_steps"]), built.n_action_steps,
                               built.model_config.action_horizon)
        robot = P.interface(p)
        names = list(robot.command_names)
        mapping = self._mapping(p, robot, built.norm)
        # the chunk's time axis (chunk_rate_hz / the checkpoint's fps) apart from the control tick
        tick_s = 1.0 / float(p["control_rate_hz"])
        command = P.command_config(p, P.chunk_step_s(p, built.fps), tick_s)
        _warn_no_skip(self, command)
        player = ChunkPlayer.from_config(command)
        heads = head_names(built.model_config)
        pubs = Publishers(self, p["command_type"], heads, robot.command_field)
        inputs = Inputs(self, p["camera_topics"], p["joint_state_topic"], list(robot.state_names),
                        p["stamp_tolerance_s"], p["max_stamp_offset_s"], self._warn,
                        transports=built.camera_transports, max_side=p["camera_max_side"],
                        reliability=p["camera_reliability"], max_skew_s=p["max_stamp_skew_s"],
                        min_rate_hz=p["joint_state_min_rate_hz"], max_age_s=p["joint_state_max_age_s"])
        text = TextIO(self, pubs, Questions(int(p["ask.max_open"])), built.engine, self._warn,
                      active=lambda: self.active)
        shaper = CommandShaper(len(names), tick_s, *command.shaper_limits(), rates=command.rates,
                               measured=command.measured)
        # each tick takes the newest joint state itself (not the executor: inputs.py)
        control = ControlLoop(self, player, names, pubs.command, self._warn, shaper, inputs.measured,
                              p["deadman.topic"], p["deadman.timeout_s"], robot=robot,
                              poll=inputs.poll, cpu=inputs.cpu)
        # self.rt.mapping is read per frame: joint limits are live for normalisation too
        worker = InferenceWorker(built.engine, lambda: self.rt.mapping, player, inputs.mailbox, pubs,
                                 text, names, p["instruction"], p["markers.frame_id"], self._warn, self,
                                 camera_slots=built.camera_slots, n_action_steps=steps,
                                 decode=inputs.decode_pair, admit=control.admit, cpu=inputs.cpu,
                                 retired=inputs.pairer.retired)
        rt = Runtime(built, names, mapping, player, pubs, inputs, text, worker, control, robot)
        rt.diag = Diagnostics(self, pubs, self._diagnostics, self._warn)
        rt.recording = Recording(self, p, self._warn, heads) if p["record.enabled"] else None
        return rt

    @staticmethod
    def _mapping(p: dict[str, Any], robot: RobotInterface, norm: Any) -> StateMapping:
        lo, hi = p["joint_limits_lower"], p["joint_limits_upper"]
        return StateMapping(robot.num_commands, np.asarray(lo, np.float32) if lo else None,
                            np.asarray(hi, np.float32) if hi else None, norm, robot)

    def _stop_run(self) -> None:
        stop, self._run_stop = self._run_stop, None
        rt = self.rt
        if stop is None or rt is None:
            return
        stop.set()
        rt.inputs.close()
        rt.control.stop()
        rt.worker.stop()
        restore(self._moved_threads)  # inference_cpus may change before the next activation
        self._moved_threads = None
        rt.player.clear()
        if rt.recording is not None:
            rt.recording.stop()  # after the threads: the bag holds the run's last outputs

    def _teardown(self, reason: str) -> None:
        self._stop_run()
        rt, self.rt = self.rt, None
        if rt is not None:
            rt.text.abort_all(reason, rt.built.engine)
            if rt.diag is not None:
                rt.diag.destroy()
            rt.inputs.destroy()
            rt.control.destroy()
            rt.text.destroy()
            rt.pubs.destroy()
            device = str(rt.built.engine.config.device)
            del rt
            gc.unfreeze()  # let the dropped engine be collected
            gc.collect()
            if device.startswith("cuda"):
                try:
                    import torch

                    torch.cuda.empty_cache()
                except Exception:  # noqa: BLE001
                    pass

    # -- parameters -----------------------------------------------------------------------------
    def _check_params(self, changes: dict[str, Any], merged: dict[str, Any]) -> str | None:
        """What only the running node can check: text against the model's prompt budget (the
        byte bound first, no tokenizing), then the engine's own check of the whole change. What
        it builds on the way (CommandConfig, EngineConfig) is staged for _apply_params."""
        rt = self.rt
        staged = self._staged
        staged.command, staged.engine = None, None
        max_tokens = rt.built.model_config.max_prompt_tokens if rt is not None else None
        for key in ("instruction", "memory.prompt"):
            if key in changes:
                reason = text_bound_reason(key, changes[key], max_tokens)
                if reason:
                    return reason
        if rt is not None and any(k in P.COMMAND_KEYS for k in changes):
            try:  # the whole command path's configuration, from the full map, for _command
                command = P.command_config(merged, rt.player.dt, rt.player.tick_s)
            except ValueError as exc:
                return str(exc)
        else:
            command = None
        if rt is not None and changes.get("chunk_blend") == "rtc":
            reason = rtc_unsupported_reason(rt.built.model_config)
            if reason:
                return reason
        engine = None
        if rt is not None and any(k in P.ENGINE_KEYS for k in changes):
            try:  # every live engine parameter (memory.enabled merged by params.engine_fields)
                engine = rt.built.engine.validate_changes(
                    **P.engine_changes({k: merged[k] for k in P.ENGINE_KEYS}))
            except ValueError as exc:
                return str(exc)
        staged.command, staged.engine = command, engine
        return None

    def _apply_params(self, changes: dict[str, Any]) -> None:
        """The post-set callback: `changes` were validated by _check_params and are stored. The
        engine's new config (validated there) goes to the worker, applied before the next frame,
        then each LIVE_APPLIERS entry that names a changed parameter runs."""
        staged = self._staged
        engine = getattr(staged, "engine", None)
        staged.engine = None
        rt = self.rt
        if rt is None:
            return  # read at configure
        merged = P.values(self)
        if engine is not None:
            rt.worker.update_engine(engine)
        for names, apply in LIVE_APPLIERS:
            if any(k in changes for k in names):
                apply(self, rt, changes, merged)

    # -- diagnostics ----------------------------------------------------------------------------
    def _diagnostics(self) -> list:
        rt = self.rt
        if rt is None:
            return []
        active = self.active
        timeout = float(P.get(self, "observation_timeout_s"))
        w, cfg, q = rt.worker, rt.built.engine.config, rt.text.questions
        heads = head_names(rt.built.model_config)
        level, message = w.status(active, self.state_label, timeout)
        out = w.last_out
        engine_values = {
            "state": self.state_label, "model": rt.built.model_name, "device": cfg.device,
            "dtype": cfg.dtype, "mode": cfg.mode, "k": cfg.decode_steps_per_frame,
            "N": cfg.max_decode_steps, "S": cfg.denoise_steps, "frames": w.frames,
            # the commanded head, of the model's heads (StarVLA: one chunk topic each)
            "action_head": cfg.action_head or heads[0],
            "heads": ", ".join(heads),
            "action_rate_hz": float(w.action_rate), "frame_ms": float(w.last_frame_ms),
            "tokens_per_s": float(w.tokens_per_s),
            "batch_size": out.batch_size if out else 0,
            "target_action_hz": cfg.target_action_hz, "k_min": cfg.k_min,
            "target_strict": cfg.target_strict,
            "k_chosen": out.k_chosen if out else 0,
            "target_feasible": out.target_feasible if out else True,
            "kv_blocks": f"{out.kv.blocks_used}/{out.kv.blocks_total}" if out else "0/0",
            "step_errors": w.step_errors, "last_error": w.last_error,
            "inference_cpus": w.placement,
            "questions_open": q.outstanding, "questions_answered": q.answered,
            "questions_refused": q.refused, "last_refusal": q.last_refusal,
        }
        if out is not None and out.kv.state_slots_total:  # a hybrid model (qwen35): its slots
            engine_values["state_slots"] = f"{out.kv.state_slots_used}/{out.kv.state_slots_total}"
        if level == "OK" and active and out is not None and not out.target_feasible:
            level, message = "WARN", (
                f"action-rate target {out.target_action_hz:g} Hz infeasible even at k_min="
                f"{cfg.k_min}: frames take about {w.last_frame_ms:.0f} ms (> "
                f"{1e3 / out.target_action_hz:.0f} ms); lower the target, S or max_active_requests")
        rate = float(P.get(self, "control_rate_hz"))
        statuses = [("engine", level, message, engine_values, cfg.device),
                    ("inputs", *rt.inputs.status(timeout, active, rt.text.problems()), ""),
                    ("control", *rt.control.status(active, rate, self._clock_problem()), "")]
        if rt.recording is not None:
            statuses.append(("recorder", *rt.recording.status(), ""))
        return statuses

    def _clock_problem(self) -> str:
        """With use_sim_time: no /clock yet, or /clock stopped (sim time rules the commands)."""
        if not self.get_parameter("use_sim_time").value:
            self._sim_seen = None
            return ""
        now, mono = self.get_clock().now().nanoseconds, time.monotonic()
        if now == 0:
            return "use_sim_time is true and no /clock has been received: no time, no commands"
        if self._sim_seen is None or now != self._sim_seen[0]:
            self._sim_seen = (now, mono)
            return ""
        stopped = mono - self._sim_seen[1]
        return f"use_sim_time: /clock has not advanced for {stopped:.1f} s" if stopped > 2.0 else ""


def _command(node: OxygenNode, rt: Runtime, changes: dict[str, Any], m: dict[str, Any]) -> None:
    """Any command-path parameter: a NEW CommandConfig from the FULL map `m`, handed whole to
    the player and the shaper (a partial configure once dropped the joint limits)."""
    if "joint_limits_lower" in changes or "joint_limits_upper" in changes:
        rt.mapping = node._mapping(m, rt.robot, rt.built.norm)
    command = getattr(node._staged, "command", None)  # built and checked in on_set
    node._staged.command = None
    if command is None:  # accepted before configure built the player: built from the map now
        command = P.command_config(m, rt.player.dt, rt.player.tick_s)
    if "chunk_skip_latency" in changes:
        _warn_no_skip(node, command)
    rt.player.configure(command)
    rt.control.shaper.configure(*command.shaper_limits())  # all four limits, one swap


def _robot_text(robot: RobotInterface) -> str:
    """The configure log's words for the state and the commands."""
    if robot.joint_shaped:
        return f"{robot.num_commands} joints"
    kinds = sorted(set(robot.command_kinds))
    return (f"{robot.num_state} state values, {robot.num_commands} commands "
            f"({', '.join(f'{robot.command_kinds.count(k)} {k}' for k in kinds)})")


def _warn_no_skip(node: OxygenNode, command: CommandConfig) -> None:
    """chunk_skip_latency false is a fault on purpose (sensitivity tests): say so once per set."""
    if not command.skip_latency:
        node.get_logger().warning("chunk_skip_latency is false: every action chunk plays from its "
                                  "first step, one inference latency late (a deliberate fault for "
                                  "sensitivity tests, never for a robot)")


def _instruction(node: OxygenNode, rt: Runtime, changes: dict[str, Any], m: dict[str, Any]) -> None:
    """A new instruction applies to camera frames received after it: the ones already received
    are retired first (the worker reads the text before it checks the pair)."""
    if m["instruction"] != rt.worker.instruction:
        rt.inputs.pairer.retire()
        rt.worker.instruction = m["instruction"]


def _set(target: Callable[[Runtime], Any], attr: str, name: str, cast: Callable = lambda v: v):
    def apply(node: OxygenNode, rt: Runtime, changes: dict[str, Any], m: dict[str, Any]) -> None:
        setattr(target(rt), attr, cast(m[name]))
    return apply


# The node's live parameters -> what applies them on a running node (the engine's go through
# params.engine_changes). test/node/test_params.py checks every live parameter has one.
LIVE_APPLIERS: tuple[tuple[tuple[str, ...], Callable[..., None]], ...] = (
    (("instruction",), _instruction),
    (("markers.frame_id",), _set(lambda rt: rt.worker, "frame_id", "markers.frame_id")),
    (P.COMMAND_KEYS, _command),  # the player's and the shaper's settings, replaced whole
    (("stamp_tolerance_s",), _set(lambda rt: rt.inputs.pairer, "tolerance_s", "stamp_tolerance_s",
                                  float)),
    (("max_stamp_offset_s",), _set(lambda rt: rt.inputs, "max_offset_s", "max_stamp_offset_s",
                                   float)),  # the inputs' check (the player's: _command)
    (("deadman.timeout_s",), _set(lambda rt: rt.control.deadman, "timeout_s", "deadman.timeout_s",
                                  float)),
    (("ask.max_open",), _set(lambda rt: rt.text.questions, "capacity", "ask.max_open", int)),
)
