"""One simulated robot: a Meta-World v3 task with a fast camera, a 4-joint state and absolute targets.

The robot as a policy sees it (and as the sim node publishes it):
- state, 4 named "joints" (JOINT_NAMES, absolute): end-effector (hand) position x, y, z in metres
  in the world frame, and the gripper opening (1.0 open, about 0.3 closed on nothing);
- action: an absolute target in the same units, [x, y, z, gripper opening]. The simulator turns it
  into its own action with `action_from_target`: a_xyz = clip(GAIN * (target_xyz - hand), -1, 1)
  (a P controller on the hand, as Meta-World's experts do: a 1.0 action moves the mocap 1 cm per
  step) and a gripper command linear in the target opening, clipped to [-1, 1]. Holding the
  measured state as the target holds the robot still;
- camera: one RGB image, uint8 HxWx3, from `render()` (see FastCamera).

`target_from_expert` is the exact inverse for the scripted expert's actions (which are clipped to
[-1, 1] already), so demonstrations labelled with it replay to the same simulator actions.

Needs `metaworld` (pip, requirements-sim.txt) and an OpenGL for MuJoCo: set MUJOCO_GL=osmesa
(Debian's libosmesa6) before the first import of mujoco; `import oxygen_ros.sim.env` sets it when
it is unset.
"""
from __future__ import annotations

import os
import warnings
from collections import deque
from typing import Callable

os.environ.setdefault("MUJOCO_GL", "osmesa")

from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

from .tasks import SHOWN_STEPS, TASKS, Task, get_task  # noqa: E402

JOINT_NAMES: tuple[str, ...] = ("ee_x", "ee_y", "ee_z", "gripper")
CONTROL_PERIOD_S = 0.0125  # Meta-World: timestep 2.5 ms x frame_skip 5 per env step (80 Hz)
PHYSICS_STEPS = 5  # MuJoCo steps per control step (Meta-World's frame_skip)
PHYSICS_DT = CONTROL_PERIOD_S / PHYSICS_STEPS  # 2.5 ms: one MuJoCo step (400 Hz)
GAIN = 10.0  # 1/m: a 10 cm error is a full-speed (1 cm/step) action; measured: no overshoot
GRIPPER_OPEN = 1.0  # measured opening with the fingers commanded fully open (-1)
GRIPPER_CLOSED = 0.297  # measured opening with the fingers commanded closed (+1) on nothing
CAMERAS = ("corner", "corner2", "corner3", "corner4", "topview", "behindGripper", "gripperPOV")
DEFAULT_CAMERA = "corner4"
DEFAULT_IMAGE_SIZE = 64
# these cameras' up vector points down in Meta-World's scene: their image is upside down
_ROTATED_CAMERAS = frozenset({"corner", "corner2", "corner3", "corner4"})


def gripper_command(opening: float | np.ndarray) -> np.ndarray:
    """Target opening (GRIPPER_CLOSED..GRIPPER_OPEN) -> Meta-World finger command (+1 closes)."""
    frac = (GRIPPER_OPEN - np.asarray(opening, dtype=np.float64)) / (GRIPPER_OPEN - GRIPPER_CLOSED)
    return np.clip(2.0 * frac - 1.0, -1.0, 1.0)


def gripper_opening(command: float | np.ndarray) -> np.ndarray:
    """Inverse of gripper_command for a command in [-1, 1]."""
    c = np.clip(np.asarray(command, dtype=np.float64), -1.0, 1.0)
    return GRIPPER_OPEN - (c + 1.0) / 2.0 * (GRIPPER_OPEN - GRIPPER_CLOSED)


