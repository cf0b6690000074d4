"""The control loop in the node process: joints standing far from a random model's output, a
1 rad/s velocity limit and a deadman. No command (the first included) moves more than
1.0 rad/s x dt from the previous command or from the measured pose; the deadman holds the
commands and they resume from the measured pose.

One node process (the installed `oxygen_node`, as in test_node_e2e.py) with autostart."""
from __future__ import annotations

import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from lifecycle_msgs.srv import GetState  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Bool  # noqa: E402

from oxygen_ros.node import conversions as conv  # noqa: E402

from test_node_e2e import JOINTS, RATE_HZ, Client, _status, node_process  # noqa: E402

POSE = np.array([0.8, -0.6, 0.5, -0.7, 0.9, -0.4])  # where the robot stands (still)
V_MAX = 1.0
DT = 1.0 / RATE_HZ
TOL = 1e-6  # joint states travel as float32 into the node
ERROR = DiagnosticStatus.ERROR


class StillRobot(Client):
    """Joints standing at POSE; a deadman publisher pressed while `pressed`."""

    def __init__(self) -> None:
        self.pressed = False
        super().__init__()
        self.deadman_pub = self.node.create_publisher(Bool, "/deadman", 10)

    def _feed(self) -> None:
        rng = np.random.default_rng(0)
        base = rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
        i, period, nxt = 0, 1.0 / 30.0, time.monotonic()
        while not self.stop.is_set():
            if self.mode != "off":
                now = self.node.get_clock().now().to_msg()
                self.img_pub.publish(conv.encode_image(np.roll(base, i, axis=1), "rgb8", stamp=now))
                js = JointState()
                js.header.stamp = now
                js.name = list(JOINTS)
                js.position = [float(v) for v in POSE]
                self.js_pub.publish(js)
                if self.pressed:
                    self.deadman_pub.publish(Bool(data=True))
                i += 1
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))

    def positions(self, since: float) -> np.ndarray:
        return np.array([m.position for m in self.snapshot(self.commands, since)]).reshape(-1, len(JOINTS))


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with node_process(tmp_path_factory, "-p", "autostart:=true",
                      "-p", "joint_limits_lower:=[-3.0,-3.0,-3.0,-3.0,-3.0,-3.0]",
                      "-p", "joint_limits_upper:=[3.0,3.0,3.0,3.0,3.0,3.0]",
                      "-p", f"joint_velocity_limits:=[{V_MAX}]",
                      "-p", "deadman.topic:=/deadman", "-p", "deadman.timeout_s:=0.3",
                      "-p", "memory.enabled:=false"):
        if not rclpy.ok():
            rclpy.init()
        c = StillRobot()
        c.mode = "good"
        state = c.call(c.get, GetState.Request(), timeout=180.0).current_state.label
        assert state == "active", state
        yield c
        c.close()
        rclpy.try_shutdown()


def assert_within_limit(cmds: np.ndarray) -> None:
    """Each command is within V_MAX*dt of the previous one or of the measured pose (the first
    one: of the measured pose)."""
    assert len(cmds)
    assert np.abs(cmds[0] - POSE).max() <= V_MAX * DT + TOL, cmds[0]
    step = np.abs(np.diff(cmds, axis=0)).max(axis=1)
    from_pose = np.abs(cmds[1:] - POSE).max(axis=1)
    worst = np.minimum(step, from_pose)
    assert worst.max() <= V_MAX * DT + TOL, (worst.max() / DT, int(worst.argmax()))


def test_no_command_without_the_deadman_then_limited_from_the_first_command(client):
    t0 = time.monotonic()
    client.wait_for(lambda: len(client.snapshot(client.stats, t0)) >= 3, 60, "inference frames")
    st = client.wait_for(lambda: next((s for d in client.snapshot(client.diags, t0)
                                       for s in [_status(d, "control")] if s and s.level == ERROR
                                       and "deadman" in s.message), None), 10, "control ERROR: deadman")
    assert "/deadman" in st.message
    assert not client.snapshot(client.commands, 0), "commands before the deadman was pressed"
    assert not client.snapshot(client.chunks, 0), "~/action_chunk published while the deadman holds"
    t1 = time.monotonic()
    client.pressed = True
    client.wait_for(lambda: len(client.snapshot(client.commands, t1)) >= 150, 30, "150 commands")
    cmds = client.positions(t1)
    assert np.abs(cmds[0] - POSE).max() <= TOL, cmds[0]  # the first command: the measured pose
    assert_within_limit(cmds)
    # following the (far) chunks: moving at the limit, away from the pose
    steps = np.abs(np.diff(cmds, axis=0))
    assert steps.max() >= 0.9 * V_MAX * DT
    assert np.abs(cmds - POSE).max() >= 0.2
    st = client.wait_for(lambda: next((s for d in client.snapshot(client.diags, t1)
                                       for s in [_status(d, "control")] if s and "limited" in s.message),
                                      None), 5, "control names the limited joints")
    assert any(j in st.message for j in JOINTS)


def test_deadman_release_holds_and_return_starts_from_the_measured_pose(client):
    client.pressed = True
    t0 = time.monotonic()
    client.wait_for(lambda: len(client.snapshot(client.commands, t0)) >= 20, 10, "commands")
    client.pressed = False
    t_release = time.monotonic()
    client.wait_for(lambda: next((s for d in client.snapshot(client.diags, t_release)
                                  for s in [_status(d, "control")] if s and s.level == ERROR
                                  and "deadman" in s.message), None), 5, "control ERROR: deadman")
    # 0.3 s timeout + margin: holding by then
    client.wait_for(lambda: len(client.snapshot(client.commands, t_release + 0.6)) >= 10, 10,
                    "commands while released")
    held = client.positions(t_release + 0.6)
    assert len(held) >= 10 and np.all(held == held[0]), "commands still move while released"
    assert np.abs(held[0] - POSE).max() > 0.1  # held where it was, not at the pose
    t_press = time.monotonic()
    client.pressed = True
    client.wait_for(lambda: len(client.snapshot(client.commands, t_press)) >= 60, 10, "commands again")
    cmds = client.positions(t_press)
    at_pose = np.flatnonzero(np.abs(cmds - POSE).max(axis=1) <= TOL)
    assert len(at_pose), "no restart from the measured pose"
    first = int(at_pose[0])
    assert np.all(cmds[:first] == held[0])  # held until the restart
    assert_within_limit(cmds[first:])
    assert np.abs(cmds[-1] - POSE).max() >= 0.9 * V_MAX * DT  # and following again
