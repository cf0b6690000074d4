"""The bimanual sim node's contract through real ROS topics: three cameras with one stamp, 14
named joint states every physics step, commands by name (refused when incomplete), faults."""
from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest

from oxygen_ros.sim import unavailable_reason

_missing = [m for m in ("gym_aloha", "dm_control", "mujoco") if importlib.util.find_spec(m) is None]
pytestmark = [pytest.mark.ros,
              pytest.mark.skipif(bool(_missing), reason=f"{_missing} not installed"),
              pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))]
rclpy = pytest.importorskip("rclpy")

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402


def test_config_refuses_bad_settings():
    from oxygen_ros.sim.aloha.node import AlohaSimConfig

    with pytest.raises(ValueError, match="fault"):
        AlohaSimConfig(fault="upside-down")
    with pytest.raises(ValueError, match="cameras"):
        AlohaSimConfig(cameras=("top", "nose"))
    with pytest.raises(ValueError, match="wrist"):
        AlohaSimConfig(cameras=("top",), fault="wrists-swapped")
    with pytest.raises(ValueError, match="tasks"):
        AlohaSimConfig(tasks=("door-lock",))
    with pytest.raises(ValueError, match="camera_rate_hz"):
        AlohaSimConfig(camera_rate_hz=100.0)


def test_schedule_seeds_do_not_depend_on_the_other_tasks():
    from oxygen_ros.sim.aloha.node import schedule

    both = schedule(("transfer-cube", "insertion"), 2, 1_000_000)
    alone = schedule(("insertion",), 2, 1_000_000)
    assert [e.seed for e in both[2:]] == [e.seed for e in alone] == [1_001_000, 1_001_001]


@pytest.mark.parametrize("fault", ["", "arms-swapped"])
def test_topics_of_the_bimanual_robot(ctx, fault):
    from oxygen_ros.sim.aloha.env import JOINT_NAMES
    from oxygen_ros.sim.aloha.node import AlohaSimConfig, AlohaSimNode
    from oxygen_ros.sim.node import spinning

    cfg = AlohaSimConfig(tasks=("transfer-cube",), episodes_per_task=1, reset_hold_s=0.2, image_size=32,
                         real_time_factor=0.5, fault=fault)
    sim = AlohaSimNode(cfg, context=ctx)
    lis = rclpy.create_node("aloha_listener", context=ctx)
    images: dict[str, list] = {c: [] for c in cfg.cameras}
    joints: list[JointState] = []
    status: list[str] = []
    for c in cfg.cameras:
        lis.create_subscription(Image, cfg.image_topic(c), images[c].append, qos_profile_sensor_data)
    lis.create_subscription(JointState, cfg.joint_state_topic, joints.append, 1000)
    lis.create_subscription(String, cfg.episode_topic, lambda m: status.append(m.data), 100)
    pub = lis.create_publisher(JointState, cfg.command_topic, 10)
    with spinning(sim, [sim, lis], SingleThreadedExecutor(context=ctx)):
        time.sleep(0.3)
        sim.start()
        time.sleep(1.0)
        # an incomplete command is refused; a complete one by name moves the right waist
        pub.publish(JointState(name=list(JOINT_NAMES[:7]), position=[0.0] * 7))
        target = np.array([0, -0.96, 1.16, 0, -0.3, 0, 0.5] * 2)
        target[7] = 0.25
        pub.publish(JointState(name=list(JOINT_NAMES), position=target.tolist()))
        time.sleep(1.5)
    assert sim.stats.bad_commands == 1 and sim.stats.commands == 1
    assert all(len(v) > 3 for v in images.values()), {k: len(v) for k, v in images.items()}
    top = images["top"][-1]
    assert (top.encoding, top.height, top.width) == ("rgb8", 32, 32)
    # every image set shares one stamp across the cameras
    stamps = {c: {(m.header.stamp.sec, m.header.stamp.nanosec) for m in v} for c, v in images.items()}
    assert len(stamps["top"] & stamps["left_wrist"] & stamps["right_wrist"]) >= 3
    assert list(joints[-1].name) == list(JOINT_NAMES) and len(joints[-1].velocity) == 14
    pos = np.array(joints[-1].position)
    waist_right = pos[0] if fault == "arms-swapped" else pos[7]  # the fault moves the values, not the robot
    assert waist_right == pytest.approx(0.25, abs=0.03)
    # joint states at the physics rate: at real-time factor 0.5, 250 per wall second when on time
    assert sim.stats.joint_states >= 0.5 * sim.stats.physics_steps
    assert status


