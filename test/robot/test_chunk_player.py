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


def test_crossfade_between_chunks_of_one_motion_follows_the_motion():
    """Chunks that agree (one arm motion, each from a newer observation) arriving every tick, as
    at OxyGen's frame rate, with a fade longer than their spacing: the command is the motion
    itself. The outgoing chunk fades out moving as it would have played; a fade from its value
    frozen at the hand-over lagged the motion (0.08 s behind with a 0.1 s fade here): an arm
    slower than the policy asked for, the more so the more often chunks come."""
    v, latency = 0.5, 0.03  # units / s; observation -> hand-over
    p = ChunkPlayer(1, DT, crossfade_s=0.1, observation_timeout_s=10.0)
    errors = []
    for i in range(40):
        stamp = i * DT
        p.set_chunk(v * (stamp + DT * np.arange(10))[:, None], stamp, stamp + latency)
        t = stamp + latency + 1e-4
        want = v * DT * np.floor((t - stamp) / DT) + v * stamp  # the motion at this tick's slot
        errors.append(abs(p.tick(t).values[0] - want))
    assert max(errors[10:]) < 1e-9, max(errors[10:])


def test_crossfade_from_a_held_value_fades_from_it():
    """A chunk arriving while the player holds (the last chunk went stale) fades in from the
    held value, not from a plan that is no longer followed."""
    p = ChunkPlayer(1, DT, crossfade_s=0.1, observation_timeout_s=0.1)
    p.set_chunk(ramp(10, 1), 0.0, 0.0)
    held = p.tick(0.5)
    assert held.stale and held.values[0] == 9.0
    p.set_chunk(np.zeros((10, 1)), 0.5, 0.5)
    assert p.value_at(0.5).values[0] == pytest.approx(9.0)
    assert p.value_at(0.55).values[0] == pytest.approx(4.5)


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


# -- live blend switches (issue 26, item 5) ------------------------------------------------------
from itertools import permutations  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from oxygen_ros.robot.command_config import BLENDS  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(switch_at=st.integers(0, 60), every=st.integers(2, 9), latency=st.integers(0, 6),
       per_step=st.sampled_from([1, 4]))
def test_every_blend_switch_plays_the_right_step(switch_at, every, latency, per_step):
    """Each of the 6 ordered switches between crossfade, rtc and none, at a random tick, after
    several hand-overs: with regular ticks every blend plays the chunk's step due by time (the
    chunk's value there when not fading); a switch to rtc continues from that step and never
    plays a count left over from earlier chunks (the old player played the chunk's last step)."""
    tick = DT / per_step
    for before, after in permutations(BLENDS, 2):
        p = ChunkPlayer(1, DT, crossfade_s=0.03, observation_timeout_s=10.0, blend=before,
                        tick_s=tick)
        stamp, n_chunks = 0.0, 0
        for k in range(switch_at + 40):
            t = k * tick
            if k == switch_at:
                p.configure(p.config.replace(blend=after))
            if k % every == 0:  # a chunk observed `latency` ticks ago: chunk c's step i is 1000c + i
                stamp = max(k - latency, 0) * tick
                assert p.set_chunk(ramp(12, 1, start=1000.0 * n_chunks), stamp, t)
                n_chunks += 1
            s = p.tick(t)
            due = min(round((t - stamp) / tick) / per_step, 11.0)
            assert s.position == pytest.approx(due), (before, after, k, s.position, due)
            if not s.fading:
                assert s.values[0] == pytest.approx(1000.0 * (n_chunks - 1) + due), (before, after, k)


def test_switch_to_rtc_continues_from_the_time_axis_not_an_old_count():
    """The exact scenario of item 5: crossfade for a while (many chunks), then rtc: the next tick
    plays the step due now, not the chunk's last step."""
    p = ChunkPlayer(1, DT, crossfade_s=0.0, observation_timeout_s=10.0)
    for k in range(40):
        if k % 5 == 0:
            p.set_chunk(ramp(10, 1), k * DT, k * DT)
        p.tick(k * DT)
    p.configure(p.config.replace(blend="rtc"))
    # the last chunk (stamped 35 dt) played its steps 0..4 at ticks 35..39: step 5 is due now
    assert p.tick(40 * DT).index == 5
    assert p.tick(41 * DT).index == 6


