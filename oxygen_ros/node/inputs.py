"""Sensor inputs: camera and joint-state subscriptions, pairing by stamp, per-topic health.

Callbacks only check and store (Pairer); while accepting (the node is active) each good
message offers the newest complete pair to the worker's Mailbox. A camera callback does only
the cheap checks (stamp, encoding or compressed format, declared size against the data length,
and for jpeg / png the size and bit depth from the file's header: robot/images.py) and keeps the
message as received, so its cost does not grow with the image; the worker decodes the frames of
the pair it takes (`decode_pair`), once. Camera topics are sensor_msgs/Image (raw) or
sensor_msgs/CompressedImage (jpeg, png), per topic (`camera_transports`). Bad inputs (a failed
check, an image over `camera_max_side`, a 16-bit image, or a frame that does not decode) are
dropped with a throttled warning and recorded for the diagnostics; never a failing frame.

Time: a message stamped more than `max_offset_s` ahead of or behind the node clock is refused
with the offset as reason (a clock jump on the sender, unsynchronised clocks); it never enters
the pairing buffers, so pairing goes on with the next sanely stamped message. When the node
clock itself jumps back by more than that, the buffers are reset. With use_sim_time and no
/clock yet (time 0), stamped inputs are refused saying so.

Joint states are taken newest-only, never through the executor: their subscription keeps one
message (KEEP_LAST 1) in a callback group no executor waits on (`PolledGroup`), and `poll()` takes
the newest one at the start of every control tick (the control thread: a command always starts
from the newest measured pose, and a 500 Hz - 1 kHz driver costs the node one take per tick,
not one executor pass per message: ~0.25 ms of Python each, measured) and, while the node is
not active (no ticks), from an IDLE_POLL_HZ executor timer. The messages overwritten in between
are counted (the publication sequence numbers), as information. A take is serialized bytes: a
driver's frame and names never change, so after one message deserialised whole and accepted,
each later one of the same layout is read from its bytes (robot/joint_state_bytes.py; the take
of 30 joints: 74 -> 56 us of CPU, oxygen-bench control-tick); any other is deserialised whole.

What each input is worth is said (robot/input_health.py, over the last HEALTH_WINDOW_S):
- joint states, a state stream where only the newest message matters, by freshness: the age of
  the newest joint state when a command (p50 / p99) and an inference used it, and the rate its
  publisher sends at; WARN when it is stale, sends slower than `min_rate_hz` or than half the
  rate it kept before (slowed), or is older than `max_age_s` when used (p99: a late stream, or
  one stamped behind the node clock). Intermediates it dropped are not a problem;
- cameras by loss: the received rate of the current window, what the publisher sent and never
  arrived (publication sequence numbers; without them gaps in the header stamps, and the
  middleware's own message-lost reports), a slowed publisher as above, and the stamp lag; a
  camera whose stamps differ from the joint states' by more than `max_skew_s` is named.
The longest wait of a camera callback behind other work in the executor (arrival in the
middleware -> callback) and the CPU time by kind of work are shown too.
Camera QoS (`reliability`): "auto" subscribes reliable when every publisher of the topic is
reliable (checked once a second: a best-effort subscription to a reliable publisher turns the
link best effort, and Fast DDS then loses most images over 512 KiB on one machine:
docs/cameras.md), else best effort; "reliable" / "best_effort" force one.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Sequence

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.callback_groups import CallbackGroup
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import CompressedImage, Image, JointState

from oxygen_ros.robot.arrays import all_finite
from oxygen_ros.robot.images import (COMPRESSED, DEFAULT_MAX_SIDE, CameraError, CameraFrame,
                                     decode_frames)
from oxygen_ros.robot.input_health import CpuTime, Samples, TopicHealth, Window
from oxygen_ros.robot.joint_state_bytes import JointStateBytes
from oxygen_ros.robot.pairing import Mailbox, Pair, Pairer
from oxygen_ros.robot.shaper import MeasuredPose
from oxygen_ros.robot.values import joint_layout, joint_state_to_vector

from .conversions import sec_to_stamp

BAD_WINDOW_S = 2.0  # a bad message keeps its topic WARN this long
HEALTH_WINDOW_S = 2.0  # rates, losses and lags are of the last this many seconds
LOSS_WARN_FRACTION = 0.1  # a topic losing more of what its publisher sent is a WARN
LOSS_WARN_MIN = 3  # ... and at least this many messages (one stray gap is not a problem)
QOS_CHECK_S = 1.0  # how often "auto" compares a camera's QoS with its publishers'
RELIABILITIES = ("auto", "best_effort", "reliable")
CAMERA_RELIABLE_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE,
                                 history=HistoryPolicy.KEEP_LAST)
# joint states: the newest only (best effort matches reliable and best-effort publishers)
JOINT_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT,
                       history=HistoryPolicy.KEEP_LAST)
IDLE_POLL_HZ = 50.0  # joint states are taken this often while no control tick takes them
SLOWED_FRACTION = 0.5  # a publisher below this part of the rate it kept before has slowed
CPU_KINDS = ("joint_states", "camera_callbacks", "control_ticks", "inference")


class PolledGroup(CallbackGroup):
    """A callback group no executor runs: its subscription is taken by `Inputs.poll`."""

    def can_execute(self, entity: Any) -> bool:
        return False

    def beginning_execution(self, entity: Any) -> bool:
        return False

    def ending_execution(self, entity: Any) -> None:
        pass


def _info(info: Any) -> tuple[int | None, object, int | None]:
    """(publication sequence number, publisher id, reception time in system ns) from rclpy's
    MessageInfo (None where the middleware or a caller gives none)."""
    if not isinstance(info, dict):
        return None, None, None
    gid = info.get("publisher_gid")
    data = gid.get("data") if isinstance(gid, dict) else gid
    try:
        pub = None if data is None else bytes(data)
    except (TypeError, ValueError):
        pub = None
    return info.get("publication_sequence_number"), pub, info.get("received_timestamp")


class Inputs:
    def __init__(self, node, camera_topics: Sequence[str], joint_topic: str,
                 joint_names: Sequence[str], tolerance_s: float, max_offset_s: float,
                 warn: Callable[[str, str], None], transports: Sequence[str] = (),
                 max_side: int = DEFAULT_MAX_SIDE, reliability: str = "auto",
                 max_skew_s: float = 0.25, min_rate_hz: float = 0.0, max_age_s: float = 0.1) -> None:
        if reliability not in RELIABILITIES:
            raise ValueError(f"camera reliability must be one of {RELIABILITIES}, got {reliability!r}")
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
        self.max_side = int(max_side)
        self.max_skew_s = float(max_skew_s)
        self.reliability = reliability
        self.stats: dict[str, TopicHealth] = {}
        self.camera_topics = list(camera_topics)
        self.transports = tuple(transports) or ("raw",) * len(camera_topics)
        self._cams: list[Any] = []  # camera subscriptions, topic order (replaced by "auto")
        self.camera_reliable: list[bool] = []
        for i, topic in enumerate(self.camera_topics):
            self.stats[topic] = TopicHealth(topic, HEALTH_WINDOW_S)
            self.camera_reliable.append(reliability == "reliable")
            self._cams.append(self._camera_subscription(i))
        self.stats[joint_topic] = TopicHealth(joint_topic, HEALTH_WINDOW_S)
        self.min_rate_hz = float(min_rate_hz)  # joint states slower than this: WARN (0: off)
        self.max_age_s = float(max_age_s)  # ... older than this when used (p99): WARN
        self.cpu = CpuTime(CPU_KINDS)
        self.age_at_command = Samples()  # seconds: the newest joint state when a tick took it
        self.age_at_inference = {t: Samples(256) for t in (*self.camera_topics, joint_topic)}
        self.executor_delay = Samples()  # seconds: a camera message's wait for its callback
        # seconds: a taken joint state's stamp -> its arrival in this process's middleware (the
        # part of its age at use that the sender and the transport made)
        self.joint_delivery = Samples()
        self._newest_state: float | None = None  # the newest joint state's stamp (node clock s)
        self._poll_lock = threading.Lock()
        self._polled_at = float("-inf")  # monotonic
        # a take reads the driver's unchanging layout from the bytes (robot/joint_state_bytes.py);
        # `_gather`: where each joint name sits in that layout's positions
        self.joint_bytes = JointStateBytes()
        self._gather: np.ndarray | None = None
        self._joint_sub = node.create_subscription(JointState, joint_topic, lambda m: None,
                                                   JOINT_QOS, callback_group=PolledGroup())
        self._idle_timer = node.create_timer(1.0 / IDLE_POLL_HZ, self._idle_poll)
        self._qos_timer = (node.create_timer(QOS_CHECK_S, self.match_publishers)
                           if reliability == "auto" else None)
        if self._qos_timer is not None:
            self.match_publishers()

    def _events(self, topic: str) -> SubscriptionEventCallbacks:
        def lost(event) -> None:
            self.stats[topic].transport_lost(time.monotonic(), int(event.total_count_change))

        hint = " (camera_reliability)" if topic in self.camera_topics else ""

        def incompatible(event) -> None:
            self._refuse(topic, f"a publisher's QoS is incompatible ({event.last_policy_kind}): "
                         f"nothing arrives from it{hint}")
        return SubscriptionEventCallbacks(message_lost=lost, incompatible_qos=incompatible)

    def _camera_subscription(self, index: int) -> Any:
        topic, transport = self.camera_topics[index], self.transports[index]
        mtype = CompressedImage if transport == COMPRESSED else Image
        qos = CAMERA_RELIABLE_QOS if self.camera_reliable[index] else qos_profile_sensor_data
        cb = self._image_cb(index, topic, transport)
        # two parameters: rclpy then hands the message info (sequence number, arrival time)
        return self._node.create_subscription(mtype, topic, lambda msg, info: cb(msg, info),
                                              qos, event_callbacks=self._events(topic))

    def match_publishers(self) -> None:
        """reliability "auto": subscribe each camera reliable when all its publishers are
        reliable, best effort otherwise (no publisher yet: unchanged)."""
        for i, topic in enumerate(self.camera_topics):
            pubs = self._node.get_publishers_info_by_topic(topic)
            if not pubs:
                continue
            reliable = all(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in pubs)
            if reliable != self.camera_reliable[i]:
                self._node.destroy_subscription(self._cams[i])
                self.camera_reliable[i] = reliable
                self._cams[i] = self._camera_subscription(i)
                self._node.get_logger().info(
                    f"camera {topic}: publishers are {'reliable' if reliable else 'best effort'}: "
                    f"subscribed {'reliable' if reliable else 'best effort'} (camera_reliability auto)")

    def destroy(self) -> None:
        self.accepting = False
        self.mailbox.close()
        if self._qos_timer is not None:
            self._node.destroy_timer(self._qos_timer)
            self._qos_timer = None
        if self._idle_timer is not None:
            self._node.destroy_timer(self._idle_timer)
            self._idle_timer = None
        for sub in (*self._cams, self._joint_sub):
            if sub is not None:
                self._node.destroy_subscription(sub)
        self._cams, self._joint_sub = [], None

    def open(self) -> None:
        self.mailbox.reopen()
        self.accepting = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()  # active: every control tick takes the joint states

    def close(self) -> None:
        self.accepting = False
        self.mailbox.close()
        if self._idle_timer is not None:
            self._idle_timer.reset()

    # -- callbacks (convert + store only) -------------------------------------------------------
    def _stamp_of(self, sec: int, nanosec: int,
                  now: float | None = None) -> tuple[float, Any, str | None, float | None]:
        """(seconds, exact stamp, refusal reason or None, lag: node clock - stamp, None when
        unstamped) of a message stamped `sec`, `nanosec`; `now`: the node clock (s) when the
        caller has just read it (a control tick's take), else read here."""
        now_t = None
        if now is None:
            now_t = self._node.get_clock().now()
            now = now_t.nanoseconds * 1e-9
        if now < self._last_now - self.max_offset_s:  # our clock jumped back (sim reset, ...)
            self.clock_jumps += 1
            self.pairer.reset()
            self._newest_state = None
            self._warn("clock_jump", f"node clock jumped back {self._last_now - now:.2f} s: "
                       "pairing restarted")
        self._last_now = now
        t = sec + nanosec * 1e-9
        if t == 0.0:  # unstamped publisher: use the arrival time
            return now, sec_to_stamp(now) if now_t is None else now_t.to_msg(), None, None
        if now == 0.0:
            return t, None, "no /clock received yet (use_sim_time): the node has no time", None
        off = t - now
        if abs(off) > self.max_offset_s:
            where = "ahead of" if off > 0 else "behind"
            return t, None, (f"stamp {abs(off):.2f} s {where} the node clock "
                             f"(max_stamp_offset_s {self.max_offset_s:g})"), None
        return t, Time(sec=sec, nanosec=nanosec), None, -off

    def _refuse(self, topic: str, reason: str) -> None:
        self.stats[topic].refused(time.monotonic(), reason)
        self._warn(f"bad:{topic}", f"dropping input on {topic}: {reason}")

    def _image_cb(self, index: int, topic: str, transport: str):
        def callback(msg: Any, info: Any = None) -> None:
            cpu0 = time.thread_time()
            try:
                checked(msg, info)
            finally:
                self.cpu.add("camera_callbacks", time.thread_time() - cpu0)

        def checked(msg: Any, info: Any) -> None:
            seq, pub, arrived_ns = _info(info)
            if arrived_ns:  # how long it waited behind other work in the executor
                self.executor_delay.add(time.monotonic(), (time.time_ns() - arrived_ns) * 1e-9)
            t, stamp, reason, lag = self._stamp_of(msg.header.stamp.sec, msg.header.stamp.nanosec)
            if reason:
                self._refuse(topic, reason)
                return
            try:
                frame = CameraFrame.checked(msg, transport, self.max_side)
            except ValueError as exc:
                self._refuse(topic, str(exc))
                return
            self.pairer.add_image(index, t, frame, stamp)
            self.stats[topic].good(time.monotonic(), None if lag is None else t, lag, seq, pub)
            self._offer()
        return callback

    def decode_pair(self, pair: Pair) -> list | None:
        """The pair's camera images (RGB uint8 at each camera's size), decoded now, once; None
        when one does not decode (refused on its topic: throttled warning, diagnostics). The
        worker calls it as its inference starts: the age of each input it uses is noted."""
        now, mono = self._node.get_clock().now().nanoseconds * 1e-9, time.monotonic()
        for topic, t in zip(self.camera_topics, pair.image_stamps):
            self.age_at_inference[topic].add(mono, now - t)
        self.age_at_inference[self.joint_topic].add(mono, now - pair.state_stamp)
        try:
            return decode_frames(pair.images)
        except CameraError as exc:
            self._refuse(self.camera_topics[exc.camera], str(exc))
            return None

    def poll(self, now: float | None = None) -> bool:
        """Take the newest joint state, if one came since the last take (the control thread at
        every tick, else the idle timer); `now` (node clock s, a control tick's time): the age
        of the newest joint state is noted as the age a command used. Whether one came."""
        cpu0 = time.thread_time()
        with self._poll_lock:
            self._polled_at = time.monotonic()
            sub, taken = self._joint_sub, None
            try:
                # KEEP_LAST 1: one take is the newest (one that comes meanwhile waits for the
                # next tick: a second take per tick would cost every tick, for a message a few
                # microseconds newer)
                if sub is not None:
                    with sub.handle:
                        taken = sub.handle.take_message(sub.msg_type, True)  # serialized
            except Exception:  # noqa: BLE001 - destroyed meanwhile (cleanup): nothing to take
                taken = None
            if taken is not None:
                self._joint_bytes_cb(*taken, now=now)
            if now is not None and self._newest_state is not None:
                self.age_at_command.add(self._polled_at, now - self._newest_state)
        self.cpu.add("joint_states", time.thread_time() - cpu0)
        return taken is not None

    def _idle_poll(self) -> None:
        if time.monotonic() - self._polled_at >= 1.0 / IDLE_POLL_HZ:
            self.poll()

    def _joint_bytes_cb(self, raw: bytes, info: Any = None, now: float | None = None) -> None:
        """One serialized joint state taken: read from its bytes when its frame and names are
        the learned ones, else deserialised whole, checked, and its layout learned; `now`: the
        taking tick's node clock (s), None: read when needed."""
        read = self.joint_bytes.read(raw) if self._gather is not None else None
        if read is not None:
            sec, nanosec, positions = read
            vec = positions[self._gather]
            if all_finite(vec):
                self._joint_state(sec, nanosec, vec, info, now)
                return
        msg = deserialize_message(raw, JointState)  # a new layout, or a value to refuse by name
        if self._joint_cb(msg, info):
            fields, _, _, gather = joint_layout(tuple(msg.name), tuple(self._joint_names))
            if fields == ("position",) and self.joint_bytes.learn(raw, msg.position):
                self._gather = gather
                return
        self.joint_bytes.forget()
        self._gather = None

    def _joint_cb(self, msg: JointState, info: Any = None) -> bool:
        """One joint state taken as a message (tests call it directly); whether it was used."""
        s = msg.header.stamp
        try:
            vec = joint_state_to_vector(msg, self._joint_names)
        except ValueError as exc:
            _, _, reason, _ = self._stamp_of(s.sec, s.nanosec)  # a bad stamp is said first
            self._refuse(self.joint_topic, reason or str(exc))
            return False
        return self._joint_state(s.sec, s.nanosec, vec, info)

    def _joint_state(self, sec: int, nanosec: int, vec: np.ndarray, info: Any,
                     now: float | None = None) -> bool:
        seq, pub, arrived_ns = _info(info)
        t, stamp, reason, lag = self._stamp_of(sec, nanosec, now)
        if reason:
            self._refuse(self.joint_topic, reason)
            return False
        if arrived_ns and lag is not None:
            self.joint_delivery.add(time.monotonic(), arrived_ns * 1e-9 - t)
        vec = vec.astype(np.float32, copy=False)  # the slow path's is float32 already
        self.pairer.add_state(t, vec, stamp)
        self.measured.update(t, vec)
        self._newest_state = t if self._newest_state is None else max(self._newest_state, t)
        self.stats[self.joint_topic].good(time.monotonic(), None if lag is None else t, lag, seq, pub)
        self._offer()
        return True

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
        windows: dict[str, Window] = {}
        for topic, st in self.stats.items():
            w = windows[topic] = st.window(now)
            age = None if st.last_ok is None else now - st.last_ok
            state = topic == self.joint_topic
            values[f"{topic} rate_hz"] = round(w.received_hz, 2)  # received, current window
            values[f"{topic} published_hz"] = round(w.published_hz, 2)
            # a state stream taken newest-only drops by design: information, not loss
            what = "dropped" if state else "lost"
            values[f"{topic} {what}_pct"] = round(100.0 * w.lost_fraction, 1)
            values[f"{topic} {what}"] = w.lost  # in the window (sequence numbers, or stamp gaps)
            values[f"{topic} received"] = st.ok  # totals since configure
            values[f"{topic} {what}_total"] = st.dropped_total
            values[f"{topic} transport_lost"] = st.transport_lost_total
            values[f"{topic} counted_by"] = "sequence numbers" if w.sequenced else "stamp gaps"
            values[f"{topic} stamp_lag_s"] = "unknown" if w.lag_s is None else round(w.lag_s, 4)
            values[f"{topic} age_s"] = "never" if age is None else float(age)
            values[f"{topic} bad"] = st.bad
            inference = self.age_at_inference[topic].window(now, HEALTH_WINDOW_S)
            values[f"{topic} age_at_inference_ms"] = _ms(inference)
            if state:
                used = self.age_at_command.window(now, HEALTH_WINDOW_S)
                values[f"{topic} age_at_command_ms"] = _ms(used)
                values[f"{topic} delivery_ms"] = _ms(self.joint_delivery.window(now, HEALTH_WINDOW_S))
            if topic in self.camera_topics:
                i = self.camera_topics.index(topic)
                values[f"{topic} qos"] = "reliable" if self.camera_reliable[i] else "best effort"
            if st.last_error:
                values[f"{topic} last_error"] = st.last_error
            if age is None or age > timeout_s:
                problems.append(f"{topic} stale")
            elif slowed := self._slowed_text(topic, st, w):
                problems.append(slowed)
            elif state and (late := self._age_text(topic, w, used)):
                problems.append(late)
            elif not state and w.lost >= LOSS_WARN_MIN and w.lost_fraction >= LOSS_WARN_FRACTION:
                problems.append(self._loss_text(topic, w))
                if active:
                    self._warn(f"lost:{topic}", problems[-1])  # throttled per topic
            if st.last_bad is not None and now - st.last_bad < BAD_WINDOW_S:
                problems.append(f"{topic} bad input: {st.last_error}")
        for text in self._skew_problems(windows):
            problems.append(text)
            if active:
                self._warn(f"skew:{text.split(' ', 1)[0]}", text)
        delay = self.executor_delay.window(now, HEALTH_WINDOW_S)
        values["executor_delay_ms"] = _ms(delay)  # camera callbacks: arrival -> callback
        values["executor_delay_max_ms"] = "n/a" if delay is None else round(delay[3] * 1e3, 2)
        for kind, total in self.cpu.totals.items():
            values[f"cpu_s {kind}"] = round(total, 4)
        values["dropped_frames"] = self.mailbox.dropped
        values["paired_frames"] = self.mailbox.put_count
        values["clock_jumps"] = self.clock_jumps
        level = "WARN" if problems and active else "OK"
        return level, "; ".join(problems) or "all inputs fresh", values

    def _slowed_text(self, topic: str, st: TopicHealth, w: Window) -> str:
        """A publisher sending slower than it did (below half its best whole-window rate) or,
        for joint states, than `min_rate_hz`; '' when not."""
        what = "camera" if topic in self.camera_topics else "joint states"
        rate = w.published_hz
        if w.seconds < st.window_s:
            return ""  # not a whole window yet
        if topic == self.joint_topic and self.min_rate_hz > 0 and rate < self.min_rate_hz:
            return (f"{what} {topic} sent at {rate:.1f} Hz, below joint_state_min_rate_hz "
                    f"{self.min_rate_hz:g}")
        if st.peak_hz > 0 and rate < SLOWED_FRACTION * st.peak_hz:
            return f"{what} {topic} slowed to {rate:.1f} Hz (it sent {st.peak_hz:.1f} Hz before)"
        return ""

    def _age_text(self, topic: str, w: Window, used: tuple | None) -> str:
        """Joint states older than `max_age_s` when commands used them (p99), or, with no
        command using them (inactive), stamped further behind the node clock; '' when not."""
        if used is not None and used[2] > self.max_age_s:
            return (f"joint states {topic} {used[2] * 1e3:.1f} ms old when used (p99 of the last "
                    f"{HEALTH_WINDOW_S:g} s; joint_state_max_age_s {self.max_age_s:g})")
        if used is None and w.lag_s is not None and w.lag_s > self.max_age_s:
            return (f"joint states {topic} stamped {w.lag_s * 1e3:.1f} ms behind the node clock "
                    f"(joint_state_max_age_s {self.max_age_s:g})")
        return ""

    def _loss_text(self, topic: str, w: Window) -> str:
        where = " (the middleware reported them lost: docs/cameras.md)" if w.transport_lost else ""
        return (f"camera {topic} received {w.received_hz:.1f} Hz of {w.published_hz:.1f} Hz "
                f"published: {100 * w.lost_fraction:.0f}% lost{where}")

    def _skew_problems(self, windows: dict[str, Window]) -> list[str]:
        """Cameras whose stamps lag the joint states' by more than max_skew_s (either way)."""
        joints = windows[self.joint_topic].lag_s
        out = []
        for topic in self.camera_topics:
            cam = windows[topic].lag_s
            if joints is None or cam is None or abs(joints - cam) <= self.max_skew_s:
                continue
            late, early = (self.joint_topic, topic) if joints > cam else (topic, self.joint_topic)
            out.append(f"{late} stamped {abs(joints - cam):.2f} s behind {early} (max_stamp_skew_s "
                       f"{self.max_skew_s:g}): observations pair inputs of different times")
        return out


def _ms(stats: tuple[int, float, float, float] | None) -> str:
    """'p50 / p99' in ms of a Samples window, or 'n/a'."""
    return "n/a" if stats is None else f"{stats[1] * 1e3:.2f} / {stats[2] * 1e3:.2f}"
