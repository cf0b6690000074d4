"""The node's outputs: every publisher, created at configure, and the one place that publishes.

The topic publishers are lifecycle publishers (they publish only while the node is active),
except /diagnostics (an inactive node stays visible to aggregators) and ~/answer (every
question's final message is delivered in every state).
Values are turned into messages by conversions; each topic's message type (and the command's
converter, by command_type) comes from outputs.py's table. This module knows message types,
not engine types.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

from oxygen_ros.robot.command_config import clip_to_limits

from . import conversions as conv
from .outputs import COMMAND_OUTPUTS, COMMAND_TOPIC, OUTPUTS

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
# text streams: a burst of questions produces one final per question; keep room for them
TEXT_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                      history=HistoryPolicy.KEEP_LAST)


def head_topic(name: str) -> str:
    """The topic of one action head's chunk (a model with several heads)."""
    return f"~/action_chunk/{name}"


class Publishers:
    def __init__(self, node, command_type: str = "joint_state", heads: Sequence[str] = (),
                 field: str = "position") -> None:
        self._node = node
        mk = node.create_lifecycle_publisher
        # the command's message type and converter by command_type (outputs.COMMAND_OUTPUTS);
        # `field`: the JointState / trajectory field the values go in (RobotInterface.command_field)
        self._command = COMMAND_OUTPUTS[command_type]
        self._field = field
        self.joint_command = mk(self._command.message, COMMAND_TOPIC, RELIABLE)
        msg = {topic: o.message for topic, o in OUTPUTS.items()}
        self.action_chunk = mk(msg["~/action_chunk"], "~/action_chunk", RELIABLE)
        # a model with several action heads (StarVLA): every head's chunk on its own topic
        # (~/action_chunk carries the commanded one, model.action_head)
        self.head_chunks = {name: mk(msg["~/action_chunk"], head_topic(name), RELIABLE)
                            for name in (heads if len(heads) > 1 else ())}
        self.memory = mk(msg["~/memory"], "~/memory", QoSProfile(depth=50))
        # plain publisher: a question's final message (e.g. "aborted: node cleaned up") must
        # reach the asker in every state, and only refusals can happen while inactive
        self.answer = node.create_publisher(msg["~/answer"], "~/answer", TEXT_QOS)
        self.frame_stats = mk(msg["~/frame_stats"], "~/frame_stats", QoSProfile(depth=10))
        self.markers = mk(msg["~/markers"], "~/markers", QoSProfile(depth=1))
        self.diagnostics = node.create_publisher(msg["/diagnostics"], "/diagnostics",
                                                 QoSProfile(depth=10))
        self._lifecycle = (self.joint_command, self.action_chunk, self.memory, self.frame_stats,
                           self.markers, *self.head_chunks.values())

    def destroy(self) -> None:
        for pub in self._lifecycle:
            self._node.destroy_lifecycle_publisher(pub)
        self._node.destroy_publisher(self.answer)
        self._node.destroy_publisher(self.diagnostics)

    # -- per control tick -----------------------------------------------------------------------
    def command(self, names: Sequence[str], values: np.ndarray, stamp: Any) -> None:
        self.joint_command.publish(self.command_message(names, values, stamp))

    def command_message(self, names: Sequence[str], values: np.ndarray, stamp: Any) -> Any:
        """~/joint_command's message for these values (command_type's type and field)."""
        if self._field == "position":
            return self._command.convert(names, values, stamp)
        return self._command.convert(names, values, stamp, self._field)

    # -- per inference frame --------------------------------------------------------------------
    def chunk(self, chunk: np.ndarray, names: Sequence[str], stamp: Any, dt: float,
              frame_id: str, heads: dict[str, np.ndarray] | None = None,
              lower: np.ndarray | None = None, upper: np.ndarray | None = None) -> None:
        """An engine frame's chunk on ~/action_chunk (`stamp`: the source observation's header
        stamp; `dt`: the chunk's step period); `heads`: every head's robot chunk by name (a
        model with several heads), each on its own topic. `lower` / `upper`: the joint limits,
        clipped exactly as ~/joint_command is (command_config.clip_to_limits)."""
        self.action_chunk.publish(conv.chunk_to_trajectory(
            clip_to_limits(chunk, lower, upper), names, stamp, dt, frame_id, self._field))
        for name, values in (heads or {}).items():
            self.head_chunks[name].publish(conv.chunk_to_trajectory(
                clip_to_limits(values, lower, upper), names, stamp, dt, frame_id, self._field))

    def stats(self, out: Any, stamp: Any, action_rate_hz: float, tokens_per_s: float) -> None:
        """An engine frame's ~/frame_stats, once the frame has ended."""
        self.frame_stats.publish(conv.frame_stats(out, stamp, action_rate_hz, tokens_per_s))

    def text(self, update: Any, stamp: Any) -> Any:
        """One request update on ~/memory or ~/answer; returns the message."""
        msg = conv.text_memory(update, stamp)
        (self.memory if msg.kind == "memory" else self.answer).publish(msg)
        return msg

    def refusal(self, prompt: str, reason: str, stamp: Any, request_id: int = 0) -> Any:
        """A final ~/answer for a question that ends without an answer."""
        msg = conv.refusal(prompt, reason, stamp, request_id)
        self.answer.publish(msg)
        return msg

    def markers_text(self, memory_text: str, stats_text: str, stamp: Any, frame_id: str) -> None:
        self.markers.publish(conv.markers(memory_text, stats_text, stamp, frame_id))

    def diagnostic_array(self, statuses: list, stamp: Any) -> None:
        self.diagnostics.publish(conv.diagnostic_array(statuses, stamp))