def test_the_evaluation_wires_the_node_to_the_bimanual_robot(tmp_path):
    """oxygen-sim eval --robot aloha: three camera topics in the policy's order, the 14 joint
    names, the robot's own faults; Meta-World's settings unchanged."""
    from oxygen_ros.cli.sim_eval import make_sim_config, parse_args
    from oxygen_ros.sim.aloha.env import JOINT_NAMES
    from oxygen_ros.sim.evaluate import NodeOptions, Setting, node_parameters

    cfg = make_sim_config(parse_args(["--robot", "aloha", "--out", str(tmp_path), "--tasks", "insertion"]))
    assert type(cfg).__name__ == "AlohaSimConfig" and cfg.tasks == ("insertion",) and cfg.camera_rate_hz == 25.0
    p = node_parameters(Setting.parse("isolated+wrists-swapped"), NodeOptions("ckpt", control_rate_hz=25.0),
                        cfg, tmp_path / "bag", "insert the peg into the socket")
    assert p["camera_topics"] == ["/aloha/top/image_raw", "/aloha/left_wrist/image_raw",
                                  "/aloha/right_wrist/image_raw"]
    assert p["joint_names"] == list(JOINT_NAMES) and p["joint_state_topic"] == "/aloha/joint_states"
    mw = make_sim_config(parse_args(["--out", str(tmp_path)]))
    assert mw.camera_rate_hz == 20.0
    assert node_parameters(Setting.parse("isolated"), NodeOptions("ckpt"), mw, tmp_path / "b", "x")[
        "joint_names"] == ["ee_x", "ee_y", "ee_z", "gripper"]
    with pytest.raises(ValueError, match="unknown tasks"):
        make_sim_config(parse_args(["--out", str(tmp_path), "--tasks", "transfer-cube"]))


@pytest.mark.parametrize("after_s", [0.0, 0.3])
def test_an_episode_goes_on_after_success_for_after_success_s(ctx, after_s):
    """With after_success_s the robot runs on past its success (what the memory says then is
    judged): the episode ends that long after it, success and its time are the first success's,
    and every status carries the stamp of the scene it describes; without it, it ends at once."""
    from oxygen_ros.sim.aloha.env import CONTROL_PERIOD_S
    from oxygen_ros.sim.aloha.node import AlohaSimConfig, AlohaSimNode

    class Rigged(AlohaSimNode):
        def _make_env(self, task):
            env = super()._make_env(task)
            periods = iter(range(10 ** 6))
            env._task.get_reward = lambda physics: 4 if next(periods) >= 10 else 0  # success at 0.2 s
            return env

    with pytest.raises(ValueError, match="after_success_s"):
        AlohaSimConfig(after_success_s=-1.0)
    cfg = AlohaSimConfig(tasks=("transfer-cube",), episodes_per_task=1, reset_hold_s=0.1, image_size=16,
                         after_success_s=after_s)
    seen = []
    sim = Rigged(cfg, context=ctx, on_status=seen.append)
    try:
        sim.start()
        assert sim.finished.wait(20.0), sim.error
    finally:
        sim.stop()
        sim.destroy_node()
    end = sim.stats.results[-1]
    assert end.done and end.success and not end.timed_out
    assert end.success_t == pytest.approx(10 * CONTROL_PERIOD_S, abs=CONTROL_PERIOD_S)
    assert end.t == pytest.approx(end.success_t + after_s, abs=CONTROL_PERIOD_S)
    assert end.time_to_success == end.success_t
    assert all(s.stamp_ns > 0 for s in seen)
    if after_s:
        assert sum(s.success and not s.done for s in seen) >= 3  # statuses went on after success