# -- control rate apart from the chunk's step (issue 26, item 8) --------------------------------
CHUNK_HZ = 50.0


def smooth(t):
    """A smooth joint trajectory (rad) of time (s): ~1 rad/s at most."""
    return 0.3 * np.sin(2.0 * np.pi * 0.5 * np.asarray(t, dtype=np.float64))


@pytest.mark.parametrize("control_hz", [200.0, 500.0])
def test_faster_control_interpolates_positions_and_velocities_continuously(control_hz):
    """A 50 Hz chunk played at 200 / 500 Hz: every tick plays the curve through the chunk's
    steps at its own time (not the next step: 4 / 10 ticks per step), the step per tick stays
    bounded by the trajectory's speed, and the velocity changes little from tick to tick
    (a step-and-hold stream would jump by a whole chunk step every 4 / 10 ticks)."""
    tick = 1.0 / control_hz
    p = ChunkPlayer(1, 1.0 / CHUNK_HZ, crossfade_s=0.0, observation_timeout_s=10.0, tick_s=tick)
    steps = smooth(np.arange(50) / CHUNK_HZ)[:, None]
    assert p.set_chunk(steps, 0.0, 0.0)
    ts = np.arange(int(0.9 * control_hz)) * tick  # 0.9 s: within the chunk's 0.98 s
    out = np.array([p.tick(t).values[0] for t in ts])
    np.testing.assert_allclose(out, smooth(ts), atol=2e-4)  # on the trajectory, at each tick
    v = np.diff(out) / tick
    vmax = 0.3 * 2.0 * np.pi * 0.5
    assert np.abs(v).max() <= vmax * 1.02  # bounded step per tick
    assert np.abs(np.diff(v)).max() <= 0.05 * vmax  # continuous velocity
    # the step played is the chunk's step by time on its own axis
    assert p.value_at(0.1).index == 5 and p.value_at(0.1 + tick).position == pytest.approx(
        5 + tick * CHUNK_HZ)


def test_latency_skipping_is_on_the_chunk_axis():
    """A chunk arriving 0.05 s after its observation at 200 Hz control: 2.5 chunk steps are
    already past, so the first tick plays the curve between steps 2 and 3."""
    p = ChunkPlayer(1, 1.0 / CHUNK_HZ, crossfade_s=0.0, observation_timeout_s=10.0, tick_s=1 / 200)
    p.set_chunk(ramp(10, 1), 100.0, 100.05)
    s = p.tick(100.05)
    assert s.position == pytest.approx(2.5) and s.index == 2 and s.values[0] == pytest.approx(2.5)


def test_rtc_delay_and_leftover_are_in_chunk_steps():
    """rtc at 200 Hz from a 50 Hz chunk: 12 ticks since the stamp are 3 chunk steps: d = 3, the
    new chunk takes over at its step 3 and advances a quarter step per tick; the leftover has
    one entry per chunk step (the played ticks at the step times, then the plan)."""
    tick = 1 / 200
    p = ChunkPlayer(1, 1.0 / CHUNK_HZ, observation_timeout_s=10.0, blend="rtc", tick_s=tick)
    p.set_chunk(ramp(20, 1), 0.0, 0.0)
    for k in range(20):
        p.tick(k * tick)  # old positions 0, 0.25, ..., 4.75
    stamp = 8 * tick  # old position 2 was played then
    assert p.delay_since(stamp) == 3
    left = p.leftover(stamp)
    np.testing.assert_allclose(left[:, 0], np.arange(2.0, 20.0))  # step times on the old chunk
    assert p.set_chunk(ramp(20, 1, start=100.0), stamp, 20 * tick)
    assert p.last_delay == 3
    s = p.tick(20 * tick)
    assert s.position == pytest.approx(3.0) and s.values[0] == pytest.approx(103.0)
    assert p.tick(21 * tick).position == pytest.approx(3.25)
    # an observation stamped 2 ticks (half a step) before the hand-over's last tick
    # ticks 19, 20, 21 played (0.75 step: one entry), then the plan at the step times: tick 23
    # (one step after the stamp) will play position 3.75
    left = p.leftover(19 * tick)
    np.testing.assert_allclose(left[:, 0], [4.75] + list(np.arange(103.75, 118.8, 1.0)))


