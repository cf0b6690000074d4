"""bench/fake_humanoid.py: the truth the humanoid-io benchmark holds the node's figures against
(the age of the newest joint state the sender had published when a command was made), and the
drivers as processes of their own that record what they sent."""
import os

import numpy as np
import pytest

from oxygen_ros.bench.fake_humanoid import age_floor_ms

MS = 1_000_000  # ns


def _sender(hz: float, seconds: float, pause_at: float | None = None, pause_s: float = 0.0,
            publish_ms: float = 0.1):
    """Stamps (ns) of a sender at `hz`, one pause of `pause_s` at `pause_at`; each publish()
    returns `publish_ms` after its stamp."""
    stamps, t = [], 0.0
    while t < seconds:
        stamps.append(int(t * 1e9))
        t += 1.0 / hz
        if pause_at is not None and stamps[-1] < pause_at * 1e9 <= t * 1e9:
            t += pause_s
    stamps = np.array(stamps, dtype=np.int64)
    return stamps, stamps + int(publish_ms * MS)


def test_a_steady_500_hz_sender_gives_ages_within_its_period():
    stamps, out = _sender(500.0, 1.0)
    used = np.arange(10 * MS, 990 * MS, 5 * MS)  # commands at 200 Hz
    ages = age_floor_ms(stamps, out, used)
    assert np.all(ages >= 0.1 - 1e-9) and np.all(ages < 2.0 + 0.1 + 1e-9)


def test_a_sender_pause_is_the_floor_of_the_age_any_receiver_reports():
    """The sender stops 30 ms: the commands made meanwhile could only use the last one sent
    before it, whatever the node does."""
    stamps, out = _sender(500.0, 1.0, pause_at=0.5, pause_s=0.03)
    used = np.arange(10 * MS, 990 * MS, 1 * MS)
    ages = age_floor_ms(stamps, out, used)
    assert ages.max() == pytest.approx(32.0, abs=0.2)  # the period + the pause
    assert np.percentile(ages, 50) <= 2.0 + 1e-9  # otherwise within its 2 ms period


def test_a_message_counts_from_when_its_publish_returned_and_nan_before_the_first():
    stamps = np.array([0, 2 * MS, 4 * MS], dtype=np.int64)
    out = np.array([0, 12 * MS, 5 * MS], dtype=np.int64)  # the second one stuck 10 ms in publish()
    ages = age_floor_ms(stamps, out, np.array([-1 * MS, 3 * MS, 6 * MS, 13 * MS]))
    assert np.isnan(ages[0])
    assert ages[1] == pytest.approx(3.0)  # only the first was out
    assert ages[2] == pytest.approx(2.0)  # the third was out (stamped 4 ms)
    assert ages[3] == pytest.approx(9.0)  # the second coming out late does not make it younger


def test_by_windows_is_the_median_windows_p50_and_the_worst_windows_p99():
    from oxygen_ros.bench.suite.humanoid_io import _by_windows

    t = np.arange(0, 6_000) * MS  # 6 s at 1 kHz: three 2-s windows
    v = np.ones(len(t))
    v[4_500] = 40.0  # one slow value in the last window
    p50, p99 = _by_windows(t, v, 2.0)
    assert p50 == 1.0 and p99 == pytest.approx(1.0)  # one in 2000 is under the p99
    v[4_500:4_600] = 40.0
    assert _by_windows(t, v, 2.0)[1] == pytest.approx(40.0)


@pytest.mark.ros
def test_the_drivers_are_processes_of_their_own_and_record_what_they_sent():
    pytest.importorskip("rclpy")
    import time

    from oxygen_ros.bench.fake_humanoid import JOINT_TOPIC, FakeHumanoid

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    robot = FakeHumanoid(500.0, 2, "raw", size=(48, 64), joint_priority=0)
    robot.start()
    try:
        pids = {p.pid for p in robot._procs}
        assert len(pids) == 2 and os.getpid() not in pids
        t0 = time.monotonic()  # both drivers are sending (the first may have started earlier)
        time.sleep(0.6)
        robot.slow_camera(1, 10)
        t1 = time.monotonic()
        time.sleep(0.6)
        t2 = time.monotonic()
    finally:
        robot.stop()
    assert not any(p.is_alive() for p in robot._procs)
    js = robot.joints
    n = robot.sent_between(js, t0, t2)
    assert js.topic == JOINT_TOPIC and 0.7 * 600 <= n <= 1.02 * 600 + 2, n  # 500 Hz for 1.2 s
    assert len(js.sent_stamps) == js.sent == len(js.sent_times) == len(robot.joint_published_ns)
    assert np.all(np.diff(js.sent_stamps) > 0)
    assert all(p >= s for p, s in zip(robot.joint_published_ns, js.sent_stamps))
    head, wrist = robot.cams
    assert 0.7 * 36 <= robot.sent_between(head, t0, t2) <= 36 + 2  # 30 Hz
    assert robot.sent_between(wrist, t0, t1) >= robot.sent_between(head, t0, t1) - 1
    assert robot.sent_between(wrist, t1, t2) <= 3  # a tenth of 30 Hz for 0.6 s
    assert robot.joint_scheduling == "normal"
