"""The simulated robot on ROS topics (rclpy): camera, joint states, commands, episode status.

Timing: physics advances on the wall clock, one control step (12.5 ms, 5 MuJoCo steps of 2.5 ms)
per period, in a thread of its own; it never waits for a command. The newest absolute target on
the command topic is applied at every control step; with none (yet) the last one is held. The
MuJoCo steps run one at a time, each when it is due, and each one's joint state is published,
stamped at its due time (400 Hz). Images are drawn in a render thread (render_worker.py) from a
scene captured at their step, and published with that step's stamp when drawn (15-35 ms later
here, like a camera's latency). When the loop falls behind (a busy machine) so that the next
control step is due already, the owed control steps are stepped at once, each in one MuJoCo
call (~1 ms), so that simulated time keeps up with wall time; they are counted as late steps
and publish one joint state per control period at most: catching up costs less than keeping
time, so a busy process never gets busier for it. More than `max_catch_up_s` behind, the clock
is re-based and the loss counted (`lost_s` in the log).

`real_time_factor` (Gazebo's name) below 1 runs the simulation slower than the wall clock: a
control step every 12.5 ms / factor of wall time. Stamps stay wall time, so a policy sees a
slower world, not a slower clock: use it to check plumbing with an in-process expert on a
loaded machine (the tests), never for an evaluation of a policy's timing.

Episodes: after a reset the robot holds still for `reset_hold_s` while the camera and joint
states of the new scene are already published; commands are ignored meanwhile, so chunks that a
policy computed from the previous scene are not played in the new one. The episode's clock
(`t`, `step`, the timeout) starts when the hold ends. The episode ends on success or after the
task's horizon; the next one starts at once (episodes.schedule).

Topics (defaults; SimConfig):
- /sim/camera/image_raw   sensor_msgs/Image rgb8, camera_rate_hz (sensor-data QoS)
- /sim/joint_states       sensor_msgs/JointState (JOINT_NAMES, absolute), every MuJoCo step
                          (400 Hz) stamped at its due time; catching up, the newest due only
- /oxygen/joint_command   sensor_msgs/JointState in: absolute targets by joint name
- /sim/episode            std_msgs/String, JSON episodes.Status at camera rate and at the end
- /oxygen/instruction     std_msgs/String: the task instruction at every episode start
- /sim/privileged_state   std_msgs/String JSON {episode, task, obs} with each control step's
                          joint state, only with `privileged` (for the scripted expert; never
                          for a policy)
"""
from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

from builtin_interfaces.msg import Time
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Header, String

from oxygen_ros.robot.values import joint_state_to_vector

from .env import (CAMERAS, CONTROL_PERIOD_S, DEFAULT_CAMERA, DEFAULT_IMAGE_SIZE, GAIN, JOINT_NAMES,
                  PHYSICS_STEPS, SimEnv)
from .episodes import Episode, Status, schedule, stamp_ns
from .loop_node import SimLoopNode
from .tasks import TASKS

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
STATUS_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
# the instruction must reach a node that subscribes later too (it keeps the last one)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


# Wiring faults a sensitivity run feeds the policy (the simulator itself stays right):
#   bgr            the camera's bytes in BGR order, still labelled rgb8 (a driver set up wrongly)
#   state-swapped  the joint state's ee_x and ee_y values exchanged under the right names (a wrong
#                  joint mapping); commands are still read by name
FAULTS = ("", "bgr", "state-swapped")


@contextmanager
def spinning(sim: Any, nodes: list[Node], executor: Any) -> Iterator[None]:
    """`nodes` (a sim node among them) spun by `executor` in a thread for the block; after it the
    sim stopped, the executor shut down, its thread joined (a spin thread still inside rcl at exit
    aborts the process) and every node destroyed. The caller owns rclpy's init and shutdown."""
    for n in nodes:
        executor.add_node(n)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    try:
        yield
    finally:
        sim.stop()
        executor.shutdown(timeout_sec=1.0)
        spin.join(timeout=5.0)
        for n in nodes:
            n.destroy_node()


