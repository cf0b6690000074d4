"""The two ALOHA tasks (gym-aloha 0.1.5's TransferCube and Insertion): scenes, layouts, captions.

Stages are the task's own reward (gym-aloha's contact tests, 0..4, success = 4): a frame's
caption is the stage its scene shows (env.AlohaEnv._shown), the last caption is the success
caption, so a frame is captioned "done" exactly when the simulator has reported success, never
before (issue 35, item 4).
Layouts: the object poses gym-aloha samples (uniform ranges in utils.py), drawn here from a
RandomState seeded per episode, never from the global np.random.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
    # whether the cameras show the success; False: a success frame's memory label is the stage
    # before it (memory_caption), and the memory never learns to claim what it cannot see
    done_visible: bool = True

    @property
    def success_caption(self) -> str:
        return self.captions[-1]

    def memory_caption(self, caption: str) -> str:
        """The memory's label for a frame the simulator captions `caption`: the caption, except
        a success the cameras do not show, labelled with the stage before it (what the picture
        shows), as Meta-World's Task.memory_caption."""
        return self.captions[-2] if caption == self.success_caption and not self.done_visible else caption

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
        # cube, not touching it: the same picture, short of a contact 64 px do not show
        done_visible=False,
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
        # inside the socket short of the pin, a difference of a pixel or two at 64 px
        done_visible=False,
    ),
}


def get_task(name: str) -> AlohaTask:
    if name not in TASKS:
        raise ValueError(f"unknown ALOHA task {name!r}; known: {', '.join(TASKS)}")
    return TASKS[name]
