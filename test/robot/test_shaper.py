"""CommandShaper, MeasuredPose: limits per elapsed time held against adversarial targets, jitter,
holds, restarts and glitches; the start from the measured pose; the chunk gate; limits that
cannot underflow (pure, no ROS). The deadman and the last check: test_deadman.py,
test_command_guard.py."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oxygen_ros.robot.chunk_player import ChunkPlayer
from oxygen_ros.robot.command_guard import command_problem
from oxygen_ros.robot.deadman import Deadman
from oxygen_ros.robot.shaper import (GLITCH, MAX_ELAPSED_TICKS, CommandShaper, Limits,
                                     MeasuredPose, limit, per_joint)

DT = 0.02
J = 3
EPS = 1e-9


def run(shaper, targets, measured, holds=None):
    """Commands for a sequence of targets (None entries allowed), one nominal period apart."""
    out = []
    for i, t in enumerate(targets):
        s = shaper.step(t, measured, "" if holds is None else holds[i])
        out.append(s)
    return out


def check_limits(values, v_max, a_max, start, v0=None):
    """Every step within v_max*dt (the first one measured from `start`), every change of step
    within a_max*dt^2 (the first from v0 * dt, at rest by default)."""
    pts = np.vstack([start, values])
    steps = np.diff(pts, axis=0)
    assert np.all(np.abs(steps) <= v_max * DT + EPS), np.abs(steps).max() / DT
    if a_max is not None:
        first = np.zeros(J) if v0 is None else np.asarray(v0) * DT
        dsteps = np.diff(np.vstack([first, steps]), axis=0)
        assert np.all(np.abs(dsteps) <= a_max * DT * DT + EPS), np.abs(dsteps).max() / DT / DT


class LaggingRobot:
    """A robot that follows the commands `lag` ticks late (30 ms at 50 Hz: lag 2, rounded up)."""

    def __init__(self, pose, lag: int = 2) -> None:
        self.history = [np.array(pose, dtype=float)] * (lag + 1)

    @property
    def pose(self) -> np.ndarray:
        return self.history[0].copy()

    def command(self, values) -> None:
        self.history = self.history[1:] + [np.array(values, dtype=float)]

    def idle(self) -> None:
        self.history = self.history[1:] + [self.history[-1]]


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
    """The robot stands at `start` (no tracking check): one run from the measured pose, holds
    and restarts included, every step and change of step within the limits."""
    sh = CommandShaper(J, DT, [v], [] if a is None else [a], max_tracking_error=[])
    out = [s for s in run(sh, targets, start, holds) if s is not None]
    if not out:
        return
    values = np.array([s.values for s in out])
    assert np.all(np.isfinite(values))
    assert out[0].start and np.array_equal(out[0].values, start)
    assert not any(s.start for s in out[1:])  # restarts resume, never snap
    check_limits(values[1:], v, a, start)


# -- operations in any order: the invariants ---------------------------------------------------
op = st.one_of(
    st.tuples(st.just("target"), st.lists(finite, min_size=J, max_size=J)),
    st.tuples(st.just("hold"), st.sampled_from(["stale", "deadman", "gate"])),
    st.tuples(st.just("nan"), st.just(0)),
    st.tuples(st.just("reset"), st.just(0)),
    st.tuples(st.just("glitch"), st.floats(-1.0, 1.0)),
    st.tuples(st.just("stale_pose"), st.just(0)),
    st.tuples(st.just("bad_limits"), st.sampled_from([5e-324, 1e-300, 0.0, -1.0, float("nan")])),
    st.tuples(st.just("limits"), st.tuples(
        st.floats(0.01, 10.0), st.one_of(st.none(), st.floats(0.01, 100.0)),
        st.one_of(st.none(), st.floats(0.01, 1.0)))),
)


@settings(max_examples=250, deadline=None)
@given(ops=st.lists(st.tuples(op, st.floats(0.0, 5.0 * DT)), min_size=1, max_size=80),
       pose=st.lists(finite, min_size=J, max_size=J))
def test_any_sequence_of_operations_never_leaves_the_limits(ops, pose):
    """Targets, holds, non-finite targets, activations, measured-pose glitches, stale poses,
    live limit changes (refused ones included), at jittered times (0 to 5 periods apart), with a robot following 2 ticks
    late: every command is finite, every step within the velocity limit in force for the time
    since the previous command, every change of velocity within the acceleration limit (except
    where the velocity limit was lowered live below the current speed: the velocity limit wins),
    and the last check would pass every command."""
    sh = CommandShaper(J, DT, [1.0], [10.0])
    robot = LaggingRobot(pose)
    now, prev, prev_t, prev_v = 0.0, None, None, np.zeros(J)
    vel, acc = np.full(J, 1.0), np.full(J, 10.0)
    for (kind, arg), gap in ops:
        now += gap
        tgt, hold, measured = np.zeros(J), "", robot.pose
        if kind == "target":
            tgt = np.array(arg)
        elif kind == "hold":
            hold = arg
        elif kind == "nan":
            tgt = np.array([np.nan, 1.0, np.inf])
        elif kind == "reset":
            sh.reset()
            prev = None
        elif kind == "glitch":
            measured = measured + arg
        elif kind == "stale_pose":
            measured = None
        elif kind == "bad_limits":  # refused whole: nothing changes
            with pytest.raises(ValueError):
                sh.configure([1.0], [arg], [], [])
        else:
            v, a, track = arg
            sh.configure([v], [] if a is None else [a], [], [] if track is None else [track])
            vel, acc = np.full(J, v), None if a is None else np.full(J, a)
        s = sh.step(tgt, measured, hold, now=now)
        if s is None:
            robot.idle()
            continue
        x = s.values
        assert np.all(np.isfinite(x))
        if prev is None:
            assert s.start and np.array_equal(x, measured)
            prev_v = np.zeros(J)
        else:
            assert not s.start
            h = min(now - prev_t, MAX_ELAPSED_TICKS * DT)
            h = h if h >= 1e-6 else 0.0
            assert np.all(np.abs(x - prev) <= vel * h + EPS), (kind, np.abs(x - prev) / max(h, 1e-9))
            assert command_problem(x, prev, now - prev_t, None, None, vel) is None
            if h > 0:
                v_now = (x - prev) / h
                if acc is not None:
                    ok = (np.abs(v_now - prev_v) <= acc * h + 1e-6) | (np.abs(prev_v) > vel + 1e-9)
                    assert np.all(ok), (kind, v_now, prev_v)
                prev_v = v_now
        prev, prev_t = x, now
        robot.command(x)


# -- deterministic scenarios --------------------------------------------------------------------
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


def test_braking_under_jitter_never_overshoots_a_standing_target():
    """Ticks 0 to 3 periods apart: the braking keeps v h + v^2 / (2 a) <= distance, which any
    later tick spacing can brake (landing exactly with velocity d / h could not, were the next
    tick sooner: up to 2 a dt^2 beyond the target)."""
    for seed in range(5):
        rng = np.random.default_rng(seed)
        for v, a, goal in ((1.0, 2.0, 0.7), (0.5, 100.0, 0.01), (5.0, 100.0, 0.3)):
            sh = CommandShaper(1, DT, [v], [a])
            times = np.cumsum(rng.uniform(0.0, 3 * DT, 1500))
            x = np.array([sh.step(np.array([goal]), np.zeros(1), now=t).values[0] for t in times])
            assert np.all(np.sign(goal) * x <= abs(goal)), (seed, v, a, x.max() - goal)
            assert x[-1] == pytest.approx(goal, abs=1e-9)


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


def test_jittered_ticks_move_at_most_the_limit_per_elapsed_second():
    """Issue 26 item 7: ticks 11.6 ms apart (catching up after late ones) used to move
    v_max * dt each, 1.7x the limit per second. Per elapsed time: never beyond it, and the
    acceleration limit holds per elapsed time too."""
    rng = np.random.default_rng(3)
    gaps = np.where(rng.random(600) < 0.5, 0.0116, rng.uniform(0.0, 0.06, 600))
    times = np.cumsum(gaps)
    sh = CommandShaper(J, DT, [1.0], [10.0])
    goal = np.array([5.0, -5.0, 2.0])
    out = [sh.step(goal if i < 300 else -goal, np.zeros(J), now=t) for i, t in enumerate(times)]
    x = np.array([s.values for s in out])
    h = np.minimum(np.diff(times), MAX_ELAPSED_TICKS * DT)
    speed = np.abs(np.diff(x, axis=0)).max(axis=1) / np.maximum(h, 1e-12)
    assert np.all(np.abs(np.diff(x, axis=0)).max(axis=1) <= 1.0 * h + EPS), speed.max()
    moving = h > 1e-6
    v = np.diff(x, axis=0)[moving] / h[moving, None]
    dv = np.abs(np.diff(v, axis=0)).max(axis=1)
    assert np.all(dv <= 10.0 * h[moving][1:] + 1e-6), (dv / h[moving][1:]).max()
    # and not slower than it: at full speed (ticks 50-150) joint 0 moves v_max * elapsed
    assert x[150, 0] - x[50, 0] == pytest.approx(1.0 * h[50:150].sum(), rel=1e-6)


def test_same_instant_and_backwards_time_do_not_move():
    sh = CommandShaper(J, DT, [1.0], [10.0])
    sh.step(np.ones(J), np.zeros(J), now=1.0)
    a = sh.step(np.ones(J), np.zeros(J), now=1.02).values
    assert np.array_equal(sh.step(np.ones(J), np.zeros(J), now=1.02).values, a)  # same instant
    assert np.array_equal(sh.step(np.ones(J), np.zeros(J), now=0.5).values, a)  # clock went back
    late = sh.step(np.ones(J), np.zeros(J), now=10.0).values  # 9.5 s late: a few periods' worth
    assert np.all(np.abs(late - a) <= 1.0 * MAX_ELAPSED_TICKS * DT + EPS)


# -- start from the measured pose; restarts -----------------------------------------------------
def test_no_command_without_a_measured_pose_then_first_command_is_it():
    sh = CommandShaper(J, DT, [1.0])
    assert sh.step(np.full(J, 2.0), None) is None
    m = np.array([0.8, -0.6, 0.5])
    first = sh.step(np.full(J, 2.0), m)
    assert first.start and np.array_equal(first.values, m)
    second = sh.step(np.full(J, 2.0), m)
    assert np.allclose(np.abs(second.values - m), 1.0 * DT) and second.limited.all()


def test_without_limits_commands_are_the_player_values_after_the_start():
    sh = CommandShaper(J, DT, max_tracking_error=[])
    m = np.zeros(J)
    assert sh.step(np.full(J, 3.0), m).start
    for v in (3.0, -2.0, 1.5):
        s = sh.step(np.full(J, v), m)
        assert np.array_equal(s.values, np.full(J, v)) and not s.limited.any()
    assert sh.limited_ticks == 0


def test_after_a_hold_commands_resume_from_the_last_command_and_its_velocity():
    """Issue 26 item 4: a restart used to set the command to the measured pose at rest (a step
    and a jump in velocity). Now, the robot being where it was commanded, commands go on from
    the last one within the acceleration limit."""
    sh = CommandShaper(J, DT, [1.0], [50.0])
    robot = LaggingRobot(np.zeros(J))
    out = []
    for i in range(60):
        hold = "stale" if 20 <= i < 23 else ""  # a short hold: not yet at rest when it ends
        s = sh.step(np.full(J, 1.0), robot.pose, hold)
        out.append(s)
        robot.command(s.values)
    assert [i for i, s in enumerate(out) if s.holding] == [20, 21, 22]
    assert not any(s.start for s in out[1:])
    x = np.array([s.values for s in out])
    check_limits(x[1:], 1.0, 50.0, x[0])
    assert abs(x[23, 0] - x[22, 0]) > 0  # moving on at once, not from rest at the pose


def test_a_measured_pose_that_jumped_during_a_hold_is_a_glitch_not_a_target():
    """Issue 26 item 4: +0.5 rad in the joint states during a hold became a 0.5 rad one-tick
    step. Now: hold (GLITCH, the joint named), no step beyond the limits; resume when it is
    back within max_tracking_error."""
    sh = CommandShaper(J, DT, [1.0], [10.0], max_tracking_error=[0.2])
    robot = LaggingRobot(np.zeros(J))
    out = []
    for i in range(120):
        hold = "deadman" if 30 <= i < 40 else ""
        m = robot.pose
        if 35 <= i < 60:
            m = m + np.array([0.0, 0.5, 0.0])  # the joint state glitches
        s = sh.step(np.full(J, 2.0), m, hold)
        out.append(s)
        robot.command(s.values)
    x = np.array([s.values for s in out])
    check_limits(x[1:], 1.0, 10.0, x[0])
    held = [i for i, s in enumerate(out) if s.holding == GLITCH]
    assert held == list(range(40, 60))
    assert sh.last_glitch.joint == 1 and sh.last_glitch.distance == pytest.approx(0.5, abs=0.05)
    assert sh.last_glitch.limit == 0.2 and sh.glitches == 20
    assert not out[60].holding and not any(s.start for s in out[1:])


def test_a_robot_that_did_not_follow_holds_until_it_is_back():
    """The commands moved on; the robot stayed (a stopped drive): no snap back to it."""
    sh = CommandShaper(J, DT, [1.0], max_tracking_error=[0.2])
    still = np.zeros(J)
    for _ in range(30):
        last = sh.step(np.full(J, 1.0), still).values  # 0.58 rad away by now
    sh.step(np.full(J, 1.0), still, "stale")
    s = sh.step(np.full(J, 1.0), still)
    assert s.holding == GLITCH and np.array_equal(s.values, last)
    s = sh.step(np.full(J, 1.0), last + 0.1)  # the robot caught up (within 0.2)
    assert not s.holding and np.all(np.abs(s.values - last) <= 1.0 * DT + EPS)


def test_flapping_deadman_with_a_lagging_robot_keeps_every_limit():
    """Issue 26 item 4: a deadman flapping every few ticks restarted at the lagging measured
    pose: acceleration 7-12x the limit, velocity 1.5-1.75x. Now every tick is within both."""
    rng = np.random.default_rng(7)
    sh = CommandShaper(J, DT, [1.0], [10.0])
    dm = Deadman(True, 0.05)
    robot = LaggingRobot(np.zeros(J))
    out, pressed = [], True
    for i in range(1000):
        t = i * DT
        if rng.random() < 0.3:
            pressed = not pressed
        if pressed:
            dm.press(True, t)
        go, _ = dm.go(t)
        goal = np.array([1.5, -1.5, 0.5]) * (1 if (i // 150) % 2 else -1)
        s = sh.step(goal, robot.pose, "" if go else "deadman", now=t)
        out.append(s)
        robot.command(s.values)
    x = np.array([s.values for s in out])
    assert sum(1 for s in out if s.holding == "deadman") > 100
    assert np.abs(x[-1] - x[0]).max() > 0.5  # it did move between the holds
    check_limits(x[1:], 1.0, 10.0, x[0])
    assert not any(s.start for s in out[1:])


def test_reset_forgets_the_last_command():
    sh = CommandShaper(J, DT, [1.0])
    sh.step(np.ones(J), np.zeros(J))
    sh.reset()
    assert sh.step(np.ones(J), None) is None


def test_override_continues_from_what_was_sent_at_rest():
    sh = CommandShaper(J, DT, [1.0], [10.0], max_tracking_error=[0.2])
    for i in range(20):
        sh.step(np.full(J, 1.0), np.zeros(J), now=i * DT)
    sent = np.full(J, 0.05)
    sh.override(sent, 20 * DT)
    s = sh.step(np.full(J, 1.0), sent, now=21 * DT)  # from rest at what was sent
    assert np.allclose(s.values - sent, 10.0 * DT * DT)


# -- limits that cannot underflow; a state that is never non-finite -----------------------------
def test_tiny_acceleration_limit_is_refused_with_the_reason():
    """Issue 26 item 2: joint_acceleration_limits [5e-324] was accepted; a*dt^2 underflowed to
    0 and every command became NaN, forever."""
    sh = CommandShaper(J, DT, [1.0], [10.0])
    with pytest.raises(ValueError, match="per control tick"):
        sh.configure([1.0], [5e-324], [], [0.2])
    with pytest.raises(ValueError, match="joint_velocity_limits"):
        sh.configure([1e-300], [], [], [0.2])
    assert sh.acceleration[0] == 10.0  # nothing changed
    with pytest.raises(ValueError, match="dt\\^2 at 500 Hz"):
        limit("joint_acceleration_limits", [1e-7], J, 1 / 500)
    assert limit("joint_acceleration_limits", [1e-6], J, 1 / 50) is not None


@pytest.mark.parametrize("acc", [5e-324, 1e-300, 1e-200, 1e300])
def test_extreme_limits_that_got_in_anyway_compute_without_underflow(acc):
    """Set behind configure's back: the arithmetic itself stays finite (no 0 * inf)."""
    sh = CommandShaper(J, DT, [1.0])
    sh.limits = Limits(np.full(J, 1.0), np.full(J, acc), None, None)
    for i in range(50):
        s = sh.step(np.full(J, 3.0 if i % 7 else -3.0), np.zeros(J), "stale" if i % 11 == 0 else "",
                    now=i * DT * (1.0 if i % 3 else 0.3))
        assert s is None if i == 0 else np.all(np.isfinite(s.values)), s


