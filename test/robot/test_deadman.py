"""Deadman: timing, and a release that wins over any other publisher (pure, no ROS)."""
import numpy as np

from oxygen_ros.robot.deadman import Deadman


def test_deadman_timing():
    dm = Deadman(True, 0.3)
    assert dm.go(0.0) == (False, "no message yet")
    dm.press(True, 1.0)
    assert dm.go(1.29)[0]
    ok, why = dm.go(1.31)
    assert not ok and "timeout" in why
    dm.press(True, 1.4)
    assert dm.go(1.41)[0]
    dm.press(False, 1.45)
    assert dm.go(1.46) == (False, "released (false)")
    assert Deadman(False, 0.3).go(99.0) == (True, "")


def test_a_release_holds_for_at_least_the_timeout():
    dm = Deadman(True, 0.3)
    dm.press(True, 1.0)
    dm.press(False, 1.1)
    dm.press(True, 1.2)  # newer than the false, but within the timeout of it
    assert dm.go(1.25) == (False, "released (false)")
    dm.press(True, 1.45)
    assert dm.go(1.45)[0]  # the false is 0.35 s old and a true came after it


def _two_publishers(dm: Deadman, sources: tuple) -> list[bool]:
    """The operator's false and a forgotten true, both at 20 Hz, interleaved with a random
    phase; the control loop reads at 50 Hz for 10 s."""
    rng = np.random.default_rng(1)
    events = sorted([(0.05 * i, False, sources[0]) for i in range(200)]
                    + [(0.05 * i + rng.uniform(0, 0.05), True, sources[1]) for i in range(200)])
    goes, k = [], 0
    for tick in range(500):
        t = 0.02 * tick
        while k < len(events) and events[k][0] <= t:
            dm.press(events[k][1], events[k][0], events[k][2])
            k += 1
        goes.append(dm.go(t)[0])
    return goes


def test_operator_false_beats_a_forgotten_true_at_the_same_rate():
    """Issue 26 item 3: the newest message from anyone won, so the robot moved on 92-156 of
    250 ticks. A false from anyone now holds: never go, with or without sender ids."""
    assert not any(_two_publishers(Deadman(True, 0.5), (None, None)))
    assert not any(_two_publishers(Deadman(True, 0.5), (b"operator", b"terminal")))


def test_a_second_publisher_holds_until_it_is_gone_and_is_named():
    dm = Deadman(True, 0.3)
    dm.set_publishers(2, "/operator_pad, /_ros2cli_4242")
    for i in range(10):  # both say true
        dm.press(True, 0.05 * i, b"a")
        dm.press(True, 0.05 * i + 0.01, b"b")
    ok, why = dm.go(0.46)
    assert not ok and "2 publishers" in why and "/_ros2cli_4242" in why
    dm.set_publishers(1)  # the terminal was closed (graph) ...
    ok, why = dm.go(0.46)
    assert not ok and "2 publishers" in why  # ... but b's trues are within the timeout
    for i in range(10, 20):
        dm.press(True, 0.05 * i, b"a")
    assert dm.go(0.96)[0]  # b silent for longer than the timeout: go


def test_senders_are_bounded():
    dm = Deadman(True, 0.3)
    for i in range(1000):
        dm.press(True, 0.001 * i, i)
    assert len(dm._sources) <= Deadman.MAX_SOURCES
