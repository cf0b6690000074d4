"""Pairer (stamp matching) and Mailbox (drop-oldest single slot): pure, no ROS."""
import threading
import time

import pytest

from oxygen_ros.robot.pairing import Mailbox, Pairer


def test_pairs_newest_complete_within_tolerance():
    p = Pairer(1, tolerance_s=0.02)
    p.add_state(1.00, "s100")
    p.add_image(0, 1.001, "i1")
    pair = p.newest_pair()
    assert pair.images == ("i1",) and pair.state == "s100" and pair.stamp == 1.001
    assert p.newest_pair() is None  # each camera frame used once
    p.add_image(0, 1.10, "i2")  # no state near 1.10 yet
    assert p.newest_pair() is None
    p.add_state(1.095, "s2")
    assert p.newest_pair().images == ("i2",)


def test_prefers_newest_and_nearest_state():
    p = Pairer(1, tolerance_s=0.05)
    for k in range(10):
        p.add_state(k * 0.01, f"s{k}")
    p.add_image(0, 0.031, "a")
    p.add_image(0, 0.072, "b")
    pair = p.newest_pair()
    assert pair.images == ("b",) and pair.state == "s7"
    assert p.newest_pair() is None  # "a" is older than what was used


def test_multi_camera_needs_all_within_tolerance():
    p = Pairer(2, tolerance_s=0.01)
    p.add_state(1.0, "s")
    p.add_image(0, 1.0, "c0")
    assert p.newest_pair() is None  # camera 1 missing
    p.add_image(1, 1.5, "late")
    assert p.newest_pair() is None  # out of tolerance
    p.add_image(1, 1.005, "c1")
    pair = p.newest_pair()
    assert pair.images == ("c0", "c1") and pair.image_stamps == (1.0, 1.005)


def test_out_of_order_messages_are_sorted():
    p = Pairer(1, tolerance_s=0.001)
    p.add_state(2.0, "s2")
    p.add_state(1.0, "s1")
    p.add_image(0, 1.0, "i")
    assert p.newest_pair().state == "s1"


def test_bad_arguments():
    with pytest.raises(ValueError):
        Pairer(0)
    with pytest.raises(ValueError):
        Pairer(1, tolerance_s=-1)


def test_mailbox_drop_oldest():
    m = Mailbox()
    assert m.get(timeout=0.01) is None
    m.put(1)
    m.put(2)
    m.put(3)
    assert m.dropped == 2 and m.get(timeout=0) == 3
    assert m.get(timeout=0.01) is None


def test_mailbox_wakes_waiter_and_close():
    m = Mailbox()
    got = []
    t = threading.Thread(target=lambda: got.append(m.get(timeout=5)))
    t.start()
    time.sleep(0.05)
    m.put("x")
    t.join(2)
    assert got == ["x"]
    t = threading.Thread(target=lambda: got.append(m.get(timeout=5)))
    t0 = time.monotonic()
    t.start()
    m.close()
    t.join(2)
    assert got[-1] is None and time.monotonic() - t0 < 2
    m.reopen()
    m.put(5)
    assert m.get(0) == 5


def test_reset_after_clock_jump_pairs_again():
    p = Pairer(1, tolerance_s=0.05)
    p.add_image(0, 200.0, "future", None)
    p.add_state(200.0, "s", None)
    assert p.newest_pair().stamp == 200.0
    p.add_image(0, 10.0, "img", None)  # the clock went back: older than the used stamp
    p.add_state(10.0, "s2", None)
    assert p.newest_pair() is None
    p.reset()
    p.add_image(0, 10.0, "img", None)
    p.add_state(10.01, "s2", None)
    assert p.newest_pair().images == ("img",)


def test_retire_never_pairs_what_was_received_before():
    """After a new instruction: frames received before it are neither paired nor run (a pair
    made from them already is `retired`), the next one is; a clock jump (reset) clears it."""
    p = Pairer(1, tolerance_s=0.05)
    p.add_state(1.00, "s1")
    p.add_image(0, 1.00, "made")
    made = p.newest_pair()  # in the mailbox when the instruction changes
    p.add_image(0, 1.03, "waiting")  # received, not paired yet (its state is late)
    assert not p.retired(made.stamp)
    p.retire()
    assert p.retired(made.stamp) and p.retired(1.03)
    p.add_state(1.03, "s2")
    assert p.newest_pair() is None  # "waiting" is never paired
    p.add_image(0, 1.06, "next")
    p.add_state(1.06, "s3")
    pair = p.newest_pair()
    assert pair.images == ("next",) and not p.retired(pair.stamp)
    p.retire()  # nothing new received since: the pair made from "next" is retired too
    assert p.retired(1.06)
    p.reset()  # the clock jumped back: new stamps are smaller, and must pair
    p.add_image(0, 0.5, "after jump")
    p.add_state(0.5, "s4")
    assert p.newest_pair().images == ("after jump",) and not p.retired(0.5)


def test_retire_with_nothing_received_retires_nothing():
    p = Pairer(1)
    p.retire()
    assert not p.retired(-1e9)
    p.add_image(0, 2.0, "i")
    p.add_state(2.0, "s")
    assert p.newest_pair().images == ("i",)
