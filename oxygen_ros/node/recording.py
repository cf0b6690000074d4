"""Recording glue: raw (serialized CDR) subscriptions feeding node/recorder.Recorder.

Recording runs while the node is active: each activation writes a new bag (record.path, or
record.path_<date-time> when that exists). record.topics empty = the node's inputs and outputs.
The callbacks only copy the bytes into the recorder's bounded queue (never blocking); the
recorder's status is the node's `<node>: recorder` diagnostic.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Sequence

from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

from .outputs import recorded_types
from .publishers import head_topic
from .recorder import Recorder, bag_path
# matches reliable and best-effort publishers; deep enough for a burst of text messages
OUTPUT_QOS = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


def default_topics(node, camera_topics: Sequence[str], joint_topic: str,
                   transports: Sequence[str] = (), heads: Sequence[str] = (),
                   command_type: str = "joint_state") -> dict[str, str]:
    """{fully qualified topic: type} of the node's inputs and outputs (`transports`: raw |
    compressed per camera topic, empty = all raw; `heads`: the model's action heads, each with
    its own chunk topic when there are several; the outputs' types: outputs.py's table)."""
    kinds = list(transports) or ["raw"] * len(camera_topics)
    topics = {node.resolve_topic_name(t): "sensor_msgs/msg/CompressedImage" if k == "compressed"
              else "sensor_msgs/msg/Image" for t, k in zip(camera_topics, kinds)}
    topics[node.resolve_topic_name(joint_topic)] = "sensor_msgs/msg/JointState"
    own = recorded_types(command_type)
    topics.update({node.resolve_topic_name(t): ty for t, ty in own.items()})
    if len(heads) > 1:
        topics.update({node.resolve_topic_name(head_topic(h)): own["~/action_chunk"] for h in heads})
    return topics


def message_class(msgtype: str) -> Any:
    pkg, _, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)


class Recording:
    def __init__(self, node, p: dict[str, Any], warn: Callable[[str, str], None],
                 heads: Sequence[str] = ()) -> None:
        self._node = node
        self._warn = warn
        known = default_topics(node, p["camera_topics"], p["joint_state_topic"],
                               p.get("camera_transports", ()), heads, p["command_type"])
        if p["deadman.topic"]:
            known[node.resolve_topic_name(p["deadman.topic"])] = "std_msgs/msg/Bool"
        wanted = [node.resolve_topic_name(t) for t in p["record.topics"]] or list(known)
        self._types = {t: known.get(t) for t in wanted}  # None: looked up in the graph
        self._inputs = {node.resolve_topic_name(t) for t in [*p["camera_topics"], p["joint_state_topic"]]}
        self._path, self._storage = p["record.path"], p["record.storage"]
        self._queue_size = int(p["record.queue_size"])
        self.recorder: Recorder | None = None
        self._subs: dict[str, Any] = {}
        self._error = ""

    def start(self) -> None:
        self.stop()
        path = bag_path(self._path)
        rec = Recorder(path, self._storage, queue_size=self._queue_size)
        try:
            rec.start()
        except Exception as exc:  # noqa: BLE001 - recording is optional: report, keep running
            self._error = f"cannot record to {path}: {type(exc).__name__}: {exc}"
            self._warn("record", self._error)
            return
        self._error = ""
        self.recorder = rec
        self._subscribe()
        self._node.get_logger().info(f"recording {len(self._types)} topics to {path} ({self._storage})")

    def _subscribe(self) -> None:
        """Subscribe to every topic whose type is known (retried from status() for the others)."""
        missing = [t for t in self._types if t not in self._subs]
        if not missing:
            return
        graph = dict(self._node.get_topic_names_and_types())
        for topic in missing:
            msgtype = self._types[topic] or (graph.get(topic) or [None])[0]
            if msgtype is None:
                continue
            try:
                cls = message_class(msgtype)
            except (ImportError, AttributeError, ValueError) as exc:
                self._warn(f"record:{topic}", f"not recording {topic}: type {msgtype}: {exc}")
                continue
            self._types[topic] = msgtype
            qos = qos_profile_sensor_data if topic in self._inputs or msgtype.endswith(("/Image", "/CompressedImage")) else OUTPUT_QOS
            self._subs[topic] = self._node.create_subscription(
                cls, topic, self._callback(topic, msgtype), qos, raw=True)

    def _callback(self, topic: str, msgtype: str):
        clock, rec = self._node.get_clock(), self.recorder

        def cb(data: bytes) -> None:
            rec.offer(topic, msgtype, data, clock.now().nanoseconds)
        return cb

    def stop(self) -> None:
        for sub in self._subs.values():
            self._node.destroy_subscription(sub)
        self._subs.clear()
        rec, self.recorder = self.recorder, None
        if rec is not None:
            rec.stop()
            if rec.failed:
                self._error = rec.status()[1]

    def status(self) -> tuple[str, str, dict[str, Any]]:
        rec = self.recorder
        if rec is None:
            return ("ERROR", self._error, {}) if self._error else ("OK", "not recording (inactive)", {})
        if len(self._subs) < len(self._types) and not rec.failed:
            self._subscribe()
        level, message, values = rec.status()
        waiting = [t for t in self._types if t not in self._subs]
        if waiting:
            values["waiting_for_topics"] = ", ".join(waiting)
        return level, message, values