@pytest.mark.parametrize("control_hz", [200.0, 500.0])
def test_rtc_at_fast_control_tracks_and_keeps_d_inside_the_chunk(control_hz):
    """The node's loop at 200 / 500 Hz with 10 Hz inference (120 ms latency) of 16-step, 50 Hz
    chunks (320 ms; played at the control rate they lasted 80 / 32 ms) from a policy that predicts the trajectory: d is the latency in chunk steps (6), not
    capped at the horizon, and the commands stay on the trajectory (no seam jumps)."""
    tick, step = 1.0 / control_hz, 1.0 / CHUNK_HZ
    p = ChunkPlayer(1, step, observation_timeout_s=1.0, blend="rtc", tick_s=tick)
    per_frame, latency = int(round(0.1 / tick)), int(round(0.12 / tick))
    pending: list[tuple[int, float]] = []
    out, delays = [], []
    for k in range(int(2.0 * control_hz)):
        t = k * tick
        if k % per_frame == 0:  # an observation now; its chunk arrives `latency` later
            pending.append((k + latency, t))
        while pending and pending[0][0] == k:
            stamp = pending.pop(0)[1]
            assert p.set_chunk(smooth(stamp + np.arange(16) * step)[:, None], stamp, t)
            delays.append(p.last_delay)
        s = p.tick(t)
        if s is not None:
            out.append((t, s.values[0]))
    # 120 ms = 6 chunk steps (the second chunk's: 5, no tick before the first chunk came)
    assert delays[:2] == [0, 5] and set(delays[2:]) == {6}
    t, v = np.array(out).T
    late = t > 0.32  # from the third hand-over (the second counted no tick before the first)
    assert np.abs(v[late] - smooth(t[late])).max() < 1e-3
    assert np.abs(np.diff(v[late])).max() <= 0.95 * tick * 1.02  # bounded step per tick


# -- skip_latency false: the "stale chunks played one latency late" fault (sensitivity runs) ------
@pytest.mark.parametrize("blend", ["crossfade", "none", "rtc"])
def test_without_skip_latency_every_chunk_plays_from_its_first_step(blend):
    """A chunk whose observation is 3 steps old at arrival: by default its steps 0-2 (their time
    passed during inference) are skipped; with skip_latency False it plays from step 0 at its
    arrival, one step per tick, one latency late, under every blend. Staleness still goes by the
    observation's age, not the arrival."""
    kw = dict(crossfade_s=0.0, observation_timeout_s=0.5, blend=blend)
    right, late = ChunkPlayer(2, DT, **kw), ChunkPlayer(2, DT, skip_latency=False, **kw)
    for p in (right, late):
        p.set_chunk(ramp(20), 0.0, 0.0)
        for i in range(5):
            p.tick(i * DT)
    stamp, arrival = 5 * DT, 8 * DT  # 3 ticks played during the new chunk's inference
    for p in (right, late):
        for t in (stamp, stamp + DT, stamp + 2 * DT):
            p.tick(t)
        assert p.set_chunk(ramp(20, start=100.0), stamp, arrival)
        # the start gate sees what will play first
        assert np.allclose(p.first_value(ramp(20, start=100.0), stamp, arrival), 103.0 if p is right else 100.0)
    for k in range(4):
        t = arrival + k * DT
        r, s = right.tick(t), late.tick(t)
        assert r.index == 3 + k and np.allclose(r.values, 103.0 + k)
        assert s.index == k and np.allclose(s.values, 100.0 + k)
    # stale by the observation's age (0.5 s after its stamp), not by its later arrival
    assert late.value_at(stamp + 0.51).stale and not late.value_at(stamp + 0.49).stale


