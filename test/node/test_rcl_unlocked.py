"""node/rcl_unlocked.py: the control tick's take and publish through rcl with the interpreter
lock released. The bytes and the message info are rclpy's; another Python thread runs during
the calls (it does not beside rclpy's); a failed probe leaves rclpy's calls, with the reason."""
import threading
import time

import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from oxygen_ros.node import rcl_unlocked as ru  # noqa: E402

QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope="module")
def node():
    context = rclpy.Context()
    rclpy.init(context=context)
    n = rclpy.create_node("oxygen_rcl_unlocked_test", context=context)
    yield n
    n.destroy_node()
    rclpy.try_shutdown(context=context)


@pytest.fixture
def pair(node):
    """A publisher and a subscription of one topic, matched."""
    topic = f"/test/rcl_unlocked_{time.monotonic_ns()}"
    pub = node.create_publisher(JointState, topic, QOS)
    sub = node.create_subscription(JointState, topic, lambda m: None, QOS)
    deadline = time.monotonic() + 5.0
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    yield pub, sub
    node.destroy_subscription(sub)
    node.destroy_publisher(pub)


def _msg(i: int) -> bytes:
    return serialize_message(JointState(name=[f"j{k}" for k in range(30)], position=[0.1 * i] * 30))


def _rclpy_take(sub, timeout_s: float = 2.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with sub.handle:
            got = sub.handle.take_message(sub.msg_type, True)
        if got is not None:
            return got
        time.sleep(0.002)
    return None


def _take(take, timeout_s: float = 2.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = take.take()
        if got is not None:
            return got
        time.sleep(0.002)
    return None


def test_the_probe_passes_here(node):
    rcl, why = ru.Probe.run(node)
    assert rcl is not None, why
    assert why == ""


def test_what_goes_through_rcl_is_what_rclpy_sends_and_takes(node, pair):
    """Published through it: rclpy takes the same bytes. Taken through it: the bytes rclpy
    published, with the message info rclpy would give (same publisher, next sequence number)."""
    rcl, why = ru.Probe.run(node)
    assert rcl is not None, why
    pub, sub = pair
    ours_pub, ours_take = ru.UnlockedPublisher(rcl, pub), ru.UnlockedTake(rcl, sub, capacity=16)
    try:
        ours_pub.publish(_msg(1))
        data, info = _rclpy_take(sub)
        assert bytes(data) == _msg(1)
        pub.publish(_msg(2))  # larger than the 16-byte buffer: rcl grows it
        data2, info2 = _take(ours_take)
        assert data2 == _msg(2)
        assert info2["publisher_gid"]["data"] == bytes(info["publisher_gid"]["data"])
        assert info2["publication_sequence_number"] == info["publication_sequence_number"] + 1
        assert info["received_timestamp"] <= info2["received_timestamp"] <= time.time_ns()
        assert ours_take.take() is None  # nothing left
    finally:
        ours_take.close()
    assert ours_take.take() is None  # closed: nothing taken, nothing freed twice
    ours_take.close()


def _other_thread_runs_during(calls, n: int = 300) -> int:
    """How often another Python thread got the interpreter lock while this one made `n`
    calls. The switch interval is set far beyond the loop, so the lock changes hands only when
    this thread releases it itself."""
    import sys

    old = sys.getswitchinterval()
    count, stop, ready = [0], threading.Event(), threading.Event()

    def other():
        ready.set()
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)  # gives the lock back at once, takes it when it is free
    th = threading.Thread(target=other, daemon=True)
    th.start()
    ready.wait()
    sys.setswitchinterval(100.0)
    try:
        c0 = count[0]
        for _ in range(n):
            calls()
        during = count[0] - c0
    finally:
        sys.setswitchinterval(old)
        stop.set()
        th.join()
    return during


def test_the_lock_is_released_during_the_calls_and_rclpy_holds_it(node, pair):
    """The reason for the module: beside rclpy's publish / take another thread gets (almost)
    no turn; beside the same calls through rcl it gets a turn in many of them (measured: 180-220
    of 300 large messages; at least 50 asked)."""
    rcl, why = ru.Probe.run(node)
    assert rcl is not None, why
    pub, sub = pair
    ours_pub, ours_take = ru.UnlockedPublisher(rcl, pub), ru.UnlockedTake(rcl, sub)
    # a large message: each call lasts long enough for the other thread to be woken within it
    raw = serialize_message(JointState(name=["j"] * 20000, position=[0.5] * 20000))

    def ours():
        ours_pub.publish(raw)
        ours_take.take()

    def theirs():
        pub.publish(raw)
        with sub.handle:
            sub.handle.take_message(sub.msg_type, True)
    try:
        assert _other_thread_runs_during(ours) >= 50
        assert _other_thread_runs_during(theirs) <= 10
    finally:
        ours_take.close()


def test_a_lifecycle_publisher_that_is_not_active_sends_nothing(node):
    """As rclpy's LifecyclePublisher: nothing goes out while it is deactivated."""
    from rclpy.lifecycle import LifecycleNode

    rcl, why = ru.Probe.run(node)
    assert rcl is not None, why
    lnode = LifecycleNode("oxygen_rcl_unlocked_lifecycle", context=node.context)
    topic = f"/test/rcl_unlocked_lc_{time.monotonic_ns()}"
    lpub = lnode.create_lifecycle_publisher(JointState, topic, QOS)
    sub = node.create_subscription(JointState, topic, lambda m: None, QOS)
    try:
        deadline = time.monotonic() + 5.0
        while lpub.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        ours = ru.UnlockedPublisher(rcl, lpub)
        ours.publish(_msg(4))
        assert _rclpy_take(sub, 0.3) is None
        lpub.on_activate(None)
        ours.publish(_msg(5))
        data, _ = _rclpy_take(sub)
        assert bytes(data) == _msg(5)
    finally:
        node.destroy_subscription(sub)
        lnode.destroy_node()


def test_a_failed_probe_keeps_rclpys_calls_and_says_why(node, monkeypatch):
    """rcl not found under its soname (or any other failure): (None, the reason), kept."""
    def missing():
        raise OSError("librcl.so: cannot open shared object file")
    monkeypatch.setattr(ru.Probe, "_result", None)
    monkeypatch.setattr(ru, "Rcl", missing)
    rcl, why = ru.Probe.run(node)
    assert rcl is None
    assert "librcl.so" in why
    assert ru.Probe.run(node) == (None, why)  # once per process