@dataclass(frozen=True)
class SimConfig:
    tasks: tuple[str, ...] = tuple(TASKS)
    episodes_per_task: int = 5
    base_seed: int = 0
    image_size: int = DEFAULT_IMAGE_SIZE
    camera: str = DEFAULT_CAMERA
    camera_rate_hz: float = 20.0
    reset_hold_s: float = 0.5
    max_catch_up_s: float = 0.5
    # simulated seconds per wall second (1 = real time; below 1 for checks on a slow machine)
    real_time_factor: float = 1.0
    gain: float = GAIN
    privileged: bool = False
    image_topic: str = "/sim/camera/image_raw"
    joint_state_topic: str = "/sim/joint_states"
    command_topic: str = "/oxygen/joint_command"
    episode_topic: str = "/sim/episode"
    instruction_topic: str = "/oxygen/instruction"  # "" = do not publish
    privileged_topic: str = "/sim/privileged_state"
    frame_id: str = "sim_camera"
    # a deliberate wiring fault, for sensitivity runs (FAULTS); "" = none
    fault: str = ""

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"fault {self.fault!r} is not one of {', '.join(f for f in FAULTS if f)} (or empty)")
        schedule(self.tasks, self.episodes_per_task, self.base_seed)  # raises on bad tasks / count
        if self.camera not in CAMERAS:
            raise ValueError(f"camera {self.camera!r} is not one of {', '.join(CAMERAS)}")
        if not 16 <= self.image_size <= 512:
            raise ValueError(f"image_size {self.image_size} must be 16..512 px")
        if not 1.0 <= self.camera_rate_hz <= 1.0 / CONTROL_PERIOD_S:
            raise ValueError(f"camera_rate_hz {self.camera_rate_hz} must be 1..{1.0 / CONTROL_PERIOD_S:g} "
                             "(at most one image per control step)")
        if not 0.0 <= self.reset_hold_s <= 10.0:
            raise ValueError(f"reset_hold_s {self.reset_hold_s} must be 0..10 s")
        if not 0.05 <= self.real_time_factor <= 1.0:
            raise ValueError(f"real_time_factor {self.real_time_factor} must be 0.05..1 (simulated s per wall s)")
        if not 0.0 < self.max_catch_up_s <= 5.0:
            raise ValueError(f"max_catch_up_s {self.max_catch_up_s} must be in (0, 5] s")
        for name in ("image_topic", "joint_state_topic", "command_topic", "episode_topic",
                     "privileged_topic"):
            if not getattr(self, name).strip():
                raise ValueError(f"{name} must not be empty")


@dataclass
class RunStats:
    steps: int = 0  # control steps
    late_steps: int = 0  # control steps stepped when the next was due already (catching up)
    joint_states: int = 0  # published
    lost_s: float = 0.0
    images: int = 0
    skipped_images: int = 0  # due while the previous image was still being drawn
    render_s: float = 0.0
    commands: int = 0
    bad_commands: int = 0
    episode_s: float = 0.0  # wall time inside episodes (holds excluded)
    episode_commands: int = 0  # commands received inside episodes
    results: list = field(default_factory=list)  # final Status of each episode


