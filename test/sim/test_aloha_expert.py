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