def test_skip_latency_is_a_live_setting_and_on_by_default():
    p = ChunkPlayer(1, DT, crossfade_s=0.0, observation_timeout_s=10.0)
    assert p.config.skip_latency is True
    p.set_chunk(ramp(20, 1), 0.0, 0.1)  # 5 steps late
    assert p.value_at(0.1).index == 5
    p.configure(p.config.replace(skip_latency=False))
    assert p.value_at(0.1).index == 0 and p.value_at(0.1 + 2 * DT + 1e-4).index == 2
    p.configure(p.config.replace(skip_latency=True))
    assert p.value_at(0.1).index == 5


# -- execution sync: each chunk plays to its end from rest, then a chunk observed at rest ------
def test_sync_plays_each_chunk_from_rest_to_its_end_and_passes_chunks_observed_in_motion():
    """A chunk arriving 3 steps after its observation plays from step 0 (the robot stood still
    during inference) to its last step; chunks made while it moves are passed over (not played,
    counted); the robot rests one step after its last step is commanded, and only a chunk
    observed from then on is taken, without a fade (crossfade_s is set and ignored). Streaming
    takes every newer chunk at once."""
    sync = ChunkPlayer(2, DT, crossfade_s=0.1, observation_timeout_s=0.5, execution="sync")
    stream = ChunkPlayer(2, DT, crossfade_s=0.1, observation_timeout_s=0.5)
    arrival = 3 * DT
    for p in (sync, stream):
        assert p.takes(0.0) and p.set_chunk(ramp(8), 0.0, arrival)
    assert np.allclose(sync.first_value(ramp(8), 0.0, arrival), 0.0)  # the gate sees step 0
    assert sync.tick(arrival).index == 0
    assert stream.tick(arrival).index == 3  # streaming skips the steps of the latency
    # a chunk from an observation taken while the first one plays: passed over
    assert not sync.takes(arrival + DT)
    assert not sync.set_chunk(ramp(8, start=50.0), arrival + DT, arrival + 2 * DT)
    assert sync.passed == 1 and sync.rejected == 0
    assert stream.set_chunk(ramp(8, start=50.0), arrival + DT, arrival + 2 * DT)
    for k in range(1, 8):
        s = sync.tick(arrival + k * DT)
        assert s.index == k and np.allclose(s.values, k) and not s.fading and not s.stale
    last = arrival + 7 * DT  # the last step is commanded here; at rest one step later
    assert not sync.takes(last + 0.5 * DT) and sync.takes(last + DT)
    for k in range(8, 20):  # waiting at rest: the last step held, not stale
        s = sync.tick(arrival + k * DT)
        assert np.allclose(s.values, 7.0) and not s.stale
    assert sync.set_chunk(ramp(8, start=100.0), last + DT, last + 14 * DT)
    s = sync.tick(last + 14 * DT)
    assert s.index == 0 and np.allclose(s.values, 100.0) and not s.fading


def test_sync_staleness_counts_from_the_hand_over_and_the_rest_never_wedges():
    p = ChunkPlayer(1, DT, crossfade_s=0.0, observation_timeout_s=0.1, execution="sync")
    p.set_chunk(ramp(4, 1), 0.0, 0.05)
    for k in range(4):  # plays on although the observation is older than the timeout
        assert not p.tick(0.05 + k * DT).stale
    rest = 0.05 + 4 * DT
    assert not p.tick(rest + 0.09).stale and p.tick(rest + 0.11).stale  # no chunk after the rest
    # a chunk already older than the timeout at its hand-over is not started: the value holds
    assert p.set_chunk(ramp(4, 1, start=10.0), rest + 0.01, rest + 0.2)
    s = p.tick(rest + 0.2)
    assert s.stale and np.allclose(s.values, 3.0)
    assert p.takes(rest + 0.15)  # holding: any newer chunk is taken (never wedged)
    assert p.set_chunk(ramp(4, 1, start=20.0), rest + 0.19, rest + 0.21)
    assert np.allclose(p.tick(rest + 0.21).values, 20.0)


