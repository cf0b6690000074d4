"""The bimanual robot on ROS topics (rclpy): three cameras, 14 joint states at 500 Hz, commands.

The contract is the Meta-World sim's (docs/simulation.md), for a bigger robot (docs/aloha.md):
- physics advances on the wall clock, one 2 ms MuJoCo step per 2 ms of wall time, in a thread
  of its own, never waiting for a command: inference costs the robot time as on hardware. The
  newest absolute target on the command topic is applied from the next physics step on; with
  none yet, the robot holds its measured start pose. Behind the clock (a busy machine), the
  owed steps run at once (0.1 ms each) and count as late; more than `max_catch_up_s` behind,
  the clock is re-based and the loss counted.
- a JointState after every stepping pass: every physics step (500 Hz) when on time;
- every camera_rate_hz the cameras' scenes are captured and drawn in the render thread
  (render_worker.py), all published with the stamp of the step they show;
- the task's reward (stage, success) is evaluated every control period (20 ms, as gym-aloha
  does); the episode status goes out at camera rate and at the episode's end.
Episodes: reset, a `reset_hold_s` hold (scene published, commands ignored), then up to the
task's horizon (400 periods, 8 s) or success, or `after_success_s` past success (the robot goes
on as commanded: what the memory says after success can be judged); the next starts at once.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from rclpy.qos import qos_profile_sensor_data

from builtin_interfaces.msg import Time
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Header, String

from oxygen_ros.robot.values import joint_state_to_vector

from .. import episodes
from ..episodes import Episode, Status, stamp_ns
from ..node import LATCHED, RELIABLE, STATUS_QOS
from ..loop_node import SimLoopNode
from .env import (CAMERAS, DEFAULT_CAMERAS, DEFAULT_IMAGE_SIZE, DEFAULT_TOP_FOVY, JOINT_NAMES, MAX_IMAGE_SIZE,
                  PHYSICS_DT, SUBSTEPS, AlohaEnv, check_target, check_top_fovy)
from .tasks import TASKS

# Wiring faults a sensitivity run feeds the policy (the simulator itself stays right):
#   bgr             the top camera's bytes in BGR order, still labelled rgb8
#   wrists-swapped  the left wrist image published on the right wrist's topic and back
#   arms-swapped    the joint state's left and right halves exchanged under the right names
FAULTS = ("", "bgr", "wrists-swapped", "arms-swapped")
EVAL_BASE_SEED = 1_000_000  # evaluation layouts, away from the demonstrations' small seeds


def schedule(tasks: tuple[str, ...], episodes_per_task: int, base_seed: int) -> list[Episode]:
    """The bimanual robot's episodes: episodes.schedule over its TASKS (episode e of task i has
    layout seed base + 1000 * i + e, i its index in TASKS)."""
    return episodes.schedule(tasks, episodes_per_task, base_seed, known=TASKS)


@dataclass(frozen=True)
class AlohaSimConfig:
    tasks: tuple[str, ...] = tuple(TASKS)
    episodes_per_task: int = 5
    base_seed: int = EVAL_BASE_SEED
    image_size: int = DEFAULT_IMAGE_SIZE
    top_fovy: float = DEFAULT_TOP_FOVY  # degrees: the top camera's field of view
    cameras: tuple[str, ...] = DEFAULT_CAMERAS
    camera_rate_hz: float = 25.0
    reset_hold_s: float = 0.5
    after_success_s: float = 0.0  # how long an episode goes on after its success
    max_catch_up_s: float = 0.5
    real_time_factor: float = 1.0  # simulated s per wall s
    topic_prefix: str = "/aloha"  # cameras at PREFIX/<camera>/image_raw
    joint_state_topic: str = "/aloha/joint_states"
    command_topic: str = "/oxygen/joint_command"
    episode_topic: str = "/aloha/episode"
    instruction_topic: str = "/oxygen/instruction"  # "" = do not publish
    fault: str = ""

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"fault {self.fault!r} is not one of {', '.join(f for f in FAULTS if f)} (or empty)")
        schedule(self.tasks, self.episodes_per_task, self.base_seed)
        if not self.cameras or any(c not in CAMERAS for c in self.cameras) or len(set(self.cameras)) != len(self.cameras):
            raise ValueError(f"cameras {list(self.cameras)}: distinct names from {', '.join(CAMERAS)}")
        if self.fault == "wrists-swapped" and not {"left_wrist", "right_wrist"} <= set(self.cameras):
            raise ValueError("fault wrists-swapped needs both wrist cameras")
        if not 16 <= self.image_size <= MAX_IMAGE_SIZE:
            raise ValueError(f"image_size {self.image_size} must be 16..{MAX_IMAGE_SIZE} px")
        check_top_fovy(self.top_fovy)
        if not 1.0 <= self.camera_rate_hz <= 50.0:
            raise ValueError(f"camera_rate_hz {self.camera_rate_hz} must be 1..50 (at most one image set per control period)")
        if not 0.0 <= self.reset_hold_s <= 10.0:
            raise ValueError(f"reset_hold_s {self.reset_hold_s} must be 0..10 s")
        if not 0.0 <= self.after_success_s <= 10.0:  # NaN fails too
            raise ValueError(f"after_success_s {self.after_success_s} must be 0..10 s")
        if not 0.05 <= self.real_time_factor <= 1.0:
            raise ValueError(f"real_time_factor {self.real_time_factor} must be 0.05..1")
        if not 0.0 < self.max_catch_up_s <= 5.0:
            raise ValueError(f"max_catch_up_s {self.max_catch_up_s} must be in (0, 5] s")
        for name in ("topic_prefix", "joint_state_topic", "command_topic", "episode_topic"):
            if not getattr(self, name).strip():
                raise ValueError(f"{name} must not be empty")

    def image_topic(self, camera: str) -> str:
        return f"{self.topic_prefix.rstrip('/')}/{camera}/image_raw"

    @property
    def image_topics(self) -> list[str]:
        """The cameras' topics in `cameras` order: the node's camera_topics (the policy's order)."""
        return [self.image_topic(c) for c in self.cameras]


@dataclass
class RunStats:
    physics_steps: int = 0
    late_steps: int = 0
    joint_states: int = 0
    lost_s: float = 0.0
    image_sets: int = 0
    skipped_image_sets: int = 0
    render_s: float = 0.0
    commands: int = 0
    bad_commands: int = 0
    episode_s: float = 0.0  # wall time inside episodes (holds excluded)
    episode_commands: int = 0  # commands received inside episodes
    results: list = field(default_factory=list)

    @property
    def steps(self) -> int:  # the evaluation's name (late_steps / steps)
        return self.physics_steps


class _Rig:
    """RenderWorker's camera protocol over the env's CameraRig (capture now, draw later)."""

    def __init__(self, env: AlohaEnv) -> None:
        self.env = env

    def capture(self) -> None:
        self.env.camera.capture()

    def draw(self) -> np.ndarray:
        return self.env.camera.draw()


class AlohaSimNode(SimLoopNode):
    loop_name = "aloha-physics"

    def __init__(self, config: AlohaSimConfig = AlohaSimConfig(), *, context: Any = None,
                 node_name: str = "aloha_sim", on_status: Callable[[Status], None] | None = None) -> None:
        super().__init__(node_name, config,
                         schedule(config.tasks, config.episodes_per_task, config.base_seed), RunStats(),
                         context=context, on_status=on_status)
        self._fresh = False
        self._pub_images = {c: self.create_publisher(Image, config.image_topic(c), qos_profile_sensor_data)
                            for c in config.cameras}
        self._pub_joints = self.create_publisher(JointState, config.joint_state_topic, RELIABLE)
        self._pub_status = self.create_publisher(String, config.episode_topic, STATUS_QOS)
        self._pub_instruction = (self.create_publisher(String, config.instruction_topic, LATCHED)
                                 if config.instruction_topic else None)
        self.create_subscription(JointState, config.command_topic, self._command_cb, RELIABLE)
        self._held: list[Image] | None = None

    def _check_command(self, msg: JointState) -> np.ndarray:
        return check_target(joint_state_to_vector(msg, JOINT_NAMES))

    def _store_target(self, target: np.ndarray) -> None:
        self._target, self._fresh = target, True

    def _make_env(self, task: str) -> AlohaEnv:
        return AlohaEnv(task, self.config.image_size, self.config.cameras, self.config.top_fovy)

    # -- one episode -----------------------------------------------------------------------------
    def _episode(self, ep: Episode) -> None:
        cfg = self.config
        env = self._envs[ep.task]
        dt = PHYSICS_DT / cfg.real_time_factor  # wall s per physics step
        cam_every = max(SUBSTEPS, round(1.0 / (cfg.camera_rate_hz * PHYSICS_DT)))  # physics steps per image set
        env.reset(ep.seed)
        with self._lock:
            self._target, self._fresh = None, False  # a command from the last scene is never applied
        if self._pub_instruction is not None:
            self._pub_instruction.publish(String(data=ep.instruction))
        late = 0
        # hold: the new scene published at camera rate, the robot still, commands not applied
        held = self._render_now(env)
        hold_end = time.monotonic() + cfg.reset_hold_s
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
                hold_end = now + cfg.reset_hold_s
            if now >= hold_end:
                break
            if now >= next_pub:
                stamp = self._stamp()
                for cam, msg in held.items():
                    msg.header.stamp = stamp
                    self._pub_images[cam].publish(msg)
                self._publish_state(env, stamp)
                self._publish_status(ep, env, 0.0, late, stamp=stamp)
                next_pub += cam_every * dt
            self._stop.wait(max(0.0, min(hold_end, next_pub) - now))
        with self._lock:
            fresh, target = self._fresh, self._target  # the newest command from the new scene
            self._fresh = False
        if fresh and target is not None:
            env.set_target(target)
        start = next_t = time.monotonic()
        commands0 = self.stats.commands
        steps = 0
        success_step: int | None = None  # physics steps at the first successful period
        while not self._stop.is_set():
            now = time.monotonic()
            if now < next_t:
                self._stop.wait(next_t - now)
                continue
            behind = now - next_t
            if behind > cfg.max_catch_up_s:
                self.stats.lost_s += behind
                self._warn("lost", f"simulation {behind:.2f} s behind the wall clock: re-based")
                next_t = now
            due = int((now - next_t) / dt) + 1
            with self._lock:
                fresh, target = self._fresh, self._target
                self._fresh = False
            if fresh:
                env.set_target(target)
            first, done = steps, False
            for _ in range(due):
                env.physics_step()
                steps += 1
                if steps % SUBSTEPS == 0:
                    info = env.end_period()
                    if info.success and success_step is None:
                        success_step = steps
                    if info.timed_out or (success_step is not None
                                          and (steps - success_step) * PHYSICS_DT >= cfg.after_success_s):
                        done = True
                        break
            taken = steps - first
            late += taken - 1
            self.stats.physics_steps += taken
            self.stats.late_steps += taken - 1
            next_t += due * dt
            stamp = self._stamp()
            self._publish_state(env, stamp)
            if first // cam_every != steps // cam_every or done:
                self._render.submit(_Rig(env), stamp)  # published when drawn, with this stamp
                if self._render.error is not None:
                    raise RuntimeError(f"rendering failed: {self._render.error}") from self._render.error
                self._publish_status(ep, env, steps * PHYSICS_DT, late, done=done, stamp=stamp,
                                     success_t=None if success_step is None else success_step * PHYSICS_DT)
            if done:
                self.stats.episode_s += time.monotonic() - start
                self.stats.episode_commands += self.stats.commands - commands0
                return

    # -- messages --------------------------------------------------------------------------------
    def _render_now(self, env: AlohaEnv) -> dict[str, Image]:
        self._render.wait_idle()
        self._held = None
        self._render.submit(_Rig(env), None)
        self._render.wait_idle()
        if self._render.error is not None:
            raise RuntimeError(f"rendering failed: {self._render.error}") from self._render.error
        return self._held

    def _deliver(self, images: np.ndarray, stamp: Time | None, tag: object) -> None:
        """In the render thread: one Image per camera, all with the stamp of their step."""
        st = self.stats
        st.image_sets, st.render_s, st.skipped_image_sets = (self._render.rendered, self._render.render_s,
                                                             self._render.skipped)
        msgs = {cam: self._image_msg(cam, img) for cam, img in zip(self.config.cameras, images)}
        if self.config.fault == "wrists-swapped":
            msgs["left_wrist"], msgs["right_wrist"] = msgs["right_wrist"], msgs["left_wrist"]
        if stamp is None:
            self._held = msgs
            return
        for cam, msg in msgs.items():
            msg.header.stamp = stamp
            self._pub_images[cam].publish(msg)

    def _image_msg(self, camera: str, rgb: np.ndarray) -> Image:
        if self.config.fault == "bgr" and camera == "top":
            rgb = np.ascontiguousarray(rgb[:, :, ::-1])
        h, w = rgb.shape[:2]
        return Image(header=Header(frame_id=f"aloha/{camera}"), height=h, width=w, encoding="rgb8",
                     is_bigendian=0, step=w * 3, data=rgb.tobytes())

    def _publish_state(self, env: AlohaEnv, stamp: Time) -> None:
        pos, vel = env.state(), env.velocity()
        if self.config.fault == "arms-swapped":
            pos, vel = np.roll(pos, 7), np.roll(vel, 7)
        self._pub_joints.publish(JointState(header=Header(stamp=stamp), name=list(JOINT_NAMES),
                                            position=pos.tolist(), velocity=vel.tolist()))
        self.stats.joint_states += 1

    def _publish_status(self, ep: Episode, env: AlohaEnv, t: float, late: int, done: bool = False,
                        stamp: Time | None = None, success_t: float | None = None) -> None:
        info = env.info
        status = Status(ep.index, ep.task, ep.seed, ep.instruction, info.step, round(t, 4),
                        round(info.progress, 4), info.stage, info.caption, info.success, done,
                        info.timed_out and not info.success, late, stamp_ns(stamp),
                        None if success_t is None else round(success_t, 4))
        self._pub_status.publish(String(data=status.to_json()))
        if done:
            self.stats.results.append(status)
        if self._on_status is not None:
            self._on_status(status)
