"""The control loop's tick without a ROS process (a fake node and clock): the last check before
publishing holds the last good command whatever the shaper hands it, the measured-pose glitch
and the deadman's publishers reach the `control` diagnostic."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")  # the deadman subscription imports rclpy.qos / std_msgs

from oxygen_ros.node.control_loop import ControlLoop  # noqa: E402
from oxygen_ros.robot.chunk_player import ChunkPlayer  # noqa: E402
from oxygen_ros.robot.shaper import CommandShaper, Shaped  # noqa: E402

J, DT, V_MAX = 3, 0.02, 1.0
NAMES = ["j1", "j2", "j3"]


class FakeTime:
    def __init__(self, ns: int) -> None:
        self.nanoseconds = ns

    def to_msg(self):
        return self.nanoseconds


class FakeSub:
    def __init__(self, topic: str, callback) -> None:
        self.topic_name, self.callback, self.count = topic, callback, 1

    def get_publisher_count(self) -> int:
        return self.count


class FakeEndpoint:
    def __init__(self, name: str) -> None:
        self.node_name, self.node_namespace = name, "/"


class FakeNode:
    def __init__(self) -> None:
        self.t = 100.0
        self.sub: FakeSub | None = None
        self.publisher_nodes = ["operator_pad"]

    def get_clock(self):
        node = self

        class Clock:
            def now(self):
                return FakeTime(int(round(node.t * 1e9)))
        return Clock()

    def create_subscription(self, msg_type, topic, callback, qos):
        self.sub = FakeSub(topic, callback)
        return self.sub

    def get_publishers_info_by_topic(self, topic):
        return [FakeEndpoint(n) for n in self.publisher_nodes]


class Rig:
    """A ControlLoop on a fake node, a chunk far from the robot, a robot standing at zero."""

    def __init__(self, deadman_topic: str = "", monkey_step=None) -> None:
        self.node = FakeNode()
        self.player = ChunkPlayer(J, DT, crossfade_s=0.0, observation_timeout_s=1e6,
                                  lower=np.full(J, -1.0), upper=np.full(J, 1.0))
        self.sent: list[tuple[float, np.ndarray]] = []
        self.warnings: list[str] = []
        shaper = CommandShaper(J, DT, [V_MAX], [10.0], max_tracking_error=[])
        self.loop = ControlLoop(self.node, self.player, NAMES,
                                lambda names, v, stamp: self.sent.append((stamp * 1e-9, np.array(v))),
                                lambda key, msg: self.warnings.append(msg), shaper,
                                deadman_topic=deadman_topic, deadman_timeout_s=0.3)
        self.loop.monotonic = lambda: self.node.t  # the fake clock stands in for both
        self.loop.shaper.reset()
        self.player.set_chunk(np.full((500, J), 0.9), self.node.t, self.node.t)
        self.loop.measured.update(self.node.t, np.zeros(J))

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            self.node.t += DT
            self.loop.measured.update(self.node.t, np.zeros(J))
            self.loop.tick()


def assert_all_sent_within_limits(sent) -> None:
    x = np.array([v for _, v in sent])
    t = np.array([s for s, _ in sent])
    assert np.all(np.isfinite(x))
    assert np.all(np.abs(x) <= 1.0 + 1e-12)
    step = np.abs(np.diff(x, axis=0)).max(axis=1)
    assert np.all(step <= V_MAX * np.diff(t) + 1e-9), (step / np.diff(t)).max()


@pytest.mark.parametrize("bad, words", [
    (lambda v: np.array([v[0], np.nan, v[2]]), "j2: non-finite"),
    (lambda v: v + np.array([0.0, 0.0, 0.3]), "j3: a step of"),
    (lambda v: np.array([v[0], 1.5, v[2]]), "j2: 1.5000 beyond the upper joint limit"),
])
def test_a_bad_command_is_never_sent_the_last_good_one_is_held(bad, words):
    """Issue 26 item 2: nothing checked what was published (NaN commands went out with the
    diagnostics OK). Whatever the shaper hands over, the last check holds the last good command,
    says why (ERROR, warning) and the commands go on within the limits afterwards."""
    rig = Rig()
    real_step = rig.loop.shaper.step
    broken = {"on": False}

    def step(*args, **kwargs):
        s = real_step(*args, **kwargs)
        if broken["on"] and s is not None:
            return Shaped(bad(s.values), s.limited, s.start, s.holding)
        return s

    rig.loop.shaper.step = step
    rig.tick(20)
    good = rig.sent[-1][1]
    broken["on"] = True
    rig.tick(10)
    held = np.array([v for _, v in rig.sent[-10:]])
    assert np.all(held == good), held
    level, message, values = rig.loop.status(True, 50.0)
    assert level == "ERROR" and words in message, message
    assert values["refused_commands"] == 10 and words in values["last_refused_command"]
    assert any(words in w for w in rig.warnings)
    broken["on"] = False
    rig.tick(20)
    assert not np.all(rig.sent[-1][1] == good)  # moving again, from what was sent
    assert_all_sent_within_limits(rig.sent)


def test_the_first_command_is_checked_against_the_measured_pose():
    rig = Rig()
    real_step = rig.loop.shaper.step
    rig.loop.shaper.step = lambda *a, **k: (lambda s: s and Shaped(s.values + 0.5, s.limited, s.start,
                                                                   s.holding))(real_step(*a, **k))
    rig.tick(5)
    assert rig.sent == [] and "step of 0.5000" in rig.loop.guard_message


def test_a_measured_pose_jump_is_an_error_naming_the_joint():
    rig = Rig(deadman_topic="/deadman")
    rig.loop.shaper.configure([V_MAX], [10.0], [], [0.2])

    def tick(pressed: bool, glitch: float = 0.0):  # a robot that follows, its joint 2 glitching
        if pressed:
            rig.node.sub.callback(type("M", (), {"data": True})(), {})
        rig.node.t += DT
        pose = rig.sent[-1][1] if rig.sent else np.zeros(J)
        rig.loop.measured.update(rig.node.t, pose + np.array([0.0, glitch, 0.0]))
        rig.loop.tick()

    for _ in range(20):
        tick(True)
    for _ in range(25):  # released: a hold
        tick(False)
    for _ in range(5):  # pressed again, the joint state 0.5 rad off
        tick(True, 0.5)
    level, message, values = rig.loop.status(True, 50.0)
    assert level == "ERROR" and "j2 is 0.5" in message and "max_tracking_error 0.2" in message
    assert values["pose_jump_ticks"] == 5
    held = rig.sent[-1][1]
    assert all(np.array_equal(v, held) for _, v in rig.sent[-5:])
    for _ in range(5):  # the glitch is over: resume
        tick(True)
    assert not np.array_equal(rig.sent[-1][1], held)
    assert_all_sent_within_limits(rig.sent)


def test_a_second_deadman_publisher_holds_with_an_error_naming_them():
    """Issue 26 item 3: one forgotten `ros2 topic pub ... true` beside the operator's device:
    held, ERROR naming the publishers' nodes; commands go again once it is gone."""
    rig = Rig(deadman_topic="/deadman")
    sub = rig.node.sub

    def press(n):
        for _ in range(n):
            sub.callback(type("M", (), {"data": True})(), {"publisher_gid": {"data": b"pad"}})
            rig.tick()

    press(10)
    moving = len(rig.sent)
    assert moving >= 9
    sub.count = 2
    rig.node.publisher_nodes = ["operator_pad", "_ros2cli_4242"]
    press(15)
    level, message, values = rig.loop.status(True, 50.0)
    assert level == "ERROR" and "2 publishers" in message and "/_ros2cli_4242" in message, message
    assert values["deadman_publishers"] == 2
    held = [v for _, v in rig.sent[-5:]]
    assert all(np.array_equal(v, held[0]) for v in held)  # braked, then held
    sub.count = 1
    press(10)
    assert not np.array_equal(rig.sent[-1][1], held[0])
    assert rig.loop.status(True, 50.0)[0] != "ERROR" or "deadman" not in rig.loop.status(True, 50.0)[1]
    assert_all_sent_within_limits(rig.sent)


def test_sync_rest_at_a_chunks_end_is_not_a_warning_but_a_stream_end_is():
    """chunk_execution sync rests after every chunk's last step until a chunk observed at rest
    comes: the `control` diagnostic says OK there (a stream robot holding its chunk's end is a
    WARN), and counts the chunks passed over; a stalled engine still goes stale."""
    for execution, want in (("stream", "WARN"), ("sync", "OK")):
        rig = Rig()
        rig.player.configure(rig.player.config.replace(execution=execution,
                                                       observation_timeout_s=0.5))
        rig.player.clear()
        rig.player.set_chunk(np.zeros((4, J)), rig.node.t, rig.node.t)
        rig.tick(6)  # past the last step: at rest
        level, message, values = rig.loop.status(True, 50.0)
        assert level == want, (execution, message)
        assert values["chunk_execution"] == execution
        if execution == "sync":
            assert not rig.player.set_chunk(np.zeros((4, J)), rig.node.t - 0.1, rig.node.t)
            assert rig.loop.status(True, 50.0)[2]["passed_chunks"] == 1
            rig.tick(40)  # no chunk within observation_timeout_s of the rest: stale
            assert rig.loop.status(True, 50.0)[0] in ("WARN", "ERROR")