class SimNode(SimLoopNode):
    """Runs `config`'s episodes on the wall clock; `finished` is set after the last one."""

    def __init__(self, config: SimConfig = SimConfig(), *, context: Any = None,
                 node_name: str = "sim", on_status: Callable[[Status], None] | None = None) -> None:
        super().__init__(node_name, config,
                         schedule(config.tasks, config.episodes_per_task, config.base_seed), RunStats(),
                         context=context, on_status=on_status)
        self._pub_image = self.create_publisher(Image, config.image_topic, qos_profile_sensor_data)
        self._pub_joints = self.create_publisher(JointState, config.joint_state_topic, RELIABLE)
        self._pub_status = self.create_publisher(String, config.episode_topic, STATUS_QOS)
        self._pub_instruction = (self.create_publisher(String, config.instruction_topic, LATCHED)
                                 if config.instruction_topic else None)
        self._pub_priv = (self.create_publisher(String, config.privileged_topic, RELIABLE)
                          if config.privileged else None)
        self.create_subscription(JointState, config.command_topic, self._command_cb, RELIABLE)
        self._last_image: Image | None = None
        self._joints_msg = JointState(name=list(JOINT_NAMES))
        self._published_at = float("-inf")  # monotonic time of the newest joint state

    def _check_command(self, msg: JointState) -> np.ndarray:
        return joint_state_to_vector(msg, JOINT_NAMES).astype(np.float64)

    def _make_env(self, task: str) -> SimEnv:
        return SimEnv(task, self.config.image_size, self.config.camera, self.config.gain)

    def _episode(self, ep: Episode) -> None:
        cfg = self.config
        env = self._envs[ep.task]
        cam_every = max(1, round(1.0 / (cfg.camera_rate_hz * CONTROL_PERIOD_S)))  # steps per image
        dt = CONTROL_PERIOD_S / cfg.real_time_factor  # wall seconds per control step
        state = env.reset(ep.seed)
        with self._lock:
            self._target = None  # a command from the previous scene is never applied here
        # The previous scene's last image (drawn in the render thread, 15-35 ms) goes out before
        # the new instruction: a policy node runs the frames it received before an instruction
        # under the old one (Pairer.retire), and that image published after it was run under the
        # new one ("the window is open", said of the last button-press episode's button).
        self._render.wait_idle()
        if self._pub_instruction is not None:
            self._pub_instruction.publish(String(data=ep.instruction))
        late = 0

        # hold: the new scene is published, the robot stands still, commands are not applied
        hold_end = time.monotonic() + cfg.reset_hold_s
        image_msg = self._render_now(env)
        next_pub = time.monotonic()
        wait = self._ready if ep.index == 0 else None
        give_up = time.monotonic() + self._ready_timeout_s
        while not self._stop.is_set():
            now = time.monotonic()
            if wait is not None and not wait.is_set():
                if now > give_up:
                    self.error = f"the policy gave no sign of life within {self._ready_timeout_s:g} s"
                    self._stop.set()
                    return
                hold_end = now + cfg.reset_hold_s  # the full hold starts once it is ready
            if now >= hold_end:
                break
            if now >= next_pub:
                stamp = self._stamp()
                image_msg.header.stamp = stamp
                self._pub_image.publish(image_msg)
                self._publish_state(state, stamp, ep, env)
                self._publish_status(ep, env, 0, 0.0, late, stamp=stamp)
                next_pub += cam_every * dt
            self._stop.wait(max(0.0, min(hold_end, next_pub) - now))
        with self._lock:
            target = self._target  # the newest command, computed from the new scene
        hold_target = state.copy()

        start = time.monotonic()
        next_t = start  # when the next control step's first physics step is due (wall clock)
        step = 0
        commands0 = self.stats.commands
        physics = _PhysicsSteps(self, env, dt)
        while not self._stop.is_set():
            now = time.monotonic()
            if now < next_t:
                self._stop.wait(next_t - now)
                continue
            behind = now - next_t
            if behind > cfg.max_catch_up_s:  # cannot catch up: re-base, count what was lost
                self.stats.lost_s += behind
                self._warn("lost", f"simulation {behind:.2f} s behind the wall clock: re-based")
                next_t = now
            with self._lock:
                if self._target is not None:
                    target = self._target
            physics.start = next_t
            # on time, its physics steps one by one on the wall clock, each one's joint state
            # published; when the next control step is due already (late: catching up), at once
            # (nothing to wait for, one MuJoCo call: catching up costs less than keeping time)
            on_time = now < physics.due(PHYSICS_STEPS)
            info = env.step(target if target is not None else hold_target,
                            physics.after if on_time else None)
            step += 1
            self.stats.steps += 1
            if not on_time:
                late += 1
                self.stats.late_steps += 1
            next_t += dt
            now = time.monotonic()
            t = step * CONTROL_PERIOD_S
            done = info.success or info.timed_out
            image = (step - 1) // cam_every != step // cam_every or done  # an image step
            stamp = self._stamp_at(physics.due(PHYSICS_STEPS - 1))
            # its joint state goes out when it is the newest due (or the image and the status
            # carry its stamp, or none went out for a control period while catching up)
            if now < physics.due(PHYSICS_STEPS) or image or now - self._published_at >= dt:
                self._publish_state(env.state(), stamp, ep, env)
            if image:
                self._render.submit(env.camera, stamp)  # published when drawn, with this stamp
                if self._render.error is not None:
                    raise RuntimeError(f"rendering failed: {self._render.error}") from self._render.error
                self._publish_status(ep, env, step, t, late, done=done, stamp=stamp)
            if done:
                self.stats.episode_s += time.monotonic() - start
                self.stats.episode_commands += self.stats.commands - commands0
                return

    def _stamp_at(self, due: float) -> Time:
        """The node clock's time when monotonic time was `due`."""
        clock_ns = self.get_clock().now().nanoseconds
        now = time.monotonic()  # read next to the clock: a thread switch between them shifts it
        if clock_ns == 0:  # simulated time before the first /clock: no time at all
            return Time()
        ns = clock_ns - round((now - due) * 1e9)
        return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)

    # -- messages ----------------------------------------------------------------------------------
    def _render_now(self, env: SimEnv) -> Image:
        """The current scene's image, drawn by the worker (waits for it; for the holds)."""
        self._render.wait_idle()
        self._last_image = None
        self._render.submit(env.camera, None)
        self._render.wait_idle()
        if self._render.error is not None:
            raise RuntimeError(f"rendering failed: {self._render.error}") from self._render.error
        return self._last_image

    def _deliver(self, rgb: np.ndarray, stamp: Time | None, tag: object) -> None:
        """In the render thread: publish a drawn image (stamp None: keep it for the caller)."""
        msg = self._image_msg(rgb)
        stats = self.stats
        stats.images, stats.render_s = self._render.rendered, self._render.render_s
        stats.skipped_images = self._render.skipped
        if stamp is None:
            self._last_image = msg
        else:
            msg.header.stamp = stamp
            self._pub_image.publish(msg)

    def _image_msg(self, rgb: np.ndarray) -> Image:
        if self.config.fault == "bgr":
            rgb = np.ascontiguousarray(rgb[:, :, ::-1])
        h, w = rgb.shape[:2]
        return Image(header=Header(frame_id=self.config.frame_id), height=h, width=w, encoding="rgb8",
                     is_bigendian=0, step=w * 3, data=rgb.tobytes())

    def _publish_joints(self, state: np.ndarray, stamp: Time) -> None:
        """One joint state, cheaply: the message is reused (publish serializes it at once)."""
        if self.config.fault == "state-swapped":
            state = state[[1, 0, 2, 3]]
        msg = self._joints_msg
        msg.header.stamp = stamp
        msg.position = state.tolist()
        self._pub_joints.publish(msg)
        self._published_at = time.monotonic()
        self.stats.joint_states += 1

    def _publish_state(self, state: np.ndarray, stamp: Time, ep: Episode, env: SimEnv) -> None:
        """A control step's joint state and, with `privileged`, the simulator's state."""
        self._publish_joints(state, stamp)
        if self._pub_priv is not None:
            self._pub_priv.publish(String(data=json.dumps(
                {"episode": ep.index, "task": ep.task, "obs": env.raw_obs.tolist()})))

    def _publish_status(self, ep: Episode, env: SimEnv, step: int, t: float, late: int,
                        done: bool = False, stamp: Time | None = None) -> None:
        info = env.info
        status = Status(ep.index, ep.task, ep.seed, ep.instruction, step, round(t, 4),
                        round(info.progress, 4), info.stage, info.caption, info.success, done,
                        info.timed_out and not info.success, late, stamp_ns(stamp))
        self._pub_status.publish(String(data=status.to_json()))
        if done:
            self.stats.results.append(status)
        if self._on_status is not None:
            self._on_status(status)


class _PhysicsSteps:
    """The physics steps of one control step on the wall clock: physics step i of the control
    step due at `start` is due at start + i * dt / PHYSICS_STEPS. After each (but the last, which
    the loop publishes with the step's result) its joint state goes out, stamped at its due time,
    when it is the newest due one; behind the clock, only one per control period (so catching
    up costs fewer messages, not more: a burst of publishes starved the process and it fell
    further behind); then it waits for the next one's due time."""

    def __init__(self, node: SimNode, env: SimEnv, dt: float) -> None:
        self.node, self.env, self.start = node, env, 0.0
        self.physics_dt = dt / PHYSICS_STEPS  # wall seconds per physics step
        self.control_dt = dt

    def due(self, i: int) -> float:
        return self.start + i * self.physics_dt

    def after(self, i: int) -> None:
        node = self.node
        now = time.monotonic()
        if now < self.due(i + 1) or now - node._published_at >= self.control_dt:
            node._publish_joints(self.env.physics_state(), node._stamp_at(self.due(i)))
        wait = self.due(i + 1) - time.monotonic()
        if wait > 0:
            node._stop.wait(wait)
