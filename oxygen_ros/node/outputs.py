"""The node's robot outputs, one table: each topic's message type, the converter of the
commanded joint values (per `command_type`) and the type a bag records it under. The publishers
(publishers.py) and the recorder's default topics (recording.py) both read it, so a new output
or command type is added here once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from oxygen_ros.msg import FrameStats, TextMemory

from . import conversions as conv

COMMAND_TOPIC = "~/joint_command"


def bag_type(message: type) -> str:
    """A message class's type name as bags and the ROS graph spell it (pkg/msg/Name)."""
    return f"{message.__module__.split('.')[0]}/msg/{message.__name__}"


@dataclass(frozen=True)
class Output:
    message: type
    recorded: bool = True  # among record.topics' defaults (the node's inputs and outputs)
    # (command names, values in robot units, stamp[, field]) -> message: the command's converter
    convert: Callable[[Sequence[str], np.ndarray, Any], Any] | None = field(default=None)

    @property
    def bag_type(self) -> str:
        return bag_type(self.message)


# ~/joint_command by the command_type parameter (params.COMMAND_TYPES: the same names)
COMMAND_OUTPUTS: dict[str, Output] = {
    "joint_state": Output(JointState, convert=conv.joint_command),
    # forward_command_controller's ~/commands: joint_names order, no stamp
    "float64_array": Output(Float64MultiArray,
                            convert=lambda names, values, stamp, field="position":
                            conv.joint_command_array(values)),
}

# every other topic the node publishes; an action head's ~/action_chunk/<head> is typed as
# ~/action_chunk
OUTPUTS: dict[str, Output] = {
    "~/action_chunk": Output(JointTrajectory),
    "~/memory": Output(TextMemory),
    "~/answer": Output(TextMemory),
    "~/frame_stats": Output(FrameStats),
    "~/markers": Output(MarkerArray, recorded=False),  # a view of ~/memory and ~/frame_stats
    "/diagnostics": Output(DiagnosticArray),
}

# the text the node takes (recorded with its outputs)
TEXT_INPUTS: dict[str, type] = {"~/instruction": String, "~/ask": String}


def recorded_types(command_type: str) -> dict[str, str]:
    """{relative topic: bag type} of the node's own outputs and text inputs that a recording
    holds by default."""
    out = {COMMAND_TOPIC: COMMAND_OUTPUTS[command_type].bag_type}
    out.update({t: o.bag_type for t, o in OUTPUTS.items() if o.recorded})
    out.update({t: bag_type(m) for t, m in TEXT_INPUTS.items()})
    return out