def test_sync_is_a_live_setting_that_never_jumps():
    """Switching to sync while a chunk streams: it plays on by its own time axis; chunks are
    taken again once its plan has run out. Back to stream: every newer chunk again."""
    p = ChunkPlayer(1, DT, crossfade_s=0.0, observation_timeout_s=10.0)
    p.set_chunk(ramp(8, 1), 0.0, 2 * DT)
    assert p.tick(2 * DT).index == 2
    p.configure(p.config.replace(execution="sync"))
    assert p.tick(3 * DT).index == 3
    assert not p.takes(4 * DT) and not p.set_chunk(ramp(8, 1), 4 * DT, 5 * DT)
    assert p.takes(8 * DT) and p.set_chunk(ramp(8, 1, start=5.0), 8 * DT, 9 * DT)
    assert np.allclose(p.tick(9 * DT).values, 5.0)
    p.configure(p.config.replace(execution="stream"))
    assert p.takes(9.5 * DT) and p.set_chunk(ramp(8, 1, start=9.0), 9.5 * DT, 10 * DT)


def test_velocity_commands_are_held_per_step_not_interpolated_and_end_at_zero():
    """Issue 38, item 2: a velocity command (command_kinds velocity) is the rate for its whole
    step: held, never a point on the position curve; after the chunk's last step it is 0 (a
    plan that is over must not keep the robot moving); a position beside it interpolates and
    holds its last step. The velocity limit bounds a velocity command's value (not a position's)."""
    from oxygen_ros.robot.command_config import CommandConfig

    cfg = CommandConfig(2, DT, DT / 4, crossfade_s=0.0, observation_timeout_s=10.0,
                        rates=(False, True))
    p = ChunkPlayer.from_config(cfg)
    chunk = np.array([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]])
    assert p.set_chunk(chunk, stamp=100.0, now=100.0)
    half = p.value_at(100.0 + 2 * DT / 4 + 1e-6).values  # position 0.5
    assert 0.0 < half[0] < 1.0 and half[1] == 1.0
    assert p.value_at(100.0 + 1.75 * DT + 1e-6).values[1] == 2.0
    end = p.value_at(100.0 + 3 * DT + 1e-6).values  # past the last step
    assert end[0] == 2.0 and end[1] == 0.0
    bounded = ChunkPlayer.from_config(cfg.replace(velocity_limits=(1.5,)))
    bounded.set_chunk(chunk, stamp=100.0, now=100.0)
    assert bounded.value_at(100.0 + 2 * DT + 1e-6).values.tolist() == [2.0, 1.5]
    np.testing.assert_array_equal(bounded.lower, [-np.inf, -1.5])
    with pytest.raises(ValueError, match="cannot change the commands, their kinds"):
        p.configure(cfg.replace(rates=()))