def action_from_target(state: np.ndarray, target: np.ndarray, gain: float = GAIN) -> np.ndarray:
    """Absolute target [x, y, z, opening] at `state` [x, y, z, opening] -> Meta-World action
    float32[4] in [-1, 1]. Non-finite targets are refused (a simulator fed NaN does not recover)."""
    state = np.asarray(state, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    if state.shape != (4,) or target.shape != (4,):
        raise ValueError(f"state and target must have 4 values, got {state.shape} and {target.shape}")
    if not np.all(np.isfinite(target)):
        raise ValueError(f"target has a non-finite value: {target.tolist()}")
    xyz = np.clip(gain * (target[:3] - state[:3]), -1.0, 1.0)
    return np.array([*xyz, gripper_command(target[3])], dtype=np.float32)


def target_from_expert(state: np.ndarray, expert_action: np.ndarray, gain: float = GAIN) -> np.ndarray:
    """The absolute target that `action_from_target` turns back into `expert_action` (exact for
    actions in [-1, 1], which the experts' are): hand + a_xyz / gain, opening from the command."""
    state = np.asarray(state, dtype=np.float64)
    a = np.clip(np.asarray(expert_action, dtype=np.float64), -1.0, 1.0)
    return np.array([*(state[:3] + a[:3] / gain), gripper_opening(a[3])], dtype=np.float64)


class FastCamera:
    """One MuJoCo camera rendered on the CPU in ~7-15 ms at 64-96 px: shadows, reflections, the
    skybox and multisampling off (with them, 80-130 ms). Corner cameras are turned right side up.
    One per simulator; render from one thread (an OSMesa context belongs to the thread using it)."""

    def __init__(self, model, data, camera: str = DEFAULT_CAMERA, size: int = DEFAULT_IMAGE_SIZE) -> None:
        import mujoco

        if camera not in CAMERAS:
            raise ValueError(f"unknown camera {camera!r}; Meta-World has {', '.join(CAMERAS)}")
        if not 16 <= size <= 512:
            raise ValueError(f"image size {size} must be 16..512 px")
        self._mujoco = mujoco
        self.camera, self.size = camera, size
        self._data = data
        model.vis.quality.offsamples = 0  # must be set before the renderer's context is made
        try:
            self._renderer = mujoco.Renderer(model, size, size)
        except mujoco.FatalError as exc:  # MuJoCo picked its GL backend when first imported
            raise RuntimeError(
                f"MuJoCo cannot render ({exc}). Set MUJOCO_GL=osmesa (Debian: apt-get install "
                "libosmesa6) before mujoco or metaworld is first imported, e.g. import "
                "oxygen_ros.sim first") from exc
        flags = mujoco.mjtRndFlag
        self._off = (flags.mjRND_SHADOW, flags.mjRND_REFLECTION, flags.mjRND_SKYBOX)
        self._flip = camera in _ROTATED_CAMERAS

    def render(self) -> np.ndarray:
        self.capture()
        return self.draw()

    def capture(self) -> None:
        """Copy the simulation's current state into the scene (CPU, ~1 ms): after this, physics
        may step on while `draw` renders the captured scene, e.g. in another thread."""
        self._renderer.update_scene(self._data, camera=self.camera)
        for flag in self._off:  # update_scene restores the model's defaults every time
            self._renderer.scene.flags[flag] = 0

    def draw(self) -> np.ndarray:
        """Render the captured scene (OpenGL, the slow part; MuJoCo releases the GIL)."""
        img = self._renderer.render()
        return np.ascontiguousarray(img[::-1, ::-1] if self._flip else img)

    def close(self) -> None:
        self._renderer.close()


@dataclass(frozen=True)
class StepInfo:
    step: int  # control steps since reset
    success: bool
    progress: float  # 0..1: half reach (hand to the object), half object to its goal; 1 on success
    stage: int  # index into task.captions, the furthest reached this episode
    caption: str  # the stage the scene shows now (tasks.SHOWN_STEPS); success once reported
    timed_out: bool  # step >= task.horizon without success


class SimEnv:
    """A Meta-World v3 task with new, reproducible layouts: `reset(seed)` places the object from
    `seed` alone (whatever ran before), `step(target)` advances one control period."""

    def __init__(self, task: str | Task, image_size: int = DEFAULT_IMAGE_SIZE,
                 camera: str = DEFAULT_CAMERA, gain: float = GAIN) -> None:
        import metaworld
        import mujoco
        from metaworld.policies import ENV_POLICY_MAP

        self._mujoco = mujoco

        self.task = task if isinstance(task, Task) else get_task(task)
        if not 0.0 < gain <= 50.0:
            raise ValueError(f"gain {gain} must be in (0, 50] (1/m; 100 oscillates)")
        self.gain = gain
        ctor = metaworld.env_dict.ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[f"{self.task.env_name}-goal-observable"]
        self._env = ctor(seed=0)
        # The constructor freezes one random layout (every reset would repeat it). Unfreeze, and
        # draw from the env's own generator (seeded per reset) instead of the global np.random.
        self._env._freeze_rand_vec = False
        self._env.seeded_rand_vec = True
        self._expert = ENV_POLICY_MAP[self.task.env_name]()
        self.camera = FastCamera(self._env.model, self._env.data, camera, image_size)
        if self._env.frame_skip != PHYSICS_STEPS:
            raise RuntimeError(f"{self.task.env_name}: frame_skip {self._env.frame_skip}, "
                               f"expected {PHYSICS_STEPS} (CONTROL_PERIOD_S)")
        # Meta-World's step runs its frame_skip MuJoCo steps in one call; to see the robot after
        # each (the joint states at the physics rate) they run one at a time when a step is given
        # a hook: the same MuJoCo steps in the same order, the same result (test_env.py)
        self._physics_hook: Callable[[int], None] | None = None
        self._env._step_mujoco_simulation = self._step_physics
        space = self._env.sawyer_observation_space
        self._state_low, self._state_high = space.low[0:4].copy(), space.high[0:4].copy()
        self._obs: np.ndarray | None = None
        self._steps = 0
        self._reach0 = self._place0 = 1.0
        self._stage = 0  # the furthest stage reached this episode (progress)
        self._done = False  # success reported this episode
        self._recent: deque[int] = deque(maxlen=SHOWN_STEPS)  # the last steps' stages
        # the states of the last SHOWN_STEPS steps and the one before ([0]: SHOWN_STEPS ago, or
        # the reset state): what moved since then is being moved now (Task.moved_stage)
        self._earlier: deque[np.ndarray] = deque(maxlen=SHOWN_STEPS + 1)
        self._last: StepInfo | None = None

    # -- episode ---------------------------------------------------------------------------------
    def reset(self, seed: int) -> np.ndarray:
        """New layout from `seed`; returns the state."""
        self._env.seed(int(seed))
        obs, _ = self._env.reset()
        self._obs, self._steps, self._stage, self._done = obs, 0, 0, False
        self._recent.clear()
        self._earlier.clear()
        self._reach0 = max(self._reach(obs), 1e-6)
        self._place0 = max(self._place(obs), 1e-6)
        self._last = self._info(obs, success=False, place=self._place0)
        return self.state()

    def step(self, target: np.ndarray, after_physics_step: Callable[[int], None] | None = None) -> StepInfo:
        """One control period towards the absolute `target`; after a timeout or success the
        caller resets (stepping on past the task's horizon is allowed up to Meta-World's 500).
        `after_physics_step(i)` is called after each of its first PHYSICS_STEPS - 1 MuJoCo steps
        (i = 0, 1, ...; `physics_state()` is the robot then): the caller may wait for the wall
        clock there. After the last one the step's own result is the robot (`state()`)."""
        self._physics_hook = after_physics_step
        try:
            return self.step_action(action_from_target(self.state(), target, self.gain))
        finally:
            self._physics_hook = None

    def play(self, targets: np.ndarray, hold_steps: int) -> tuple[StepInfo, bool]:
        """Each of `targets` held for `hold_steps` control periods, stopping at success or
        timeout: (the last step's info, whether the episode ended)."""
        info = self.info
        for target in targets:
            for _ in range(hold_steps):
                info = self.step(target)
                if info.success or info.timed_out:
                    return info, True
        return info, False

    def step_action(self, action: np.ndarray) -> StepInfo:
        """One control period with a raw Meta-World action (the expert's, for reference)."""
        if self._obs is None:
            raise RuntimeError("reset(seed) before step")
        obs, _, _, _, info = self._env.step(np.asarray(action, dtype=np.float32))
        self._obs, self._steps = obs, self._steps + 1
        self._last = self._info(obs, bool(info["success"]), float(info["obj_to_target"]))
        return self._last

    # -- what the robot sees -----------------------------------------------------------------------
    def state(self) -> np.ndarray:
        """[ee_x, ee_y, ee_z, gripper opening] (JOINT_NAMES), float64."""
        self._need_obs()
        return np.array(self._obs[0:4], dtype=np.float64)

    def physics_state(self) -> np.ndarray:
        """`state()` of the robot as the newest MuJoCo step left it, between a step's MuJoCo
        steps too (kinematics recomputed: Meta-World's observation of the hand and fingers,
        clipped as it clips them; the next MuJoCo step recomputes them anyway)."""
        env = self._env
        mujoco = self._mujoco
        mujoco.mj_kinematics(env.model, env.data)
        data = env.data
        opening = np.linalg.norm(data.body("rightclaw").xpos - data.body("leftclaw").xpos)
        state = np.array([*data.body("hand").xpos, np.clip(opening / 0.1, 0.0, 1.0)], dtype=np.float64)
        return np.clip(state, self._state_low, self._state_high)

    def render(self) -> np.ndarray:
        """The camera image, uint8 (size, size, 3), RGB."""
        return self.camera.render()

    # -- labels and the reference policy ----------------------------------------------------------
    def expert_action(self, aim_offset: np.ndarray | None = None) -> np.ndarray:
        """The scripted expert's Meta-World action at the current state. `aim_offset` (m, x y z)
        makes it aim at a point beside the object (it believes the object is there): the same
        motions, missing, as a failing policy does (demos.py's caption-only episodes)."""
        self._need_obs()
        obs = self._obs
        if aim_offset is not None:
            obs = obs.copy()
            obs[4:7] += np.asarray(aim_offset, dtype=np.float64)
        with warnings.catch_warnings():
            # the experts warn that their gains saturate the [-1, 1] action (they are meant to)
            warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high")
            return np.asarray(self._expert.get_action(obs), dtype=np.float32)

    def expert_target(self, aim_offset: np.ndarray | None = None) -> np.ndarray:
        """The scripted expert's action as an absolute target (target_from_expert)."""
        return target_from_expert(self.state(), self.expert_action(aim_offset), self.gain)

    @property
    def info(self) -> StepInfo:
        """The newest step's (or reset's) success, progress and caption."""
        if self._last is None:
            raise RuntimeError("reset(seed) first")
        return self._last

    @property
    def raw_obs(self) -> np.ndarray:
        """Meta-World's 39-D state (object and goal included): for labels, never for the policy."""
        self._need_obs()
        return self._obs.copy()

    def close(self) -> None:
        self.camera.close()
        self._env.close()

    # -- internals -------------------------------------------------------------------------------
    def _step_physics(self, ctrl, n_frames: int) -> None:
        """Gymnasium's MujocoEnv._step_mujoco_simulation, its MuJoCo steps one at a time with
        the hook between them when a step has one."""
        env, mujoco, hook = self._env, self._mujoco, self._physics_hook
        env.data.ctrl[:] = ctrl
        if hook is None:
            mujoco.mj_step(env.model, env.data, nstep=n_frames)
        else:
            for i in range(n_frames):
                mujoco.mj_step(env.model, env.data)
                if i < n_frames - 1:
                    hook(i)
        mujoco.mj_rnePostConstraint(env.model, env.data)

    def _need_obs(self) -> None:
        if self._obs is None:
            raise RuntimeError("reset(seed) first")

    def _reach(self, obs: np.ndarray) -> float:
        return float(np.linalg.norm(obs[0:3] - (obs[4:7] + np.asarray(self.task.contact))))

    def _place(self, obs: np.ndarray) -> float:
        _, info = self._env.evaluate_state(obs, np.zeros(4, dtype=np.float32))
        return float(info["obj_to_target"])

    def _info(self, obs: np.ndarray, success: bool, place: float) -> StepInfo:
        # The caption is the stage the scene shows now (tasks.SHOWN_STEPS: the best of the last
        # 0.2 s, so a condition flickering at a stage boundary does not flicker the label);
        # progress and `stage` keep the furthest, and success stays once reported.
        self._earlier.append(obs.copy())
        stage, _ = self.task.caption(obs, success, self._earlier[0])
        self._stage = max(self._stage, stage)
        self._done = self._done or success
        self._recent.append(stage)
        caption = self.task.captions[len(self.task.stages) if self._done else max(self._recent)]
        if success:
            progress = 1.0
        else:
            reach = float(np.clip(1.0 - self._reach(obs) / self._reach0, 0.0, 1.0))
            moved = float(np.clip(1.0 - place / self._place0, 0.0, 1.0))
            progress = 0.5 * reach + 0.5 * moved
        return StepInfo(self._steps, success, progress, self._stage, caption,
                        timed_out=not success and self._steps >= self.task.horizon)


__all__ = ["TASKS", "JOINT_NAMES", "CONTROL_PERIOD_S", "PHYSICS_STEPS", "PHYSICS_DT", "GAIN", "SimEnv", "StepInfo", "FastCamera",
           "action_from_target", "target_from_expert", "gripper_command", "gripper_opening"]
