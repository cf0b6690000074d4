"""The bimanual robot (two ViperX 6-DoF arms with parallel grippers) in MuJoCo, as a policy sees it.

Built from gym-aloha 0.1.5's shipped XML and task classes, not its gym environment: that one
renders three 480x640 views with shadows and 4x multisampling on every step (about 200 ms here)
whatever is published. Here only the published cameras are drawn, small, without shadows,
reflections, skybox or multisampling (CameraRig).

- state, 14 values in JOINT_NAMES order: per arm (left, then right) the 6 joint angles in rad
  (waist, shoulder, elbow, forearm_roll, wrist_angle, wrist_rotate; MuJoCo's joint positions) and
  the gripper opening normalised as gym-aloha does (0 closed, 1 open: the left finger's slide
  position mapped linearly from 0.01844..0.058 m; the fingers' limits make it 0.08..0.98);
- command, 14 absolute targets in the same order and units: the 12 joint angles go to the
  position actuators as they are (MuJoCo clips them to each actuator's range), the two
  openings to both fingers of each gripper (gym-aloha's before_step mapping);
- physics: MuJoCo's 2 ms step (500 Hz); a control period (what demonstrations and the task's
  reward use) is 10 steps, 20 ms (50 Hz). `physics_step` advances one 2 ms step with the
  current target (the ROS node), `step` a whole control period.
"""
from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "osmesa")

from collections import deque  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

from .tasks import AlohaTask, get_task  # noqa: E402

ARM_JOINTS = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate", "gripper")
JOINT_NAMES: tuple[str, ...] = tuple(f"vx300s_{side}/{j}" for side in ("left", "right") for j in ARM_JOINTS)
# the node's max_tracking_error for this robot, JOINT_NAMES order: the arms' joints at the node's
# 0.2 rad; a gripper's whole opening range (0-1), because a gripper holding an object stays at
# the object's width while it is commanded shut: after any hold a tighter check would read the
# grasp as a measured-pose jump and never resume
TRACKING_TOLERANCE: tuple[float, ...] = tuple(1.0 if j == "gripper" else 0.2
                                              for _side in ("left", "right") for j in ARM_JOINTS)
# the node's chunk_replan_steps for this robot's evaluation: each chunk followed for 8 targets
# (0.32 s at 25 Hz) before a newer one takes over; through the node, the first 20 transfer-cube
# layouts: 0 -> 15/20, 8 -> 17/20, 16 -> 14/20, 24 -> 8/20 (docs/aloha.md)
REPLAN_STEPS = 8
PHYSICS_DT = 0.002  # MuJoCo's default timestep in gym-aloha's scene
SUBSTEPS = 10  # physics steps per control period
# gym-aloha's contact tests flicker for a period or two while a grasp holds (measured on the
# expert: 2 -> 0 -> 2 within a few periods); the stage a scene shows is the best of the last 0.2 s
SHOWN_STAGE_PERIODS = 10
CONTROL_PERIOD_S = PHYSICS_DT * SUBSTEPS  # 20 ms, 50 Hz
START_POSE = np.array([0.0, -0.96, 1.16, 0.0, -0.3, 0.0], dtype=np.float64)  # per arm (gym-aloha)
CAMERAS = ("top", "angle", "front_close", "left_pillar", "right_pillar", "left_wrist", "right_wrist")
DEFAULT_CAMERAS: tuple[str, ...] = ("top", "left_wrist", "right_wrist")
DEFAULT_IMAGE_SIZE = 64
MAX_IMAGE_SIZE = 480  # the scene's offscreen buffer is 640 x 480
SCENE_TOP_FOVY = 78.0  # the shipped scene's top camera: the whole 1.3 m table across the image
# the robot's top camera: the objects' 0.6 m of table across the image (0.9 cm per 64 px pixel, the
# cube 4-5 px; at 78 degrees 2 cm per pixel and the cube 2 px): docs/aloha.md
DEFAULT_TOP_FOVY = 40.0


