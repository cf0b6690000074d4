"""ChunkPlayer: timing by stamp, cross-fade, hold, stale, limits, NaN rejection (pure, no ROS)."""
import numpy as np
import pytest

from oxygen_ros.robot.chunk_player import ChunkPlayer

DT = 0.02


def ramp(n=10, j=2, start=0.0, step=1.0):
    return np.stack([start + step * np.arange(n)] * j, axis=1).astype(np.float64)


def test_nothing_before_first_chunk():
    p = ChunkPlayer(2, DT)
    assert p.value_at(0.0) is None
    assert not p.has_chunk


def test_indexes_by_time_since_stamp_and_skips_past_steps():
    p = ChunkPlayer(2, DT, crossfade_s=0.0, observation_timeout_s=10.0)
    assert p.set_chunk(ramp(), stamp=100.0, now=100.0)
    for i in range(10):
        s = p.value_at(100.0 + i * DT + 1e-4)
        assert s.index == i and np.allclose(s.values, i)
    # a chunk arriving 0.05 s after its observation: steps 0 and 1 are already past
    p2 = ChunkPlayer(2, DT, crossfade_s=0.0, observation_timeout_s=10.0)
    p2.set_chunk(ramp(), stamp=100.0, now=100.05)
    s = p2.value_at(100.05)
    assert s.index == 2 and np.allclose(s.values, 2.0)


def test_holds_last_step_after_chunk_end():
    p = ChunkPlayer(2, DT, crossfade_s=0.0, observation_timeout_s=10.0)
    p.set_chunk(ramp(), 0.0, 0.0)
    s = p.value_at(5.0)
    assert s.index == 9 and np.allclose(s.values, 9.0) and not s.stale


def test_crossfade_is_continuous_and_reaches_new_chunk():
    p = ChunkPlayer(2, DT, crossfade_s=0.1, observation_timeout_s=10.0)
    p.set_chunk(np.zeros((50, 2)), 0.0, 0.0)
    p.value_at(0.03)
    p.set_chunk(np.full((50, 2), 10.0), 0.03, 0.03)
    prev = p.value_at(0.03).values
    assert np.allclose(prev, 0.0)  # no jump at the switch
    outs = []
    for t in np.arange(0.031, 0.2, 0.001):
        v = p.value_at(t).values
        assert np.all(np.abs(v - prev) <= 10.0 * 0.001 / 0.1 + 1e-9)  # bounded slope
        prev = v
        outs.append(v[0])
    assert np.isclose(outs[-1], 10.0)
    assert p.value_at(0.2).fading is False


def test_new_chunk_during_fade_does_not_jump():
    p = ChunkPlayer(1, DT, crossfade_s=0.1, observation_timeout_s=10.0)
    p.set_chunk(np.zeros((50, 1)), 0.0, 0.0)
    p.set_chunk(np.full((50, 1), 10.0), 0.0, 0.0)
    mid = p.value_at(0.05).values.copy()
    assert 4.0 < mid[0] < 6.0
    p.set_chunk(np.full((50, 1), -10.0), 0.05, 0.05)
    assert np.allclose(p.value_at(0.05).values, mid)


def test_stale_holds_last_output_and_reports():
    p = ChunkPlayer(2, DT, crossfade_s=0.0, observation_timeout_s=0.1)
    p.set_chunk(ramp(), 0.0, 0.0)
    last = p.value_at(0.05).values
    s = p.value_at(1.0)
    assert s.stale and np.allclose(s.values, last)
    # a fresh chunk recovers
    p.set_chunk(ramp(start=5.0), 1.0, 1.0)
    s = p.value_at(1.0)
    assert not s.stale and np.allclose(s.values, 5.0)


def test_clip_to_limits():
    p = ChunkPlayer(2, DT, crossfade_s=0.0, lower=np.array([-1.0, 0.0]), upper=np.array([1.0, 0.5]))
    p.set_chunk(np.array([[5.0, -5.0]]), 0.0, 0.0)
    assert np.allclose(p.value_at(0.0).values, [1.0, 0.0])
    p.configure(p.config.replace(lower=(), upper=()))
    assert np.allclose(p.value_at(0.0).values, [5.0, -5.0])


def test_nan_chunk_rejected_keeps_last_good():
    p = ChunkPlayer(2, DT, crossfade_s=0.0, observation_timeout_s=10.0)
    p.set_chunk(ramp(), 0.0, 0.0)
    bad = ramp()
    bad[3, 1] = np.nan
    assert not p.set_chunk(bad, 0.01, 0.01)
    assert not p.set_chunk(np.full((10, 2), np.inf), 0.01, 0.01)
    assert not p.set_chunk(np.zeros((10, 3)), 0.01, 0.01)  # wrong joint count
    assert p.rejected == 3 and p.accepted == 1
    for t in np.linspace(0, 1, 50):
        assert np.all(np.isfinite(p.value_at(t).values))


def test_older_chunk_ignored():
    p = ChunkPlayer(1, DT, crossfade_s=0.0, observation_timeout_s=10.0)
    p.set_chunk(np.ones((5, 1)), 1.0, 1.0)
    assert not p.set_chunk(np.zeros((5, 1)), 0.5, 1.0)
    assert np.allclose(p.value_at(1.0).values, 1.0)


def test_bad_settings():
    with pytest.raises(ValueError):
        ChunkPlayer(0, DT)
    with pytest.raises(ValueError):
        ChunkPlayer(2, 0.0)
    with pytest.raises(ValueError):
        ChunkPlayer(2, DT, lower=np.array([1.0, 1.0]), upper=np.array([0.0, 0.0]))


