"""The node's robot outputs are one table (node/outputs.py, issue 28): every command_type the
parameter accepts has a message type and a converter, and the recorder's default types are the
publishers' message types."""
import numpy as np
import pytest

pytest.importorskip("sensor_msgs.msg")
pytest.importorskip("oxygen_ros.msg")

from builtin_interfaces.msg import Time  # noqa: E402

from oxygen_ros.node import params as P  # noqa: E402
from oxygen_ros.node.outputs import (COMMAND_OUTPUTS, COMMAND_TOPIC, OUTPUTS, bag_type,  # noqa: E402
                                     recorded_types)


def test_every_command_type_has_one_output_that_converts():
    assert set(COMMAND_OUTPUTS) == set(P.COMMAND_TYPES)
    for name, out in COMMAND_OUTPUTS.items():
        msg = out.convert(["a", "b"], np.array([0.5, -1.0]), Time(sec=3))
        assert isinstance(msg, out.message), name
    assert COMMAND_OUTPUTS["joint_state"].bag_type == "sensor_msgs/msg/JointState"
    assert COMMAND_OUTPUTS["float64_array"].bag_type == "std_msgs/msg/Float64MultiArray"
    assert list(COMMAND_OUTPUTS["float64_array"].convert(["a"], np.array([2.0]), None).data) == [2.0]


def test_recorded_types_come_from_the_same_table():
    for command_type, out in COMMAND_OUTPUTS.items():
        types = recorded_types(command_type)
        assert types[COMMAND_TOPIC] == out.bag_type
        assert types["~/action_chunk"] == "trajectory_msgs/msg/JointTrajectory"
        assert types["~/memory"] == types["~/answer"] == "oxygen_ros/msg/TextMemory"
        assert types["~/instruction"] == "std_msgs/msg/String"
        assert "~/markers" not in types  # a view of ~/memory and ~/frame_stats, not recorded
        assert {t for t, o in OUTPUTS.items() if o.recorded} <= set(types)
    assert bag_type(OUTPUTS["/diagnostics"].message) == "diagnostic_msgs/msg/DiagnosticArray"
