"""The control loop in the node process: joints standing far from a random model's output, a
1 rad/s velocity limit and a deadman. No command (the first included) moves more than
1.0 rad/s x dt from the previous command or from the measured pose; the deadman holds the
commands; they resume from the last command, not from a measured pose that is far from it (a
robot that did not follow); a second deadman publisher holds with an ERROR naming it, and the
operator's release wins over a forgotten `true`.

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
    """Joints standing at `pose` (POSE at first); a deadman publisher sending true while
    `pressed`, false while `releasing`."""

    def __init__(self) -> None:
        self.pressed = False
        self.releasing = False
        self.pose = POSE.copy()
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
                js.position = [float(v) for v in self.pose]
                self.js_pub.publish(js)
                if self.pressed or self.releasing:
                    self.deadman_pub.publish(Bool(data=bool(self.pressed)))
                i += 1
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))

    def positions(self, since: float) -> np.ndarray:
        return np.array([m.position for m in self.snapshot(self.commands, since)]).reshape(-1, len(JOINTS))

    def stamps(self, since: float) -> np.ndarray:
        """The commands' stamps (the node's clock at their tick), seconds."""
        return np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec
                         for m in self.snapshot(self.commands, since)])


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


def assert_within_limit(cmds: np.ndarray, stamps: np.ndarray, start: np.ndarray = POSE) -> None:
    """The first command within V_MAX x 3 dt of `start` (the most a late tick moves), each
    later one within V_MAX x the time between their stamps of the previous one (limits per
    elapsed time: a tick that comes late under load may move further than V_MAX*dt, one that
    comes early less)."""
    assert len(cmds)
    assert np.abs(cmds[0] - start).max() <= V_MAX * 3 * DT + TOL, cmds[0]  # a late tick at most
    step = np.abs(np.diff(cmds, axis=0)).max(axis=1)
    allowed = V_MAX * np.diff(stamps) + TOL
    assert np.all(step <= allowed), ((step / np.maximum(np.diff(stamps), 1e-9)).max(),
                                     int((step - allowed).argmax()))


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
    assert_within_limit(cmds, client.stamps(t1))
    # following the (far) chunks: moving at the limit, away from the pose
    steps = np.abs(np.diff(cmds, axis=0))
    assert steps.max() >= 0.9 * V_MAX * DT
    assert np.abs(cmds - POSE).max() >= 0.2
    st = client.wait_for(lambda: next((s for d in client.snapshot(client.diags, t1)
                                       for s in [_status(d, "control")] if s and "limited" in s.message),
                                      None), 5, "control names the limited joints")
    assert any(j in st.message for j in JOINTS)


def _control_error(client, since: float, words: str, timeout: float = 5.0):
    return client.wait_for(lambda: next((s for d in client.snapshot(client.diags, since)
                                         for s in [_status(d, "control")] if s and s.level == ERROR
                                         and words in s.message), None), timeout,
                           f"control ERROR: {words}")


def test_deadman_release_holds_and_a_robot_that_did_not_follow_is_not_a_target(client):
    """Issue 26 item 4: the return used to snap the command to the measured pose (here up to
    0.5 rad in one tick). Now the still robot, far from the held command, is a measured-pose
    jump: held, ERROR naming the joint; once the robot is back at the command they resume from
    the last command within the limit."""
    client.pressed = True
    t0 = time.monotonic()
    client.wait_for(lambda: len(client.snapshot(client.commands, t0)) >= 20 and np.abs(
        client.positions(t0)[-1] - POSE).max() > 0.3, 20, "commands 0.3 rad from the pose")
    client.pressed = False
    t_release = time.monotonic()
    _control_error(client, t_release, "deadman")
    # 0.3 s timeout + margin: holding by then
    client.wait_for(lambda: len(client.snapshot(client.commands, t_release + 0.6)) >= 10, 10,
                    "commands while released")
    held = client.positions(t_release + 0.6)
    assert len(held) >= 10 and np.all(held == held[0]), "commands still move while released"
    assert np.abs(held[0] - POSE).max() > 0.3  # held where it was, not at the pose
    t_press = time.monotonic()
    client.pressed = True
    st = _control_error(client, t_press, "measured pose jumped")
    assert "max_tracking_error 0.2" in st.message and any(j in st.message for j in JOINTS)
    time.sleep(0.5)
    cmds = client.positions(t_press)
    assert len(cmds) >= 10 and np.all(cmds == held[0]), "moved towards a far measured pose"
    t_back = time.monotonic()
    client.pose = held[0].astype(np.float64).copy()  # the robot catches up with the command
    client.wait_for(lambda: len(client.snapshot(client.commands, t_back)) >= 60, 10, "commands again")
    cmds = client.positions(t_back)
    assert_within_limit(cmds, client.stamps(t_back), held[0])  # resumed from the held command
    assert np.abs(cmds[-1] - held[0]).max() >= 0.9 * V_MAX * DT  # and following again


def test_operator_release_beats_a_forgotten_true_publisher(client):
    """Issue 26 item 3: with the operator sending false and a forgotten terminal true (both
    about 20-30 Hz) the robot moved on 92-156 of 250 ticks. Now it never moves; the second
    publisher is an ERROR naming its node, and holds until it is gone."""
    from rclpy.executors import SingleThreadedExecutor

    client.pressed = True
    t0 = time.monotonic()
    client.wait_for(lambda: len(client.snapshot(client.commands, t0)) >= 10, 10, "commands")
    forgotten = rclpy.create_node("forgotten_terminal")
    pub = forgotten.create_publisher(Bool, "/deadman", 10)
    timer = forgotten.create_timer(0.05, lambda: pub.publish(Bool(data=True)))  # 20 Hz
    ex = SingleThreadedExecutor()
    ex.add_node(forgotten)
    import threading
    spin = threading.Thread(target=ex.spin, daemon=True)
    spin.start()
    try:
        client.pressed, client.releasing = False, True  # the operator lets go
        t_both = time.monotonic()
        st = _control_error(client, t_both, "forgotten_terminal")
        assert "2 publishers" in st.message
        time.sleep(2.0)
        cmds = client.positions(t_both + 0.2)  # the release is heard within a tick or two
        assert len(cmds) >= 50 and np.all(cmds == cmds[0]), "moved while the operator released"
        client.pose = cmds[0].astype(np.float64).copy()  # the robot is where it was held
        client.releasing, client.pressed = False, True  # the operator presses again ...
        time.sleep(1.0)
        cmds = client.positions(t_both + 0.2)
        assert np.all(cmds == cmds[0]), "moved with a second publisher on the deadman topic"
        _control_error(client, time.monotonic(), "2 publishers")
    finally:
        forgotten.destroy_timer(timer)
        forgotten.destroy_publisher(pub)
        ex.shutdown()
        forgotten.destroy_node()
    t_gone = time.monotonic()  # ... and once the terminal is closed, commands go
    client.wait_for(lambda: len(client.snapshot(client.commands, t_gone)) >= 30 and not np.all(
        client.positions(t_gone) == cmds[0]), 10, "commands moving again")
    assert_within_limit(client.positions(t_gone), client.stamps(t_gone), cmds[0])
