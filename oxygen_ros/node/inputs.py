"""Sensor inputs: camera and joint-state subscriptions, pairing by stamp, per-topic health.

Callbacks only check and store (Pairer); while accepting (the node is active) each good
message offers the newest complete pair to the worker's Mailbox. A camera callback does only
the cheap checks (stamp, encoding or compressed format, declared size against the data length:
robot/images.py) and keeps the message as received, so its cost does not grow with the image;
the worker decodes the frames of the pair it takes (`decode_pair`), once. Camera topics are
sensor_msgs/Image (raw) or sensor_msgs/CompressedImage (jpeg, png), per topic
(`camera_transports`). Bad inputs (a failed check, or a frame that does not decode) are
dropped with a throttled warning and recorded for the diagnostics; never a failing frame.

Time: a message stamped more than `max_offset_s` ahead of or behind the node clock is refused
with the offset as reason (a clock jump on the sender, unsynchronised clocks); it never enters
the pairing buffers, so pairing goes on with the next sanely stamped message. When the node
clock itself jumps back by more than that, the buffers are reset. With use_sim_time and no
/clock yet (time 0), stamped inputs are refused saying so.
"""
from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

from sensor_msgs.msg import CompressedImage, Image, JointState

from . import conversions as conv
from oxygen_ros.robot.images import COMPRESSED, CameraError, CameraFrame, decode_frames
from oxygen_ros.robot.pairing import Mailbox, Pair, Pairer
from oxygen_ros.robot.rates import recent_rate
from oxygen_ros.robot.shaper import MeasuredPose

BAD_WINDOW_S = 2.0  # a bad message keeps its topic WARN this long


@dataclass
class InputStats:
    """Health of one input topic (for diagnostics)."""

    topic: str
    ok: int = 0
    bad: int = 0
    last_ok: float | None = None  # monotonic seconds
    last_bad: float | None = None
    last_error: str = ""
    times: collections.deque = field(default_factory=lambda: collections.deque(maxlen=64))

    def good(self, now: float) -> None:
        self.ok += 1
        self.last_ok = now
        self.times.append(now)

    def refused(self, now: float, reason: str) -> None:
        self.bad += 1
        self.last_bad = now
        self.last_error = reason

    def rate(self, now: float) -> float:
        return recent_rate(self.times, now)