def test_future_stamped_chunk_is_never_played():
    """A negative age beyond the tolerance (clock jumped back) holds the last output; a newer
    arriving chunk replaces it although its stamp is older."""
    p = ChunkPlayer(2, DT, crossfade_s=0.0, observation_timeout_s=0.5, future_tolerance_s=1.0)
    assert p.set_chunk(ramp(start=5.0), stamp=100.0, now=100.0)
    held = p.value_at(100.1).values  # the output when the jumped chunk arrives
    assert p.set_chunk(ramp(start=-5.0), stamp=120.0, now=100.1)  # stamped 20 s ahead
    for t in (100.1, 100.3, 101.0):
        s = p.value_at(t)
        assert s.future and s.stale and np.allclose(s.values, held)  # never step 0 of the jump
    assert p.set_chunk(ramp(start=1.0), stamp=101.0, now=101.0)  # sane again: accepted
    s = p.value_at(101.0)
    assert not s.stale and not s.future and np.allclose(s.values, 1.0)
    # within the tolerance a slightly negative age plays step 0
    assert p.set_chunk(ramp(start=2.0), stamp=101.5, now=101.2)
    assert np.allclose(p.value_at(101.2).values, 2.0)
    # a first chunk from the future: nothing to hold, nothing is output
    q = ChunkPlayer(2, DT, future_tolerance_s=1.0)
    assert q.set_chunk(ramp(), stamp=50.0, now=10.0)
    assert q.value_at(10.0) is None


# -- chunk_blend: rtc / none ------------------------------------------------------------------
def test_rtc_delay_is_the_counted_steps_not_the_latency():
    """The control loop stalls: only 3 ticks are played in the 0.2 s (10 steps' worth) between
    the new chunk's observation and its hand-over. d is 3 (steps actually consumed), not the 10
    a latency estimate gives, and the new chunk takes over at its step 3, without a fade."""
    p = ChunkPlayer(2, DT, crossfade_s=0.1, observation_timeout_s=10.0, blend="rtc")
    p.set_chunk(ramp(50), 0.0, 0.0)
    for i in range(5):
        assert p.tick(i * DT).index == i  # one step per tick
    stamp = 5 * DT
    for t in (stamp, stamp + 0.09, stamp + 0.19):  # 3 ticks, late
        p.tick(t)
    assert p.delay_since(stamp) == 3
    assert p.set_chunk(ramp(50, start=100.0), stamp, stamp + 0.2)
    assert p.last_delay == 3
    s = p.tick(stamp + 0.2)
    assert s.index == 3 and np.allclose(s.values, 103.0) and not s.fading
    assert p.tick(stamp + 0.21).index == 4


def test_rtc_leftover_is_what_is_executed_from_the_stamp_on():
    p = ChunkPlayer(1, DT, observation_timeout_s=10.0, blend="rtc")
    p.set_chunk(ramp(10, 1), 0.0, 0.0)
    for i in range(4):
        p.tick(i * DT)  # steps 0..3 played
    left = p.leftover(2 * DT)  # ticks at 2 dt and 3 dt played 2 and 3; then the plan 4..9
    assert np.allclose(left[:, 0], np.arange(2, 10))
    # a stamp newer than every tick: the plan from the next step
    assert np.allclose(p.leftover(1.0)[:, 0], np.arange(4, 10))
    assert ChunkPlayer(1, DT, blend="rtc").leftover(0.0) is None  # no chunk


def test_rtc_leftover_spans_a_handover():
    """An observation stamped before the last hand-over: the old chunk's played steps, then the
    new chunk from its counted take-over step."""
    p = ChunkPlayer(1, DT, observation_timeout_s=10.0, blend="rtc")
    p.set_chunk(ramp(10, 1), 0.0, 0.0)
    for i in range(3):
        p.tick(i * DT)  # old 0, 1, 2
    p.set_chunk(ramp(10, 1, start=100.0), 1 * DT, 3 * DT)  # 2 ticks since its stamp: d = 2
    p.tick(3 * DT)  # new step 2
    assert np.allclose(p.leftover(1 * DT)[:, 0], [1, 2, 102] + list(range(103, 110)))


def test_blend_none_switches_at_once_by_time():
    p = ChunkPlayer(1, DT, crossfade_s=0.5, observation_timeout_s=10.0, blend="none")
    p.set_chunk(np.zeros((50, 1)), 0.0, 0.0)
    p.tick(0.0)
    p.set_chunk(ramp(50, 1, start=10.0), 0.0, 0.1)
    s = p.tick(0.1)
    assert s.index == 5 and np.allclose(s.values, 15.0) and not s.fading


def test_blend_is_checked():
    with pytest.raises(ValueError, match="blend"):
        ChunkPlayer(1, DT, blend="smooth")
    p = ChunkPlayer(1, DT)
    with pytest.raises(ValueError, match="blend"):
        p.configure(p.config.replace(blend="rtc2"))
    p.configure(p.config.replace(blend="rtc"))
    assert p.blend == "rtc"


def test_rtc_leftover_is_none_while_holding():
    p = ChunkPlayer(1, DT, observation_timeout_s=0.1, blend="rtc")
    p.set_chunk(ramp(10, 1), 0.0, 0.0)
    p.tick(0.0)
    assert p.leftover(0.0) is not None
    assert p.tick(1.0).stale  # the chunk went stale: no plan to continue
    assert p.leftover(1.0) is None
