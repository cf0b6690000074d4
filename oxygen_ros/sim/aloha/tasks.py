"""The two ALOHA tasks (gym-aloha 0.1.5's TransferCube and Insertion): scenes, layouts, captions.

Stages are the task's own reward (gym-aloha's contact tests, 0..4, success = 4): a frame's
caption is the stage its scene shows (env.AlohaEnv._shown). The last caption, the success
caption, is shown only where the simulator has reported success AND the cameras can see it
(AlohaTask.success_shown): gym-aloha's success is a contact (transfer-cube: a left finger's first
touch of the cube in the air, the gripper still open; insertion: the peg touching the pin) that
64 px cannot show, so until the scene shows the result the caption stays the stage before it
(issue 35, item 4: a memory taught on these captions never claims what its cameras cannot see).
Layouts: the object poses gym-aloha samples (uniform ranges in utils.py), drawn here from a
RandomState seeded per episode, never from the global np.random.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

# a left gripper closed on the cube: 0.05 holding the 4 cm cube, 0.93 open at gym-aloha's
# success (measured on the expert, normalised opening as the state gives it)
CLOSED_ON_CUBE = 0.3


def _contacts(physics: Any) -> set[tuple[str, str]]:
    """The geom name pairs in contact now (gym-aloha's get_reward reads them the same way)."""
    name, contact = physics.model.id2name, physics.data.contact
    return {(name(contact[i].geom1, "geom"), name(contact[i].geom2, "geom")) for i in range(physics.data.ncon)}


def cube_held_by_left_alone(physics: Any) -> bool:
    """transfer-cube's success as the cameras show it: the cube in the closed left gripper, off
    the table, the right fingers off it (measured on the expert: 1.8 s after gym-aloha's success,
    once the right gripper has opened and the left closed; in half the expert's replays the cube
    falls before that, and then the scene shows no success though gym-aloha reported one)."""
    from gym_aloha.constants import normalize_puppet_gripper_position

    pairs = _contacts(physics)
    left_opening = float(normalize_puppet_gripper_position(physics.data.qpos[6]))  # as the state's
    return (("red_box", "vx300s_left/10_left_gripper_finger") in pairs
            and ("red_box", "vx300s_right/10_right_gripper_finger") not in pairs
            and ("red_box", "table") not in pairs and left_opening < CLOSED_ON_CUBE)


@dataclass(frozen=True)
class AlohaTask:
    name: str
    joint_xml: str  # gym-aloha asset: joint-space scene (position actuators on every joint)
    ee_xml: str  # the same scene with each gripper welded to a mocap body (the expert's)
    instruction: str
    captions: tuple[str, ...]  # one per reward 0..4; the last is success
    horizon: int  # control steps (50 Hz) per episode
    # uniform ranges (x, y) of each object's position; z fixed at 0.05, orientation identity
    ranges: tuple[tuple[tuple[float, float], tuple[float, float]], ...]
    # the success as the cameras show it (a test of the physics); None: they never show it, and
    # the scene's caption stays the stage before success (env.AlohaEnv._shown)
    success_shown: Callable[[Any], bool] | None = None

    @property
    def success_caption(self) -> str:
        return self.captions[-1]

    def memory_caption(self, caption: str) -> str:
        """The label a frame of a recording older than recorder version 4 gets now (demos
        --relabel): those captioned gym-aloha's success itself as done and stopped 10 periods
        after it, before the cameras can show it (transfer-cube's hand-over shows 1.8 s after it
        with the expert), so their success caption becomes the stage before it. Version 4 records
        the simulator's caption, already what the cameras show (success_shown)."""
        return self.captions[-2] if caption == self.success_caption else caption

    def sample_layout(self, seed: int) -> np.ndarray:
        """Object poses (7 per object: xyz + quaternion wxyz) from `seed` alone."""
        rng = np.random.RandomState(int(seed) % (2 ** 32))
        poses = []
        for (x, y) in self.ranges:
            pos = rng.uniform([x[0], y[0], 0.05], [x[1], y[1], 0.05])
            poses.append(np.concatenate([pos, [1.0, 0.0, 0.0, 0.0]]))
        return np.concatenate(poses)

    def make_task(self, end_effector: bool = False):
        """gym-aloha's dm_control task object (rewards and the command mapping)."""
        if self.name == "transfer-cube":
            if end_effector:
                from gym_aloha.tasks.sim_end_effector import TransferCubeEndEffectorTask as cls
            else:
                from gym_aloha.tasks.sim import TransferCubeTask as cls
        else:
            if end_effector:
                from gym_aloha.tasks.sim_end_effector import InsertionEndEffectorTask as cls
            else:
                from gym_aloha.tasks.sim import InsertionTask as cls
        return cls()


# ACT and LeRobot evaluate 400 steps (8 s); the scripted expert succeeds by about step 320.
TASKS: dict[str, AlohaTask] = {
    "transfer-cube": AlohaTask(
        name="transfer-cube",
        joint_xml="bimanual_viperx_transfer_cube.xml",
        ee_xml="bimanual_viperx_end_effector_transfer_cube.xml",
        instruction="pick up the cube with the right arm and hand it to the left arm",
        captions=("reaching for the cube", "grasping the cube", "lifting the cube",
                  "handing the cube over", "the cube is handed over"),
        horizon=400,
        ranges=(((0.0, 0.2), (0.4, 0.6)),),
        # success (reward 4) is the left finger's first touch of the cube in the air, the left
        # gripper still open around it: measured through the node (aloha-2026-12-06-b), the
        # failed episodes whose memory claimed the hand-over had that open gripper around the
        # cube, not touching it: the same picture, short of a contact 64 px do not show. The
        # cameras show the hand-over once the left gripper alone holds the cube
        success_shown=cube_held_by_left_alone,
    ),
    "insertion": AlohaTask(
        name="insertion",
        joint_xml="bimanual_viperx_insertion.xml",
        ee_xml="bimanual_viperx_end_effector_insertion.xml",
        instruction="insert the peg into the socket",
        captions=("reaching for the peg and the socket", "grasping the peg and the socket",
                  "lifting the peg and the socket", "inserting the peg", "the peg is inserted"),
        horizon=400,
        ranges=(((0.1, 0.2), (0.4, 0.6)), ((-0.2, -0.1), (0.4, 0.6))),
        # success (reward 4) is the peg touching the pin at the socket's far end: measured through
        # the node (aloha-2026-12-06-b), the failed episodes whose memory claimed it had the peg
        # inside the socket short of the pin, a difference of a pixel or two at 64 px: no
        # picture shows it
        success_shown=None,
    ),
}


def get_task(name: str) -> AlohaTask:
    if name not in TASKS:
        raise ValueError(f"unknown ALOHA task {name!r}; known: {', '.join(TASKS)}")
    return TASKS[name]