class Inputs:
    def __init__(self, node, camera_topics: Sequence[str], joint_topic: str,
                 joint_names: Sequence[str], tolerance_s: float, max_offset_s: float,
                 warn: Callable[[str, str], None], transports: Sequence[str] = ()) -> None:
        self._node = node
        self._warn = warn
        self._joint_names = list(joint_names)
        self.joint_topic = joint_topic
        self.pairer = Pairer(len(camera_topics), tolerance_s=tolerance_s)
        self.measured = MeasuredPose()  # newest joint position: where commands start from
        self.mailbox: Mailbox[Pair] = Mailbox()
        self.accepting = False  # offer pairs to the worker (active only)
        self.max_offset_s = float(max_offset_s)
        self._last_now = float("-inf")
        self.clock_jumps = 0
        self.stats: dict[str, InputStats] = {}
        self._subs: list[Any] = []
        self.camera_topics = list(camera_topics)
        self.transports = tuple(transports) or ("raw",) * len(camera_topics)
        for i, (topic, transport) in enumerate(zip(camera_topics, self.transports)):
            self.stats[topic] = InputStats(topic)
            mtype = CompressedImage if transport == COMPRESSED else Image
            self._subs.append(node.create_subscription(
                mtype, topic, self._image_cb(i, topic, transport), qos_profile_sensor_data))
        self.stats[joint_topic] = InputStats(joint_topic)
        # best effort matches reliable and best-effort publishers (drivers use either)
        js_qos = QoSProfile(depth=20, reliability=ReliabilityPolicy.BEST_EFFORT,
                            history=HistoryPolicy.KEEP_LAST)
        self._subs.append(node.create_subscription(JointState, joint_topic, self._joint_cb, js_qos))

    def destroy(self) -> None:
        self.accepting = False
        self.mailbox.close()
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._subs.clear()

    def open(self) -> None:
        self.mailbox.reopen()
        self.accepting = True

    def close(self) -> None:
        self.accepting = False
        self.mailbox.close()

    # -- callbacks (convert + store only) -------------------------------------------------------
    def _stamp_of(self, header) -> tuple[float, Any, str | None]:
        """(seconds, exact stamp, refusal reason or None)."""
        now_t = self._node.get_clock().now()
        now = now_t.nanoseconds * 1e-9
        if now < self._last_now - self.max_offset_s:  # our clock jumped back (sim reset, ...)
            self.clock_jumps += 1
            self.pairer.reset()
            self._warn("clock_jump", f"node clock jumped back {self._last_now - now:.2f} s: "
                       "pairing restarted")
        self._last_now = now
        t = conv.stamp_to_sec(header.stamp)
        if t == 0.0:  # unstamped publisher: use the arrival time
            return now, now_t.to_msg(), None
        if now == 0.0:
            return t, None, "no /clock received yet (use_sim_time): the node has no time"
        off = t - now
        if abs(off) > self.max_offset_s:
            where = "ahead of" if off > 0 else "behind"
            return t, None, (f"stamp {abs(off):.2f} s {where} the node clock "
                             f"(max_stamp_offset_s {self.max_offset_s:g})")
        return t, conv.copy_stamp(header.stamp), None

    def _refuse(self, topic: str, reason: str) -> None:
        self.stats[topic].refused(time.monotonic(), reason)
        self._warn(f"bad:{topic}", f"dropping input on {topic}: {reason}")

    def _image_cb(self, index: int, topic: str, transport: str):
        def callback(msg: Any) -> None:
            t, stamp, reason = self._stamp_of(msg.header)  # the cheap checks only
            if reason:
                self._refuse(topic, reason)
                return
            try:
                frame = CameraFrame.checked(msg, transport)
            except ValueError as exc:
                self._refuse(topic, str(exc))
                return
            self.pairer.add_image(index, t, frame, stamp)
            self.stats[topic].good(time.monotonic())
            self._offer()
        return callback

    def decode_pair(self, pair: Pair) -> list | None:
        """The pair's camera images (RGB uint8 at each camera's size), decoded now, once; None
        when one does not decode (refused on its topic: throttled warning, diagnostics)."""
        try:
            return decode_frames(pair.images)
        except CameraError as exc:
            self._refuse(self.camera_topics[exc.camera], str(exc))
            return None

    def _joint_cb(self, msg: JointState) -> None:
        t, stamp, reason = self._stamp_of(msg.header)
        if reason:
            self._refuse(self.joint_topic, reason)
            return
        try:
            vec = conv.joint_state_to_vector(msg, self._joint_names)
        except ValueError as exc:
            self._refuse(self.joint_topic, str(exc))
            return
        self.pairer.add_state(t, vec, stamp)
        self.measured.update(t, vec)
        self.stats[self.joint_topic].good(time.monotonic())
        self._offer()

    def _offer(self) -> None:
        if not self.accepting:
            return
        pair = self.pairer.newest_pair()
        if pair is not None:
            self.mailbox.put(pair)

    # -- diagnostics ----------------------------------------------------------------------------
    def status(self, timeout_s: float, active: bool, extra: Sequence[str] = ()
               ) -> tuple[str, str, dict[str, Any]]:
        """(level, message, values) of the inputs over the last seconds; `extra`: problems of
        other inputs (refused text)."""
        now = time.monotonic()
        problems, values = list(extra), {}
        for topic, st in self.stats.items():
            age = None if st.last_ok is None else now - st.last_ok
            values[f"{topic} rate_hz"] = float(st.rate(now))
            values[f"{topic} age_s"] = "never" if age is None else float(age)
            values[f"{topic} bad"] = st.bad
            if st.last_error:
                values[f"{topic} last_error"] = st.last_error
            if age is None or age > timeout_s:
                problems.append(f"{topic} stale")
            if st.last_bad is not None and now - st.last_bad < BAD_WINDOW_S:
                problems.append(f"{topic} bad input: {st.last_error}")
        values["dropped_frames"] = self.mailbox.dropped
        values["paired_frames"] = self.mailbox.put_count
        values["clock_jumps"] = self.clock_jumps
        level = "WARN" if problems and active else "OK"
        return level, "; ".join(problems) or "all inputs fresh", values