def test_configure_replaces_every_limit():
    sh = CommandShaper(J, DT, [1.0], [10.0], [0.3])
    sh.configure([2.0], [], [], [])
    assert sh.velocity[0] == 2.0 and sh.acceleration is None and sh.deviation is None
    assert sh.tracking is None  # all four are given, every time
    with pytest.raises(TypeError):
        sh.configure([2.0], [], [])  # no partial update


def test_a_non_finite_state_is_forgotten_and_commands_start_again():
    sh = CommandShaper(J, DT, [1.0], [10.0])
    sh.step(np.ones(J), np.zeros(J))
    sh._last = np.array([np.nan, 0.0, 0.0])  # whatever put it there
    sh._vel = np.array([np.inf, 0.0, 0.0])
    s = sh.step(np.ones(J), np.full(J, 0.1))
    assert s.start and np.array_equal(s.values, np.full(J, 0.1)) and sh.faults == 2
    assert np.all(np.isfinite(sh.step(np.ones(J), np.full(J, 0.1)).values))


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
    s = sh.step(chunk[1], m)
    assert not s.holding and not s.start and not sh.gate_holding  # resumed from the last command


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


# -- measured pose ------------------------------------------------------------------------------
def test_measured_pose_is_given_only_when_fresh():
    mp = MeasuredPose()
    assert mp.fresh(10.0, 0.5) is None
    mp.update(10.0, np.ones(J))
    assert np.array_equal(mp.fresh(10.4, 0.5), np.ones(J))
    assert mp.fresh(10.6, 0.5) is None
    mp.update(11.0, np.array([np.nan, 0, 0]))  # never stored
    assert mp.fresh(10.2, 0.5) is not None


