"""command_problem: the last check before a command is published (pure)."""
import numpy as np

from oxygen_ros.robot.command_guard import command_problem

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