# -- replan_steps: a chunk is followed for M steps before a newer one takes over ---------------
def test_replan_steps_passes_chunks_until_the_playing_one_has_played_its_steps():
    """Stream with replan_steps 4: chunks finished before the playing chunk has played 4 steps
    since its hand-over are passed over (counted, not played); the first one after takes over
    by time (its latency skipped), never waiting: the robot keeps moving. A plan that runs out
    sooner takes the next chunk at once. 0 (the default) takes every newer chunk."""
    from oxygen_ros.robot.command_config import CommandConfig

    cfg = CommandConfig(1, DT, crossfade_s=0.0, observation_timeout_s=10.0, replan_steps=4)
    p = ChunkPlayer.from_config(cfg)
    every = ChunkPlayer(1, DT, crossfade_s=0.0, observation_timeout_s=10.0)
    for q in (p, every):
        assert q.takes(0.0, DT) and q.set_chunk(ramp(16, 1), 0.0, DT)
    assert p.tick(DT).index == 1
    # 3 steps after the hand-over: too soon
    assert not p.takes(2 * DT, 4 * DT)
    assert not p.set_chunk(ramp(16, 1, start=50.0), 2 * DT, 4 * DT)
    assert p.passed == 1 and p.rejected == 0
    assert every.set_chunk(ramp(16, 1, start=50.0), 2 * DT, 4 * DT)  # 0: at once
    s = p.tick(4 * DT)
    assert s.index == 4 and np.allclose(s.values, 4.0)  # still the first plan
    # 4 steps after the hand-over: taken, playing from the step due now (stamp 3 DT: step 2)
    assert p.takes(3 * DT, 5 * DT)
    assert p.set_chunk(ramp(16, 1, start=100.0), 3 * DT, 5 * DT)
    s = p.tick(5 * DT)
    assert s.index == 2 and np.allclose(s.values, 102.0)
    # takes() without a hand-over time cannot judge: it answers as plain streaming
    assert p.takes(4 * DT)
    # a short plan that runs out before 4 steps: the next chunk takes over at its end
    short = ChunkPlayer.from_config(cfg)
    assert short.set_chunk(ramp(3, 1), 0.0, 0.0)
    assert not short.takes(DT, 1.5 * DT) and short.takes(DT, 2 * DT)


def test_replan_steps_is_not_stale_while_fresh_chunks_are_passed_over():
    """The plan followed under replan_steps is older than observation_timeout_s by choice (16
    steps of 40 ms): while newer chunks keep coming (passed over) the player is not stale; when
    they stop, it is, counted from the newest one offered."""
    from oxygen_ros.robot.command_config import CommandConfig

    step = 0.04
    cfg = CommandConfig(1, step, crossfade_s=0.0, observation_timeout_s=0.5, replan_steps=16)
    p = ChunkPlayer.from_config(cfg)
    plain = ChunkPlayer.from_config(cfg.replace(replan_steps=0))
    assert p.set_chunk(ramp(32, 1), 0.0, 0.1) and plain.set_chunk(ramp(32, 1), 0.0, 0.1)
    for k in range(1, 6):  # a frame every 0.1 s, all passed over (16 steps = 0.64 s not played)
        t = 0.1 * k
        assert not p.set_chunk(ramp(32, 1, start=50.0), t, t + 0.1)
    s = p.tick(0.58)
    assert not s.stale and s.index == 14 and np.allclose(s.values, 14.0)
    # the same plan without newer chunks offered is stale 0.5 s after its observation
    assert not plain.tick(0.49).stale and plain.tick(0.51).stale
    assert not p.tick(0.99).stale and p.tick(1.01).stale  # 0.5 s after the newest offered (0.5)
    # the node asks takes() first and passes the chunk over itself: the same
    q = ChunkPlayer.from_config(cfg)
    assert q.set_chunk(ramp(32, 1), 0.0, 0.1)
    for k in range(1, 6):
        t = 0.1 * k
        assert not q.takes(t, t + 0.1)
        q.pass_over(t)
    assert q.passed == 5 and not q.tick(0.58).stale and q.tick(1.01).stale
    p.clear()
    assert p.set_chunk(ramp(32, 1), 10.0, 10.0) and p.tick(10.51).stale  # cleared: nothing kept


def test_replan_steps_is_refused_out_of_range_and_ignored_by_sync():
    from oxygen_ros.robot.command_config import CommandConfig

    for bad in (-1, 1.5, True, 10001):
        with pytest.raises(ValueError, match="replan_steps"):
            CommandConfig(1, DT, replan_steps=bad)
    p = ChunkPlayer.from_config(CommandConfig(1, DT, crossfade_s=0.0, execution="sync",
                                              replan_steps=100))
    p.set_chunk(ramp(4, 1), 0.0, 0.0)
    for k in range(4):
        p.tick(k * DT)
    assert p.takes(4 * DT, 5 * DT)  # at rest after its 4 steps: sync's rule, not 100 steps
