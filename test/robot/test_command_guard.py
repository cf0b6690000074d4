"""command_problem: the last check before a command is published (pure)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from oxygen_ros.robot.command_guard import GUARD_TOL, command_problem

LO, HI = np.full(3, -1.0), np.full(3, 1.0)
V = np.full(3, 1.0)


def test_a_good_command_passes():
    assert command_problem(np.array([0.0, 0.01, -0.02]), np.zeros(3), 0.02, LO, HI, V) is None
    assert command_problem(np.array([5.0, 0, 0]), None, 0.0, None, None, None) is None


def test_non_finite_is_refused_and_named():
    j, what = command_problem(np.array([0.0, np.nan, 0.0]), np.zeros(3), 0.02, LO, HI, V)
    assert j == 1 and "non-finite" in what


def test_outside_the_joint_limits_is_refused_unless_coming_back_in():
    j, what = command_problem(np.array([0.0, 0.0, 1.01]), np.array([0, 0, 0.995]), 0.02, LO, HI, V)
    assert j == 2 and "upper joint limit 1" in what
    # the limits were lowered live below where the joint is: moving back in is allowed
    assert command_problem(np.array([-1.48, 0, 0]), np.array([-1.5, 0, 0]), 0.02, LO, HI, V) is None
    j, what = command_problem(np.array([-1.52, 0, 0]), np.array([-1.5, 0, 0]), 0.02, LO, HI, V)
    assert j == 0 and "lower" in what


def test_a_step_beyond_the_velocity_limit_for_the_elapsed_time_is_refused():
    assert command_problem(np.array([0.0, 0.0, 0.0116]), np.zeros(3), 0.0116, None, None, V) is None
    j, what = command_problem(np.array([0.0, 0.0, 0.02]), np.zeros(3), 0.0116, None, None, V)
    assert j == 2 and "velocity limit 1" in what
    j, _ = command_problem(np.array([0.0, 0.0, 0.01]), np.zeros(3), -0.5, None, None, V)
    assert j == 2  # the clock went back: no time, no step


def test_bad_limits_refuse_rather_than_pass():
    """The check cannot be defeated by a NaN in its own inputs."""
    x, prev = np.array([0.0, 0.0, 0.01]), np.zeros(3)
    assert command_problem(x, prev, 0.02, None, None, np.array([1.0, 1.0, np.nan])) is not None
    assert command_problem(x, prev, float("nan"), None, None, V) is not None
    assert command_problem(x, prev, 0.02, np.array([-1, -1, np.nan]), None, None) is not None


def test_a_command_without_a_first_order_limit_passes_at_any_elapsed_time():
    """Issue 38: the shaper's first-order limit is inf on a command it does not bound (a
    velocity command without an acceleration limit): inf x 0 s must not refuse it."""
    velocity = np.array([1.0, np.inf])
    assert command_problem(np.array([0.0, 5.0]), np.zeros(2), 0.0, None, None, velocity) is None
    assert command_problem(np.array([0.5, 5.0]), np.zeros(2), 0.0, None, None, velocity)[0] == 0


def _reference(values, previous, elapsed, lower, upper, velocity):
    """command_problem as written before its fast paths (every bound compared in full, the
    velocity's inf x 0 kept out by np.where at every elapsed time): the fast paths must give
    exactly what it gives."""
    v = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(v)
    if v.ndim != 1 or bad.any():
        j = int(np.argmax(bad)) if v.ndim == 1 else -1
        return j, f"non-finite value {v[j] if j >= 0 else v!r}"
    prev = None if previous is None else np.asarray(previous, dtype=np.float64)
    for bound, sign, name in ((lower, -1.0, "lower"), (upper, 1.0, "upper")):
        if bound is None:
            continue
        out = sign * (v - bound)
        ok = out <= 0.0
        if prev is not None:
            ok |= out <= sign * (prev - bound) + GUARD_TOL
        if not ok.all():
            j = int(np.argmin(ok))
            return j, f"{v[j]:.4f} beyond the {name} joint limit {bound[j]:g}"
    if velocity is not None and prev is not None:
        step = np.abs(v - prev)
        with np.errstate(invalid="ignore"):
            allowed = np.where(np.isinf(velocity), np.inf, velocity * max(float(elapsed), 0.0))
        allowed = allowed + GUARD_TOL * (1.0 + np.abs(v))
        ok = step <= allowed
        if not ok.all():
            j = int(np.argmin(ok))
            return j, (f"a step of {step[j]:.4f} rad in {max(float(elapsed), 0.0) * 1e3:.1f} ms "
                       f"(velocity limit {velocity[j]:g} rad/s allows {allowed[j]:.4f})")
    return None


_value = st.one_of(st.floats(-3.0, 3.0), st.sampled_from([np.nan, np.inf, -np.inf, 1.0, -1.0]))


@settings(max_examples=400, deadline=None)
@given(data=st.data(), n=st.integers(1, 6))
def test_the_fast_paths_refuse_and_pass_exactly_as_the_full_check(data, n):
    """Every combination the tick can hand it: values, the last command, limits (absent, NaN,
    inf, equal to a value), velocity limits (inf: unbounded) and elapsed 0 or not."""
    vec = lambda: np.array(data.draw(st.lists(_value, min_size=n, max_size=n)))
    maybe = lambda make: data.draw(st.one_of(st.none(), st.builds(make)))
    values, previous = vec(), maybe(vec)
    lower, upper = maybe(vec), maybe(vec)
    velocity = maybe(lambda: np.abs(vec()))
    elapsed = data.draw(st.sampled_from([0.0, 0.005, 0.02, -0.01]))
    if data.draw(st.booleans()) and upper is not None:
        upper = np.where(np.isfinite(values), values, upper)  # a value exactly at its limit
    assert command_problem(values, previous, elapsed, lower, upper, velocity) == \
        _reference(values, previous, elapsed, lower, upper, velocity)