class CameraRig:
    """Several cameras of one scene, each square `size` px, drawn with MuJoCo's Renderer on the CPU
    with shadows, reflections, skybox and multisampling off (measured at 64 px: top 5.4 ms, a
    wrist 3.5 ms). `capture` copies the scene of every camera (cheap, in the physics thread),
    `draw` renders them (the slow part, MuJoCo releases the GIL): RenderWorker's camera protocol.
    Images come out upright (MuJoCo's Renderer flips OpenGL's rows): no turn needed."""

    def __init__(self, model, data, cameras: tuple[str, ...] = DEFAULT_CAMERAS,
                 size: int = DEFAULT_IMAGE_SIZE) -> None:
        import mujoco

        unknown = [c for c in cameras if c not in CAMERAS]
        if unknown or not cameras:
            raise ValueError(f"cameras {list(cameras)}: each must be one of {', '.join(CAMERAS)}")
        if not 16 <= size <= MAX_IMAGE_SIZE:
            raise ValueError(f"image size {size} must be 16..{MAX_IMAGE_SIZE} px")
        self.cameras, self.size, self._data = tuple(cameras), size, data
        model.vis.quality.offsamples = 0  # before the renderers' contexts are made
        try:
            self._renderers = [mujoco.Renderer(model, size, size) for _ in self.cameras]
        except mujoco.FatalError as exc:
            raise RuntimeError(f"MuJoCo cannot render ({exc}): set MUJOCO_GL=osmesa (apt-get install "
                               "libosmesa6) before mujoco is first imported") from exc
        flags = mujoco.mjtRndFlag
        self._off = (flags.mjRND_SHADOW, flags.mjRND_REFLECTION, flags.mjRND_SKYBOX)

    def capture(self) -> None:
        for cam, r in zip(self.cameras, self._renderers):
            r.update_scene(self._data, camera=cam)
            for flag in self._off:  # update_scene restores the model's defaults every time
                r.scene.flags[flag] = 0

    def draw(self) -> np.ndarray:
        """uint8 [cameras, size, size, 3] RGB, in `cameras` order."""
        return np.stack([r.render() for r in self._renderers])

    def render(self) -> np.ndarray:
        self.capture()
        return self.draw()

    def close(self) -> None:
        for r in self._renderers:
            r.close()


@dataclass(frozen=True)
class StepInfo:
    step: int  # control periods (20 ms) since reset
    reward: int  # the task's reward now (0..4)
    success: bool  # reward 4 reached this episode (gym-aloha's, ACT's and LeRobot's success)
    progress: float  # the furthest stage / 4
    stage: int  # furthest reward this episode: index into task.captions
    caption: str  # the stage the scene shows now (AlohaEnv._shown), never success before it, nor
    # a success the cameras cannot see (AlohaTask.success_shown)
    timed_out: bool  # step >= task.horizon without success


def check_top_fovy(fovy: float) -> float:
    """The top camera's vertical field of view in degrees, 10..90, else ValueError."""
    if not 10.0 <= float(fovy) <= 90.0:  # NaN fails too
        raise ValueError(f"top camera fovy {fovy} must be 10..90 degrees")
    return float(fovy)