# -- per command kind (issue 38, item 2: state and commands as separate interfaces) ---------------
def test_velocity_commands_change_within_the_acceleration_limit_and_holds_bring_them_to_zero():
    """A velocity command's value changes by at most its acceleration limit per second (it is a
    velocity: the velocity limit bounds its value in the player's clip); every hold brings it to
    0 within that limit while a position command beside it brakes to a standstill; the first
    command is 0 (at rest), not a measured value it does not have."""
    sh = CommandShaper(2, DT, velocity_limits=[1.0], acceleration_limits=[2.0],
                       rates=(False, True), measured=(True, False))
    first = sh.step(np.array([0.0, 1.0]), np.array([0.3, np.nan]))
    assert first.start and first.values.tolist() == [0.3, 0.0]
    values = [first.values]
    for _ in range(20):
        values.append(sh.step(np.array([0.3, 1.0]), np.array([0.3, np.nan])).values)
    v = np.array(values)
    assert np.all(np.abs(np.diff(v[:, 1])) <= 2.0 * DT + EPS)  # the acceleration limit, per tick
    assert v[-1, 1] == pytest.approx(0.8, abs=1e-9)  # 20 ticks x 0.04: still ramping up
    held = [sh.step(np.array([0.3, 1.0]), None, "deadman").values for _ in range(30)]
    h = np.array([v[-1]] + held)
    assert np.all(np.abs(np.diff(h[:, 1])) <= 2.0 * DT + EPS) and h[-1, 1] == 0.0
    assert np.all(np.diff(np.abs(h[:, 1])) <= EPS)  # towards 0, never past it
    np.testing.assert_allclose(h[:, 0], 0.3)  # the position stands still
    free = CommandShaper(2, DT, rates=(False, True), measured=(True, False))  # no limits at all
    free.step(np.array([0.0, 1.0]), np.array([0.3, np.nan]))
    assert free.step(np.array([0.0, 1.0]), np.array([0.3, np.nan])).values.tolist() == [0.0, 1.0]
    assert free.step(np.array([0.0, 1.0]), None, "stale").values.tolist() == [0.0, 0.0]


