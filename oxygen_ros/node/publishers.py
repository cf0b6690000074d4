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
from builtin_interfaces.msg import Time
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message, serialize_message

from oxygen_ros.robot.command_bytes import SENTINEL_STAMP, CommandBytes, sentinel_values
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
        # ~/joint_command as bytes (robot/command_bytes.py): (names, writer or None), per names
        self._writer: tuple[tuple[str, ...], CommandBytes | None] | None = None
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
        """One command on ~/joint_command (the control thread, every tick): written as the
        serialized message when the writer for these names passed its check, else built as a
        message; the bytes on the wire are the same."""
        writer = self.command_writer(names)
        if writer is not None and len(values) == writer.count:
            self.joint_command.publish(writer.write(values, stamp.sec, stamp.nanosec))
        else:
            self.joint_command.publish(self.command_message(names, values, stamp))

    def command_writer(self, names: Sequence[str]) -> CommandBytes | None:
        """The bytes writer of ~/joint_command for these names (made on the first command with
        them), or None: used only when what it writes for a probe deserialises to the probe's
        message and has the size the middleware gives it."""
        key = tuple(names)
        if self._writer is None or self._writer[0] != key:
            self._writer = (key, self._make_writer(key))
        return self._writer[1]

    def _make_writer(self, names: tuple[str, ...]) -> CommandBytes | None:
        n = len(names)
        stamped = hasattr(self._command.message, "header")
        try:
            writer = CommandBytes.locate(self._serialized(
                names, sentinel_values(n), Time(sec=SENTINEL_STAMP[0], nanosec=SENTINEL_STAMP[1])),
                n, stamped)
            if writer is None:
                return None
            probe, stamp = np.linspace(-1.25, 2.5, n), Time(sec=1234, nanosec=5678)
            # the same message and size (the bytes themselves differ where the serializer
            # leaves its alignment padding as it finds it)
            raw, want = writer.write(probe, stamp.sec, stamp.nanosec), self._serialized(
                names, probe, stamp)
            if len(raw) != len(want) or deserialize_message(
                    raw, self._command.message) != self.command_message(names, probe, stamp):
                return None
        except Exception:  # noqa: BLE001 - names a message refuses: commands stay messages
            return None
        return writer

    def _serialized(self, names: tuple[str, ...], values: np.ndarray, stamp: Time) -> bytes:
        """The command's bytes as the middleware sends them. serialize_message's buffer is the
        serializer's size estimate, up to 8 bytes longer than the message (a bag reader refuses
        those: "CDR message size mismatch"), so it is cut to the shortest prefix that still
        deserialises (a shorter one raises: the message's last field ends there)."""
        raw = serialize_message(self.command_message(names, values, stamp))
        size = len(raw)
        while size > 0:
            try:
                deserialize_message(raw[:size - 1], self._command.message)
            except Exception:  # noqa: BLE001 - the middleware's error for a message cut short
                break
            size -= 1
        return raw[:size]

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
