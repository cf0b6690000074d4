"""The scripted bimanual expert (ACT's method) on one seed per task, without rendering."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

_missing = [m for m in ("gym_aloha", "dm_control", "mujoco") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"{_missing} not installed: pip install -r requirements-sim.txt")


def test_quaternion_helpers():
    from oxygen_ros.sim.aloha.expert import quat_axis, quat_mul

    q = quat_axis((0, 0, 1), 90)
    np.testing.assert_allclose(quat_mul(q, q), quat_axis((0, 0, 1), 180), atol=1e-12)
    np.testing.assert_allclose(quat_mul(q, [1, 0, 0, 0]), q)


def test_mocaps_start_where_their_welds_hold_the_arms():
    """At reset the end-effector scene is at rest: one period with the mocaps kept in place
    moves neither gripper (gym-aloha's own mocap start pulled them 13.5 cm on MuJoCo 3)."""
    from oxygen_ros.sim.aloha.expert import EndEffectorScene
    from oxygen_ros.sim.aloha.tasks import get_task

    task = get_task("transfer-cube")
    scene = EndEffectorScene(task)
    scene.reset(task.sample_layout(0))
    left, right = scene.mocap_poses()
    links = ["vx300s_left/gripper_link", "vx300s_right/gripper_link"]
    before = np.array([scene.physics.named.data.xpos[n] for n in links])
    for _ in range(5):
        scene.step(np.concatenate([left, [0.0], right, [0.0]]))
    after = np.array([scene.physics.named.data.xpos[n] for n in links])
    assert np.abs(after - before).max() < 0.01  # measured with gym-aloha's start: 3.4 cm in one period


@pytest.mark.parametrize("task,first,last", [("transfer-cube", 180, 260), ("insertion", 300, 390)])
def test_the_expert_succeeds_in_joint_space_on_one_seed(task, first, last):
    from oxygen_ros.sim.aloha.env import AlohaEnv
    from oxygen_ros.sim.aloha.expert import joint_trajectory, rollout
    from oxygen_ros.sim.aloha.tasks import get_task

    t = get_task(task)
    traj, best = joint_trajectory(t, seed=1)
    assert traj.shape == (t.horizon, 14) and best == 4
    assert set(np.unique(traj[:, [6, 13]])) <= set(np.linspace(0, 1, 1001)) or traj[:, 6].max() <= 1.0
    success, steps = rollout(AlohaEnv(t, cameras=None), 1, traj)
    assert success and first <= steps <= last


def test_a_near_miss_is_drawn_from_its_seed_within_its_range():
    from oxygen_ros.sim.aloha.expert import MISS_RANGE, miss_for
    from oxygen_ros.sim.aloha.tasks import get_task

    for name in ("transfer-cube", "insertion"):
        task = get_task(name)
        lo, hi = MISS_RANGE[name]
        misses = [miss_for(task, s) for s in range(40)]
        assert misses[:5] == [miss_for(task, s) for s in range(5)]
        for m in misses:
            off = np.abs(m.offset)
            assert off[0] == 0 and np.count_nonzero(off) == 1 and lo <= off.max() <= hi
        assert {m.hold for m in misses} == {True, False}


def test_a_near_miss_brings_the_cube_to_the_left_gripper_without_success():
    """The left gripper meets the cube 4 cm off and the right one holds on: the scene stays at
    'lifting the cube' through the hand-over, the stage the memory must say there."""
    from oxygen_ros.sim.aloha.env import AlohaEnv
    from oxygen_ros.sim.aloha.expert import Miss, joint_trajectory
    from oxygen_ros.sim.aloha.tasks import get_task

    task = get_task("transfer-cube")
    traj, best = joint_trajectory(task, seed=1, miss=Miss((0.0, 0.04, 0.0), hold=True))
    env = AlohaEnv(task, cameras=None)
    env.reset(1)
    captions = [env.step(t).caption for t in traj]
    assert best < 4 and "the cube is handed over" not in captions
    assert set(captions[260:]) == {"lifting the cube"}