def check_target(target: np.ndarray) -> np.ndarray:
    """14 finite absolute targets, else ValueError (a simulator fed NaN does not recover)."""
    t = np.asarray(target, dtype=np.float64)
    if t.shape != (14,):
        raise ValueError(f"target must have 14 values (JOINT_NAMES), got shape {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError(f"target has a non-finite value: {t.tolist()}")
    return t


class AlohaEnv:
    """One ALOHA task in joint space with reproducible layouts: `reset(seed)` places the objects
    from `seed` alone; `step(target)` advances 20 ms; `physics_step()` 2 ms."""

    def __init__(self, task: str | AlohaTask, image_size: int = DEFAULT_IMAGE_SIZE,
                 cameras: tuple[str, ...] | None = DEFAULT_CAMERAS,
                 top_fovy: float = DEFAULT_TOP_FOVY) -> None:
        from dm_control import mujoco as dm_mujoco
        from gym_aloha.constants import ASSETS_DIR

        self.task = task if isinstance(task, AlohaTask) else get_task(task)
        self.physics = dm_mujoco.Physics.from_xml_path(str(ASSETS_DIR / self.task.joint_xml))
        self.top_fovy = check_top_fovy(top_fovy)
        self.physics.named.model.cam_fovy["top"] = self.top_fovy
        self._task = self.task.make_task(end_effector=False)
        self.camera = (CameraRig(self.physics.model.ptr, self.physics.data.ptr, tuple(cameras), image_size)
                       if cameras else None)
        self._target = np.zeros(14)
        self._steps = self._physics_steps = 0
        self._stage = 0
        self._recent: deque[int] = deque(maxlen=SHOWN_STAGE_PERIODS)
        self._last: StepInfo | None = None

    # -- episode -------------------------------------------------------------------------------
    def reset(self, seed: int) -> np.ndarray:
        """New layout from `seed`; the arms at gym-aloha's start pose, grippers as it starts them
        (fingers at 0.02239 m); returns the state."""
        from gym_aloha.constants import START_ARM_POSE

        layout = self.task.sample_layout(seed)
        p = self.physics
        with p.reset_context():
            p.named.data.qpos[:16] = START_ARM_POSE
            np.copyto(p.data.ctrl, START_ARM_POSE)
            p.named.data.qpos[16:] = layout
        self._steps = self._physics_steps = 0
        self._stage = 0
        self._recent.clear()
        self._target = self.state()  # holding the measured pose holds still
        self._last = self._info()
        return self.state()

    def set_target(self, target: np.ndarray) -> None:
        """The absolute target the actuators track from now on (check_target's rules)."""
        t = check_target(target)
        self._task.before_step(t, self.physics)  # joints as they are, openings to finger positions
        self._target = t

    def physics_step(self) -> None:
        """One 2 ms MuJoCo step towards the current target."""
        self.physics.step()
        self._physics_steps += 1

    def end_period(self) -> StepInfo:
        """Close a control period: count it, evaluate the task's reward and caption."""
        self._steps += 1
        self._last = self._info()
        return self._last

    def step(self, target: np.ndarray) -> StepInfo:
        """One 20 ms control period (10 physics steps) towards the absolute `target`."""
        if self._last is None:
            raise RuntimeError("reset(seed) before step")
        self.set_target(target)
        for _ in range(SUBSTEPS):
            self.physics_step()
        return self.end_period()

    # -- what the robot sees -------------------------------------------------------------------
    def state(self) -> np.ndarray:
        """14 values in JOINT_NAMES order (see the module docstring), float64."""
        return np.asarray(self._task.get_qpos(self.physics), dtype=np.float64)

    def velocity(self) -> np.ndarray:
        """14 joint velocities (rad/s; grippers in normalised opening per s), JOINT_NAMES order."""
        return np.asarray(self._task.get_qvel(self.physics), dtype=np.float64)

    def render(self) -> np.ndarray:
        """uint8 [cameras, size, size, 3] RGB, upright."""
        if self.camera is None:
            raise RuntimeError("made without cameras")
        return self.camera.render()

    @property
    def info(self) -> StepInfo:
        if self._last is None:
            raise RuntimeError("reset(seed) first")
        return self._last

    @property
    def target(self) -> np.ndarray:
        return self._target.copy()

    @property
    def physics_steps(self) -> int:
        return self._physics_steps

    def object_poses(self) -> np.ndarray:
        """The objects' free-joint poses (7 each): for labels and tests, never a policy input."""
        return np.asarray(self.physics.data.qpos[16:], dtype=np.float64).copy()

    def close(self) -> None:
        if self.camera is not None:
            self.camera.close()

    # -- internals -----------------------------------------------------------------------------
    def _info(self) -> StepInfo:
        reward = int(self._task.get_reward(self.physics))
        self._stage = max(self._stage, reward)  # progress only moves forward within an episode
        succeeded = self._stage >= 4  # success (reward 4) reached this episode
        shown = self.task.success_shown
        self._recent.append(4 if reward >= 4 and shown is not None and shown(self.physics) else min(reward, 3))
        return StepInfo(self._steps, reward, succeeded, self._stage / 4.0, self._stage,
                        self.task.captions[self._shown()],
                        timed_out=not succeeded and self._steps >= self.task.horizon)

    def _shown(self) -> int:
        """The stage the scene shows: the best of the last SHOWN_STAGE_PERIODS periods' stages,
        each period's the task's reward, success only where the cameras show it
        (AlohaTask.success_shown), else the stage before it. Not the furthest of the episode: a
        cube that was lifted and dropped shows the arm reaching again, and a caption of the
        furthest stage would teach (and score) a memory to describe a past, not its picture."""
        return max(self._recent)
