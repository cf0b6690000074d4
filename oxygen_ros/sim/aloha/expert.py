"""The scripted bimanual expert, ACT's method (Zhao et al. 2023): open-loop end-effector waypoints.

1. In the end-effector scene (each gripper welded to a mocap body) the two mocap poses and the
   gripper openings follow waypoints set from the objects' poses at step 0, linearly
   interpolated (position, quaternion component-wise, opening), one per 20 ms control period;
   the arms' joint positions are recorded every period.
2. The recorded joint trajectory, with the grippers replaced by the commanded openings, is the
   expert's sequence of absolute joint targets: replayed in the joint-space robot (AlohaEnv)
   from the same layout, it is what a policy is trained to imitate.
Its success depends on the physics (MuJoCo version), so it is measured here
(`oxygen-sim aloha expert`), and demonstrations keep only the episodes that
succeed in the joint-space replay.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

import numpy as np

from .env import SUBSTEPS, AlohaEnv
from .tasks import AlohaTask, get_task


def quat_axis(axis: tuple[float, float, float], degrees: float) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a rotation by `degrees` about `axis`."""
    a = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    half = np.deg2rad(degrees) / 2.0
    return np.concatenate([[np.cos(half)], np.sin(half) * a])


def quat_mul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hamilton product p * q, both (w, x, y, z)."""
    w1, x1, y1, z1 = p
    w2, x2, y2, z2 = q
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


WELD_SOLIMP = (0.9, 0.95, 0.001)
# waypoint: (control step, xyz, quat wxyz, gripper opening 0 closed .. 1 open)
Waypoint = tuple[int, np.ndarray, np.ndarray, float]


@dataclass(frozen=True)
class Miss:
    """A near miss on purpose (caption-only demonstrations): the receiving hand (transfer-cube:
    the left gripper at the meet point; insertion: the peg's way into the socket) aims `offset`
    (m) away; `hold`: the right gripper never lets go of the cube."""

    offset: tuple[float, float, float]
    hold: bool = False


# how far a near miss aims off (m): the cube is 4 cm wide in a gripper opening 8 cm; the peg
# enters a socket about as wide as itself, so millimetres off jam it against the socket
MISS_RANGE = {"transfer-cube": (0.015, 0.06), "insertion": (0.005, 0.03)}


def miss_for(task: AlohaTask, seed: int) -> Miss:
    """A near miss drawn from `seed`: off across the table (y) or in height (z) by MISS_RANGE,
    where a failing policy brings the objects together without success; half hold on."""
    rng = np.random.default_rng(seed)
    off = np.zeros(3)
    off[rng.choice([1, 2])] = rng.choice([-1.0, 1.0]) * rng.uniform(*MISS_RANGE[task.name])
    return Miss(tuple(float(v) for v in off), bool(rng.integers(2)))


def waypoints(task: AlohaTask, objects: np.ndarray, left0: np.ndarray,
              right0: np.ndarray, miss: Miss | None = None) -> tuple[list[Waypoint], list[Waypoint]]:
    """ACT's waypoints for both arms from the object poses at step 0 and the mocap start poses
    (7 values each: xyz + quat); with `miss`, the near miss it describes."""
    lq0, rq0 = left0[3:], right0[3:]
    off = np.zeros(3) if miss is None else np.asarray(miss.offset)
    if task.name == "transfer-cube":
        box = objects[:3]
        pick = quat_mul(rq0, quat_axis((0, 1, 0), -60))
        meet_q = quat_axis((1, 0, 0), 90)
        meet = np.array([0.0, 0.5, 0.25])
        release = 0.0 if miss is not None and miss.hold else 1.0
        left = [(0, left0[:3], lq0, 0.0),
                (100, meet + [-0.1, 0, -0.02] + off, meet_q, 1.0),  # approach the meet point
                (260, meet + [0.02, 0, -0.02] + off, meet_q, 1.0),  # to the meet point
                (310, meet + [0.02, 0, -0.02] + off, meet_q, 0.0),  # close
                (360, meet + [-0.1, 0, -0.02] + off, meet_q, 0.0),  # pull to the left
                (400, meet + [-0.1, 0, -0.02] + off, meet_q, 0.0)]
        right = [(0, right0[:3], rq0, 0.0),
                 (90, box + [0, 0, 0.08], pick, 1.0),  # above the cube
                 (130, box + [0, 0, -0.015], pick, 1.0),  # down
                 (170, box + [0, 0, -0.015], pick, 0.0),  # close
                 (200, meet + [0.05, 0, 0], pick, 0.0),  # towards the meet point
                 (220, meet, pick, 0.0),
                 (310, meet, pick, release),  # open: the left arm holds it
                 (360, meet + [0.1, 0, 0], pick, release),  # move away
                 (400, meet + [0.1, 0, 0], pick, release)]
        return left, right
    peg, socket = objects[:3], objects[7:10]
    pick_r = quat_mul(rq0, quat_axis((0, 1, 0), -60))
    pick_l = quat_mul(lq0, quat_axis((0, 1, 0), 60))
    meet = np.array([0.0, 0.5, 0.15])
    lift = 0.00715
    left = [(0, left0[:3], lq0, 0.0),
            (120, socket + [0, 0, 0.08], pick_l, 1.0),
            (170, socket + [0, 0, -0.03], pick_l, 1.0),
            (220, socket + [0, 0, -0.03], pick_l, 0.0),
            (285, meet + [-0.1, 0, 0], pick_l, 0.0),
            (340, meet + [-0.05, 0, 0], pick_l, 0.0),  # insert
            (400, meet + [-0.05, 0, 0], pick_l, 0.0)]
    right = [(0, right0[:3], rq0, 0.0),
             (120, peg + [0, 0, 0.08], pick_r, 1.0),
             (170, peg + [0, 0, -0.03], pick_r, 1.0),
             (220, peg + [0, 0, -0.03], pick_r, 0.0),
             (285, meet + [0.1, 0, lift] + off, pick_r, 0.0),
             (340, meet + [0.05, 0, lift] + off, pick_r, 0.0),
             (400, meet + [0.05, 0, lift] + off, pick_r, 0.0)]
    return left, right


def interpolate(points: list[Waypoint], t: int) -> np.ndarray:
    """[xyz, quat, opening] at control step t (held after the last waypoint)."""
    for (t0, x0, q0, g0), (t1, x1, q1, g1) in zip(points, points[1:]):
        if t0 <= t < t1:
            f = (t - t0) / (t1 - t0)
            return np.concatenate([x0 + f * (np.asarray(x1) - x0), q0 + f * (q1 - q0), [g0 + f * (g1 - g0)]])
    _, x, q, g = points[-1]
    return np.concatenate([x, q, [g]])


class EndEffectorScene:
    """gym-aloha's mocap scene for a task, driven directly (its gym env refuses it in 0.1.5)."""

    def __init__(self, task: AlohaTask) -> None:
        from dm_control import mujoco as dm_mujoco
        from gym_aloha.constants import ASSETS_DIR

        self.task = task
        self.physics = dm_mujoco.Physics.from_xml_path(str(ASSETS_DIR / task.ee_xml))
        self._task = task.make_task(end_effector=True)
        # MuJoCo 3's welds are soft against the arms' joint friction (frictionloss 30-60) with the
        # shipped solimp (.25 .25 .001): measured, the gripper trailed its mocap by 2-6 cm and
        # pushed the cube away (1 of 3 transfers in the end-effector scene). A stiffer impedance
        # tracks within ~1 cm (6 of 6).
        self.physics.model.eq_solimp[:, :3] = WELD_SOLIMP

    def reset(self, layout: np.ndarray) -> None:
        p = self.physics
        with p.reset_context():
            self._task.initialize_robots(p)  # start pose, grippers closed
            p.named.data.qpos[16:] = layout
        self._align_mocaps()

    def _align_mocaps(self) -> None:
        """Put each mocap where its weld is satisfied at the start pose. The welds keep the
        relative pose MuJoCo computes from qpos0 (the mocap about 13.5 cm ahead of the gripper
        link, between the fingers: where ACT's waypoints put the grasp); gym-aloha's
        initialize_robots puts the mocaps on the gripper links instead, which pulls both arms
        13.5 cm at the first step."""
        import mujoco

        p = self.physics
        for i, side in enumerate(("left", "right")):
            pos = p.named.data.xpos[f"vx300s_{side}/gripper_link"].copy()
            quat = p.named.data.xquat[f"vx300s_{side}/gripper_link"].copy()
            rel_pos, rel_quat = p.model.eq_data[i, 3:6], p.model.eq_data[i, 6:10]
            mocap_quat = quat_mul(quat, rel_quat * np.array([1.0, -1.0, -1.0, -1.0]))
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, mocap_quat)
            p.data.mocap_pos[i] = pos - rot.reshape(3, 3) @ rel_pos
            p.data.mocap_quat[i] = mocap_quat

    def mocap_poses(self) -> tuple[np.ndarray, np.ndarray]:
        d = self.physics.data
        return (np.concatenate([d.mocap_pos[0], d.mocap_quat[0]]).copy(),
                np.concatenate([d.mocap_pos[1], d.mocap_quat[1]]).copy())

    def step(self, action16: np.ndarray) -> None:
        self._task.before_step(action16, self.physics)
        for _ in range(SUBSTEPS):
            self.physics.step()

    def joints(self) -> np.ndarray:
        return np.asarray(self._task.get_qpos(self.physics), dtype=np.float64)

    def reward(self) -> int:
        return int(self._task.get_reward(self.physics))