def test_limits_hold_for_end_effector_commands_and_a_command_without_a_measured_value():
    """End-effector position commands (measured: the state values of the same names) are
    limited, gated and start from the measured pose like joints; a gripper command without a
    state value of its name starts from its target, is never gated and never a glitch, and is
    still limited from its first command on."""
    sh = CommandShaper(3, DT, velocity_limits=[0.5], max_start_deviation=[0.1],
                       measured=(True, True, False))
    measured = np.array([0.40, -0.10, np.nan])
    assert sh.gate(np.array([[0.45, -0.1, 1.0]]), 0.0, 0.0, measured) is None  # gripper not gated
    refusal = sh.gate(np.array([[0.60, -0.1, 1.0]]), 0.0, 0.0, measured)
    assert refusal is not None and refusal.joint == 0 and refusal.distance == pytest.approx(0.2)
    assert sh.gate(np.array([[0.45, -0.1, -1.0]]), 0.0, 0.0, measured) is None
    first = sh.step(np.array([1.0, 1.0, -1.0]), measured)
    assert first.values.tolist() == [0.40, -0.10, -1.0]  # measured pose; the gripper's target
    out = [first.values] + [sh.step(np.array([1.0, 1.0, 1.0]), measured).values for _ in range(20)]
    steps = np.abs(np.diff(np.array(out), axis=0))
    assert np.all(steps <= 0.5 * DT + EPS) and steps[:, 0].max() == pytest.approx(0.5 * DT)
    assert steps[:, 2].max() == pytest.approx(0.5 * DT)  # the gripper is limited too
    # a restart compares only the measured commands with the measured pose
    sh.step(np.array([1.0, 1.0, 1.0]), measured, "stale")
    resumed = sh.step(np.array([1.0, 1.0, 1.0]), np.array([out[-1][0], out[-1][1], 99.0]))
    assert resumed.holding == ""
