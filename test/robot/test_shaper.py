"""CommandShaper, MeasuredPose, Deadman: limits held against adversarial targets, the start from
the measured pose, the chunk gate, hold and deadman timing (pure, no ROS)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oxygen_ros.robot.chunk_player import ChunkPlayer
from oxygen_ros.robot.shaper import CommandShaper, Deadman, MeasuredPose, per_joint

DT = 0.02
J = 3
EPS = 1e-9


def run(shaper, targets, measured, holds=None):
    """Commands for a sequence of targets (None entries allowed)."""
    out = []
    for i, t in enumerate(targets):
        s = shaper.step(t, measured, "" if holds is None else holds[i])
        out.append(s)
    return out


def check_limits(values, v_max, a_max, start):
    """Every step within v_max*dt (the first one measured from `start`), every change of step
    within a_max*dt^2."""
    pts = np.vstack([start, values])
    steps = np.diff(pts, axis=0)
    assert np.all(np.abs(steps) <= v_max * DT + EPS), np.abs(steps).max() / DT
    if a_max is not None:
        dsteps = np.diff(np.vstack([np.zeros(J), steps]), axis=0)
        assert np.all(np.abs(dsteps) <= a_max * DT * DT + EPS), np.abs(dsteps).max() / DT / DT


# -- adversarial targets ------------------------------------------------------------------------
finite = st.floats(-10.0, 10.0, allow_nan=False)
target = st.one_of(st.none(), st.lists(finite, min_size=J, max_size=J).map(np.array),
                   st.just(np.array([np.nan, 0.0, np.inf])))


@settings(max_examples=150, deadline=None)
@given(targets=st.lists(target, min_size=1, max_size=60),
       v=st.floats(0.05, 5.0), a=st.one_of(st.none(), st.floats(0.5, 50.0)),
       start=st.lists(finite, min_size=J, max_size=J).map(np.array),
       holds=st.lists(st.sampled_from(["", "", "", "stale", "deadman"]), min_size=60, max_size=60))
def test_limits_hold_for_any_targets_and_no_nan_reaches_the_output(targets, v, a, start, holds):
    sh = CommandShaper(J, DT, [v], [] if a is None else [a])
    out = [s for s in run(sh, targets, start, holds) if s is not None]
    if not out:
        return
    values = np.array([s.values for s in out])
    assert np.all(np.isfinite(values))
    # starts and restarts (after a hold) begin at the measured pose, at rest: check each run
    runs, cur = [], []
    for s in out:
        if s.start:
            assert np.allclose(s.values, start)
            if cur:
                runs.append(cur)
            cur = []
        else:
            cur.append(s.values)
    runs.append(cur)
    for r in runs:
        if r:
            check_limits(np.array(r), v, a, start)


def test_alternating_limits_and_steps_are_limited_and_counted():
    sh = CommandShaper(J, DT, [1.0], [10.0])
    start = np.zeros(J)
    targets = [np.full(J, 3.0 if i % 2 else -3.0) for i in range(50)]  # +-3 rad every tick
    targets += [np.full(J, 2.0)] * 200  # then a step
    out = run(sh, targets, start)
    values = np.array([s.values for s in out[1:]])
    check_limits(values, 1.0, 10.0, start)
    assert sh.limited_ticks > 100
    assert np.allclose(out[-1].values, 2.0)  # a standing target is reached ...


def test_bounded_acceleration_stops_at_a_standing_target_without_overshoot():
    for v, a, goal in ((1.0, 2.0, 0.7), (3.0, 5.0, -1.3), (0.5, 100.0, 0.01), (10.0, 1.0, 2.0)):
        sh = CommandShaper(1, DT, [v], [a])
        out = run(sh, [np.array([goal])] * 2000, np.array([0.0]))
        x = np.array([s.values[0] for s in out])
        assert np.all(np.sign(goal) * x <= abs(goal) + EPS), (v, a, x.max())  # never beyond
        assert x[-1] == pytest.approx(goal, abs=1e-9)
        check_limits(x[1:, None].repeat(J, 1), v, a, np.zeros(J))


def test_follows_a_smooth_chunk_within_the_limits():
    """A chunk slower than the limits is played exactly once the start ramp caught up."""
    player = ChunkPlayer(J, DT, crossfade_s=0.0, observation_timeout_s=100.0)
    chunk = np.stack([0.5 * np.sin(0.02 * np.arange(500) + j) for j in range(J)], axis=1)
    player.set_chunk(chunk, 0.0, 0.0)
    sh = CommandShaper(J, DT, [1.0], [5.0])
    measured = np.array([1.0, -1.0, 0.0])  # far from the chunk's start
    out = [sh.step(player.value_at(i * DT).values, measured) for i in range(500)]
    assert out[0].start and np.allclose(out[0].values, measured)
    check_limits(np.array([s.values for s in out[1:]]), 1.0, 5.0, measured)
    late = np.array([s.values for s in out[200:]])
    assert np.allclose(late, chunk[200:], atol=1e-9)  # following the chunk exactly


# -- start from the measured pose ---------------------------------------------------------------
def test_no_command_without_a_measured_pose_then_first_command_is_it():
    sh = CommandShaper(J, DT, [1.0])
    assert sh.step(np.full(J, 2.0), None) is None
    m = np.array([0.8, -0.6, 0.5])
    first = sh.step(np.full(J, 2.0), m)
    assert first.start and np.array_equal(first.values, m)
    second = sh.step(np.full(J, 2.0), m)
    assert np.allclose(np.abs(second.values - m), 1.0 * DT) and second.limited.all()


def test_without_limits_commands_are_the_player_values_after_the_start():
    sh = CommandShaper(J, DT)
    m = np.zeros(J)
    assert sh.step(np.full(J, 3.0), m).start
    for v in (3.0, -2.0, 1.5):
        s = sh.step(np.full(J, v), m)
        assert np.array_equal(s.values, np.full(J, v)) and not s.limited.any()
    assert sh.limited_ticks == 0


def test_after_a_hold_commands_restart_from_the_measured_pose():
    sh = CommandShaper(J, DT, [1.0], [50.0])
    m0 = np.zeros(J)
    sh.step(np.full(J, 1.0), m0)
    moving = [sh.step(np.full(J, 1.0), m0) for _ in range(20)][-1].values
    held = [sh.step(np.full(J, 1.0), m0, hold="stale") for _ in range(20)]
    assert all(h.holding == "stale" for h in held)
    stopped = held[-1].values
    assert np.allclose(held[-2].values, stopped)  # braked to rest
    assert np.all(stopped >= moving)  # within the acceleration limit: a little further on
    m1 = np.full(J, 0.3)  # where the robot actually is now
    again = sh.step(np.full(J, 1.0), m1)
    assert again.start and np.array_equal(again.values, m1)
    assert np.allclose(sh.step(np.full(J, 1.0), m1).values - m1, 50.0 * DT * DT)  # from rest


def test_reset_forgets_the_last_command():
    sh = CommandShaper(J, DT, [1.0])
    sh.step(np.ones(J), np.zeros(J))
    sh.reset()
    assert sh.step(np.ones(J), None) is None


# -- chunk gate ---------------------------------------------------------------------------------
def test_gate_refuses_a_far_chunk_names_the_joint_and_holds_until_one_passes():
    sh = CommandShaper(J, DT, [1.0], max_start_deviation=[0.5])
    m = np.zeros(J)
    chunk = np.zeros((10, J))
    chunk[:, 1] = np.linspace(0.0, 0.9, 10)
    assert sh.gate(chunk, stamp=0.0, now=0.0, measured=m) is None  # step 0 is at the pose
    sh.step(chunk[0], m)
    # arriving 0.12 s late: step 6 (0.6 rad on joint 1) plays first -> refused
    r = sh.gate(chunk, stamp=0.0, now=0.12, measured=m)
    assert r is not None and r.joint == 1 and r.step == 6 and r.distance == pytest.approx(0.6)
    assert sh.gated == 1 and sh.gate_holding
    s = sh.step(np.full(J, 0.6), m)
    assert s.holding == "gate" and np.array_equal(s.values, np.zeros(J))
    assert sh.gate(chunk, stamp=0.1, now=0.1, measured=m) is None  # a good chunk: play again
    s = sh.step(chunk[0], m)
    assert s.start and not sh.gate_holding


def test_gate_per_joint_zero_is_off_and_clips_like_the_player():
    sh = CommandShaper(J, DT, max_start_deviation=[0.0, 0.1, 0.1])
    chunk = np.array([[5.0, 0.05, 0.3]])
    upper = np.array([10.0, 10.0, 0.08])
    assert sh.gate(chunk, 0.0, 0.0, np.zeros(J), upper=upper) is None  # joint 0 unchecked, 2 clipped
    r = sh.gate(chunk, 0.0, 0.0, np.zeros(J))
    assert r.joint == 2
    assert sh.gate(chunk, 0.0, 0.0, None).joint == -1  # no measured pose: refused
    off = CommandShaper(J, DT, max_start_deviation=[0.0])
    assert off.deviation is None and off.gate(chunk, 0.0, 0.0, None) is None


# -- parameters ---------------------------------------------------------------------------------
@pytest.mark.parametrize("values, zero_ok, words", [
    ([1.0, 2.0], False, "2 entries"), ([-1.0], False, "> 0"), ([0.0], False, "> 0"),
    ([float("nan")], False, "finite"), ([-0.1], True, ">= 0")])
def test_bad_limits_are_refused_with_the_reason(values, zero_ok, words):
    with pytest.raises(ValueError, match=words):
        per_joint(values, J, "x", zero_ok)


def test_one_value_applies_to_every_joint():
    assert np.array_equal(per_joint([2.0], J, "x", False), np.full(J, 2.0))
    assert per_joint([], J, "x", False) is None


# -- measured pose and deadman timing -----------------------------------------------------------
def test_measured_pose_is_given_only_when_fresh():
    mp = MeasuredPose()
    assert mp.fresh(10.0, 0.5) is None
    mp.update(10.0, np.ones(J))
    assert np.array_equal(mp.fresh(10.4, 0.5), np.ones(J))
    assert mp.fresh(10.6, 0.5) is None
    mp.update(11.0, np.array([np.nan, 0, 0]))  # never stored
    assert mp.fresh(10.2, 0.5) is not None


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


def test_deadman_hold_brakes_within_acceleration_then_restarts_from_the_pose():
    sh = CommandShaper(J, DT, [2.0], [20.0])
    dm = Deadman(True, 0.11)
    m = np.zeros(J)
    out, t = [], 0.0
    for i in range(100):
        t = i * DT
        if i < 30 or i >= 60:
            dm.press(True, t)
        go, why = dm.go(t)
        out.append(sh.step(np.full(J, 5.0), m, "" if go else "deadman"))
    holding = [i for i, s in enumerate(out) if s.holding == "deadman"]
    # the last true came at tick 29: the hold starts once 0.11 s passed without one
    assert holding[0] == 35 and holding[-1] == 59
    vals = np.array([s.values[0] for s in out])
    steps = np.diff(vals[:60])
    assert np.all(np.abs(np.diff(steps)) <= 20.0 * DT * DT + EPS)
    assert steps[-1] == 0.0  # at rest before the deadman came back
    assert out[60].start and np.array_equal(out[60].values, m)