def joint_trajectory(task: AlohaTask, seed: int, scene: EndEffectorScene | None = None,
                     steps: int | None = None, miss: Miss | None = None) -> tuple[np.ndarray, int]:
    """The expert's absolute joint targets [steps, 14] for layout `seed` (ACT's step 1 and the
    gripper overwrite), and the best reward the end-effector rollout itself reached; with
    `miss`, a near miss on purpose."""
    scene = scene or EndEffectorScene(task)
    steps = steps or task.horizon
    scene.reset(task.sample_layout(seed))
    left0, right0 = scene.mocap_poses()
    left, right = waypoints(task, task.sample_layout(seed), left0, right0, miss)
    joints, best = [scene.joints()], 0
    openings = [[0.0, 0.0]]
    for t in range(steps - 1):
        a_l, a_r = interpolate(left, t), interpolate(right, t)
        scene.step(np.concatenate([a_l, a_r]))
        joints.append(scene.joints())
        openings.append([a_l[7], a_r[7]])
        best = max(best, scene.reward())
    traj = np.stack(joints)
    op = np.asarray(openings)
    traj[:, 6], traj[:, 13] = op[:, 0], op[:, 1]  # the commanded openings, not the measured ones
    return traj, best


def rollout(env: AlohaEnv, seed: int, traj: np.ndarray) -> tuple[bool, int]:
    """Replay a joint trajectory in the joint-space robot: (success, control steps taken)."""
    env.reset(seed)
    for t, target in enumerate(traj):
        info = env.step(target)
        if info.success:
            return True, t + 1
    return False, len(traj)


