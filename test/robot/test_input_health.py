"""robot/input_health.py: the received rate of the current window, losses from stamp gaps and from
the middleware's reports, the stamp lag, bounded memory."""
from __future__ import annotations

import pytest

from oxygen_ros.robot.input_health import TopicHealth, missing_by_stamps


def _feed(h: TopicHealth, t0: float, seconds: float, hz: float, keep=lambda i: True,
          lag: float = 0.01) -> float:
    """Messages stamped at `hz` for `seconds` from t0 (monotonic = stamp here), those where
    keep(i) arrive; returns the time of the last one sent."""
    n = int(round(seconds * hz))
    t = t0
    for i in range(n):
        t = t0 + i / hz
        if keep(i):
            h.good(t + lag, stamp=t, lag=lag)
    return t


def test_rate_is_the_current_window_and_falls_when_messages_stop():
    h = TopicHealth("/cam", window_s=2.0)
    end = _feed(h, 100.0, 4.0, 30.0)
    assert h.window(end + 0.02).received_hz == pytest.approx(30.0, rel=0.03)
    # a burst of 3 images, then nothing: the old code said 30 Hz (3 events 33 ms apart)
    h2 = TopicHealth("/cam", window_s=2.0)
    _feed(h2, 100.0, 3.0, 30.0)  # history older than the window
    for k in range(3):
        h2.good(110.0 + k / 30, stamp=110.0 + k / 30)
    assert h2.window(111.0).received_hz == pytest.approx(1.5, abs=0.01)  # 3 in 2 s
    # stopped: the rate falls within one window
    assert h.window(end + 1.0).received_hz == pytest.approx(15.0, rel=0.1)
    assert h.window(end + 2.1).received_hz == 0.0


def test_start_up_rate_uses_the_time_since_the_first_message():
    h = TopicHealth("/cam", window_s=2.0)
    h.good(10.0, stamp=10.0)
    assert h.window(10.0).received_hz == 0.0  # one message: no rate yet, no division by 0
    end = _feed(h, 10.0, 0.5, 30.0)
    assert h.window(end).received_hz == pytest.approx(30.0, rel=0.1)


def test_gaps_in_stamps_count_what_the_publisher_sent_and_never_arrived():
    h = TopicHealth("/cam", window_s=2.0)
    # 2 of 3 lost (gaps of 1 to 5 periods: a perfectly regular every-third loss would look like
    # a 10 Hz publisher, which only the middleware's report tells apart)
    kept = {i for i in range(90) if i % 6 in (0, 1)}
    end = _feed(h, 50.0, 3.0, 30.0, keep=lambda i: i in kept)
    w = h.window(end + 0.02)
    assert w.received_hz == pytest.approx(10.0, rel=0.1)
    assert w.lost_fraction == pytest.approx(2 / 3, abs=0.03)
    assert w.published_hz == pytest.approx(30.0, rel=0.1)
    # irregular losses (a fixed pseudo-random pattern, ~60 % lost) are counted too
    h2 = TopicHealth("/cam", window_s=2.0)
    pattern = [(i * 7919) % 10 < 4 for i in range(90)]
    end = _feed(h2, 50.0, 3.0, 30.0, keep=lambda i: pattern[i])
    w2 = h2.window(end + 0.02)
    assert w2.lost_fraction == pytest.approx(0.6, abs=0.08)
    assert w2.published_hz == pytest.approx(30.0, rel=0.12)


def test_no_loss_for_a_steady_topic_with_jittered_stamps_or_a_restart():
    h = TopicHealth("/cam", window_s=2.0)
    jitter = [0.004 * ((i * 37) % 7 - 3) / 3 for i in range(120)]
    for i in range(120):
        t = 20.0 + i / 30 + jitter[i]
        h.good(t, stamp=t)
    assert h.window(20.0 + 4.0).lost_fraction == 0.0
    assert missing_by_stamps([0.0, 0.1, 0.2, 5.0, 5.1, 5.2], max_gap=2.0) == 0  # a pause is not a loss


def test_middleware_reports_count_when_too_few_arrive_to_see_the_period():
    h = TopicHealth("/cam", window_s=2.0)
    h.good(30.0, stamp=30.0)
    for k in range(60):
        h.transport_lost(30.0 + k / 30, 1)
    h.good(31.9, stamp=31.9)
    w = h.window(31.95)
    assert w.received == 2 and w.transport_lost == 60
    assert w.lost_fraction == pytest.approx(60 / 62)
    assert w.published_hz == pytest.approx(31.0, rel=0.1)
    assert h.window(34.5).transport_lost == 0  # the last seconds only


def test_lag_is_the_median_of_the_window():
    h = TopicHealth("/joint_states", window_s=2.0)
    _feed(h, 0.0, 1.0, 100.0, lag=0.8)
    assert h.window(1.0).lag_s == pytest.approx(0.8)
    h.good(1.0, stamp=None)  # unstamped: no lag, no stamp gap
    assert h.window(1.0).lag_s == pytest.approx(0.8)


def test_memory_is_bounded_for_a_fast_topic():
    h = TopicHealth("/joint_states", window_s=2.0, capacity=256)
    end = _feed(h, 0.0, 10.0, 1000.0)
    assert len(h._seen) == 256
    w = h.window(end + 0.01)
    assert w.received_hz == pytest.approx(1000.0, rel=0.02) and w.lost == 0


def test_sequence_numbers_count_what_each_publisher_sent_whatever_its_timing():
    """Issue 36: messages dropped between two taken ones are the jump in the publisher's
    publication sequence number (per publisher), exact for a bursty sender whose stamp gaps
    say nothing of its period; a reordered sample counts nothing, and the stamps' guess is not
    used."""
    h = TopicHealth("/js", window_s=10.0)
    t = 0.0
    # publisher a sends 1..400 in bursts of 10 every 20 ms; the node takes every 4th
    for seq in range(4, 401, 4):
        t = 0.02 * (seq // 10) + 1e-4 * (seq % 10)
        h.good(t, stamp=t, seq=seq, publisher=b"a")
    w = h.window(t + 1e-3)
    assert w.sequenced and w.missing == 0  # no stamp-gap guess
    assert (w.received, w.dropped) == (100, 396 - 99)  # 4..400 sent after the first taken
    # at start-up the rate is over the span since the first one taken: the 396 sent after it
    assert w.published_hz == pytest.approx(396 / w.seconds)
    h.good(t + 0.001, seq=399, publisher=b"a")  # reordered: nothing
    h.good(t + 0.002, seq=1, publisher=b"b")  # a second publisher: its own count
    h.good(t + 0.003, seq=3, publisher=b"b")
    assert h.dropped_total == 396 - 99 + 1
