"""The robot's state and commands as separate interfaces (issue 38, item 2): names, kinds, the
checkpoint's sizes, deltas made absolute, measured counterparts, the state read by name."""
from types import SimpleNamespace

import numpy as np
import pytest

from oxygen_ros.engine.model import NormStats
from oxygen_ros.robot.interface import RobotInterface, check_sizes
from oxygen_ros.robot.values import StateMapping, actions_to_model, joint_state_to_vector

# LIBERO's pi0.5: 8 state values (end-effector position, axis-angle, two gripper fingers),
# 7 actions (end-effector deltas, sent to its controller as they are, and the gripper)
LIBERO_STATE = ("eef_x", "eef_y", "eef_z", "eef_rx", "eef_ry", "eef_rz", "finger_l", "finger_r")
LIBERO_COMMANDS = ("eef_x", "eef_y", "eef_z", "eef_rx", "eef_ry", "eef_rz", "gripper")
LIBERO_KINDS = ("velocity",) * 6 + ("position",)


def test_a_joint_robot_from_joint_names_alone():
    robot = RobotInterface.from_params(["a", "b"])
    assert robot.state_names == robot.command_names == ("a", "b")
    assert robot.command_kinds == ("position", "position") and robot.joint_shaped
    assert robot.measured == (True, True) and robot.rates == (False, False)
    assert robot.command_field == "position" and robot.message_problem("joint_state") is None


def test_libero_shaped_robot_fits_its_checkpoint_and_a_mismatch_is_refused():
    robot = RobotInterface(LIBERO_STATE, LIBERO_COMMANDS, LIBERO_KINDS)
    robot.check_model(8, 7, 32)
    assert not robot.joint_shaped and robot.measured == (False,) * 7  # rates; no "gripper" state
    with pytest.raises(ValueError, match=r"7 command_names but the checkpoint's actions have 6"):
        robot.check_model(8, 6, 32)
    with pytest.raises(ValueError, match=r"8 state_names but the checkpoint's state has 7 values"):
        robot.check_model(7, 7, 32)
    with pytest.raises(ValueError, match="7 command_names but the model has action_dim 6"):
        robot.check_model(None, None, 6)
    with pytest.raises(ValueError, match="8 joint_names but the model takes at most 7 state"):
        check_sizes(8, 7, None, None, 7, ("joint_names", "joint_names"))
    # JointState carries one field: a mix of positions and velocities goes as an array
    assert "float64_array" in robot.message_problem("joint_state")
    assert robot.message_problem("float64_array") is None


@pytest.mark.parametrize("kwargs, reason", [
    (dict(command_kinds=("position", "velocity")), "command_kinds has 2 entries for 3"),
    (dict(command_kinds=("torque",)), r"command_kinds \['torque'\] unknown"),
    (dict(command_kinds=("delta",)), r"delta commands \['grip'\] are relative to the state value"),
    (dict(command_names=("a", "a", "b")), r"command_names names \['a'\] more than once"),
    (dict(state_names=("a", "b:speed")), r"state name 'b:speed'"),
    (dict(state_names=()), "state_names must name at least one value"),
])
def test_bad_declarations_are_refused_with_the_reason(kwargs, reason):
    args = dict(state_names=("a", "b"), command_names=("a", "b", "grip"), command_kinds=())
    args.update(kwargs)
    with pytest.raises(ValueError, match=reason):
        RobotInterface(**args)


def test_deltas_are_made_absolute_against_the_observation_state_and_back():
    robot = RobotInterface(("x", "y", "g_l"), ("x", "y", "grip"), ("delta", "delta", "position"))
    state = np.array([1.0, -2.0, 0.03])
    chunk = np.array([[0.1, 0.2, 1.0], [0.3, 0.4, -1.0]], np.float32)
    absolute = robot.absolute(chunk, state)
    np.testing.assert_allclose(absolute, [[1.1, -1.8, 1.0], [1.3, -1.6, -1.0]], atol=1e-6)
    np.testing.assert_allclose(robot.relative(absolute, state), chunk, atol=1e-6)
    np.testing.assert_allclose(robot.measured_commands(state), [1.0, -2.0, np.nan])
    assert robot.measured == (True, True, False)
    with pytest.raises(ValueError, match="need the observation's state"):
        robot.absolute(chunk, None)


def test_state_mapping_unnormalises_then_makes_deltas_absolute():
    """The checkpoint's statistics are of the deltas; the command sent is the absolute pose."""
    robot = RobotInterface(("x", "y", "f1", "f2"), ("x", "y", "grip"), ("delta", "delta", "position"))
    stats = NormStats.quantiles(np.full(4, -1.0), np.ones(4), np.full(3, -0.1), np.full(3, 0.1))
    mapping = StateMapping(3, None, None, stats, robot)
    state = np.array([0.5, 0.25, 0.01, 0.01], np.float32)
    chunk = mapping.to_robot(np.array([[1.0, -1.0, 0.0, 0.0, 0.0]], np.float32), state)
    np.testing.assert_allclose(chunk, [[0.6, 0.15, 0.0]], atol=1e-6)
    # real-time chunking gives executed steps back relative to the NEW observation's state
    back = actions_to_model(mapping, chunk.astype(np.float64), state)
    np.testing.assert_allclose(back, [[1.0, -1.0, 0.0]], atol=1e-5)
    # joint limits normalise only a joint robot's state: an end-effector pose's is left alone
    lim = StateMapping(3, np.full(3, -1.0), np.ones(3), None, robot)
    np.testing.assert_allclose(lim.to_model(state), state)
    joints = StateMapping(2, np.zeros(2), np.full(2, 2.0), None, RobotInterface.from_params(["a", "b"]))
    np.testing.assert_allclose(joints.to_model(np.array([1.0, 2.0])), [0.0, 1.0])


def test_state_values_read_by_name_from_position_velocity_and_effort():
    msg = SimpleNamespace(name=["eef_x", "j1"], position=[0.5, 1.0], velocity=[0.0, -2.0],
                          effort=[])
    np.testing.assert_allclose(joint_state_to_vector(msg, ["j1", "j1:velocity", "eef_x"]),
                               [1.0, -2.0, 0.5])
    with pytest.raises(ValueError, match="2 names but 0 effort values"):
        joint_state_to_vector(msg, ["j1:effort"])
    with pytest.raises(ValueError, match=r"missing joints \['j2:velocity'\]"):
        joint_state_to_vector(msg, ["j2:velocity"])


@pytest.mark.parametrize("state,commands,kinds", [
    (("a", "b", "c"), ("a", "b", "c"), ()),  # every command measured by its own state value
    (("c", "a", "b"), ("a", "b", "c"), ()),  # the same values in another state order
    (("a", "b", "c", "d"), ("a", "b", "c"), ()),  # more state than commands
    (("a", "b", "c"), ("a", "b", "c"), ("position", "velocity", "position")),
])
def test_measured_commands_are_each_commands_state_value_whatever_the_shortcut(state, commands, kinds):
    """The per-tick shortcut (a joint robot: the state as it is) gives what the general mapping
    gives, as float64 in a new array (the caller's state is never aliased)."""
    robot = RobotInterface(state, commands, kinds)
    values = np.arange(1.0, len(state) + 1.0, dtype=np.float32)
    got = robot.measured_commands(values)
    want = [float(values[state.index(c)]) if m else np.nan for c, m in zip(commands, robot.measured)]
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float64 and not np.shares_memory(got, values)
    assert robot.measured_commands(None) is None