def measure(task_names: list[str], episodes: int, seed0: int = 0) -> dict:
    out = {}
    for name in task_names:
        task = get_task(name)
        scene, env = EndEffectorScene(task), AlohaEnv(task, cameras=None)
        ok, ee_ok, lengths, t0 = 0, 0, [], time.perf_counter()
        for e in range(episodes):
            traj, best = joint_trajectory(task, seed0 + e, scene)
            success, n = rollout(env, seed0 + e, traj)
            ok += success
            ee_ok += best >= 4
            if success:
                lengths.append(n)
        out[name] = {"episodes": episodes, "seeds": [seed0, seed0 + episodes - 1],
                     "success_joint_replay": ok, "success_end_effector": ee_ok,
                     "steps_to_success": [int(min(lengths)), int(np.median(lengths)), int(max(lengths))]
                     if lengths else None, "seconds": round(time.perf_counter() - t0, 1)}
        env.close()
    return out


def main(argv: list[str] | None = None) -> int:
    from .tasks import TASKS

    p = argparse.ArgumentParser(description="Measure the scripted expert's success (no rendering).")
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--seed", type=int, default=0, help="first layout seed")
    a = p.parse_args(argv)
    print(json.dumps(measure(a.tasks, a.episodes, a.seed), indent=1))
    return 0
