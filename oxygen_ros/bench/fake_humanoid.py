"""A fake humanoid for the humanoid-io benchmark: it publishes what a humanoid's drivers publish
(30 joint positions at 500 Hz - 1 kHz, three 640x480 cameras at 30 Hz, raw or jpeg) and records
what it really sent, and what arrived from the node (~/joint_command, ~/frame_stats,
/diagnostics), so the node's figures can be checked against the truth.

Each stream is its own thread with absolute deadlines (a late message does not shift the
following ones; a stream more than a period late skips ahead instead of bursting). The received
messages are only appended to lists in their callbacks (this process must keep its own rates).
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CAMERAS = ("/head/image_raw", "/wrist_left/image_raw", "/wrist_right/image_raw")
JOINT_TOPIC = "/humanoid/joint_states"
JOINTS = [f"joint_{i:02d}" for i in range(30)]
POLL_S = 0.01  # how often the received commands are drained


@dataclass
class Stream:
    """One published stream: its rate (changed live for a slowed stream) and what was sent."""

    topic: str
    hz: float
    sent: int = 0
    sent_times: list[float] = field(default_factory=list)  # monotonic, every message
    every: int = 1  # a camera of the rig sends every this many rig ticks (slowed: 10)


def _paced(stop: threading.Event, stream: Stream, send) -> None:
    nxt = time.monotonic()
    while not stop.is_set():
        send()
        stream.sent += 1
        stream.sent_times.append(time.monotonic())
        nxt += 1.0 / stream.hz
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -1.0 / stream.hz:
            nxt = time.monotonic()


class FakeHumanoid:
    def __init__(self, node, joint_hz: float, cameras: int, transport: str, size=(480, 640),
                 camera_hz: float = 30.0) -> None:
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import CompressedImage, Image, JointState

        from oxygen_ros.node import conversions as conv

        self.node = node
        self.topics = [t + ("/compressed" if transport == "compressed" else "") for t in CAMERAS[:cameras]]
        self.joints = Stream(JOINT_TOPIC, joint_hz)
        self.cams = [Stream(t, camera_hz) for t in self.topics]
        # a driver's usual QoS: sensor data (best effort) for both
        self._js_pub = node.create_publisher(JointState, JOINT_TOPIC, qos_profile_sensor_data)
        mtype = CompressedImage if transport == "compressed" else Image
        self._cam_pubs = [node.create_publisher(mtype, t, qos_profile_sensor_data) for t in self.topics]
        rng = np.random.default_rng(0)
        h, w = size
        # a few pre-encoded frames per camera: encoding is the camera driver's work, not this one's
        self._frames = []
        for _ in self.topics:
            img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            self._frames.append([conv.encode_image(np.roll(img, 7 * k, axis=1), "rgb8")
                                 if transport == "raw" else
                                 conv.encode_compressed(np.roll(img, 7 * k, axis=1), "jpeg")
                                 for k in range(3)])
        self._js = JointState(name=list(JOINTS), position=[0.0] * len(JOINTS))
        self._i = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _send_joints(self) -> None:
        self._i += 1
        phase = 0.002 * self._i
        self._js.position = [0.2 * math.sin(phase + 0.1 * j) for j in range(len(JOINTS))]
        self._js.header.stamp = self.node.get_clock().now().to_msg()
        self._js_pub.publish(self._js)

    def _send_cameras(self) -> None:
        # one thread sends every camera (as a synchronised rig does); the first camera's count
        # is the rig's tick (_paced counts it)
        stamp = self.node.get_clock().now().to_msg()
        tick = self.cams[0].sent
        for c, pub in enumerate(self._cam_pubs):
            if tick % self.cams[c].every:
                continue
            msg = self._frames[c][tick % 3]
            msg.header.stamp = stamp
            pub.publish(msg)
            if c:
                self.cams[c].sent += 1
                self.cams[c].sent_times.append(time.monotonic())

    def slow_camera(self, index: int, factor: int) -> None:
        """Camera `index` (not the first: the rig's clock) sends every `factor`-th frame."""
        if index < 1:
            raise ValueError("the first camera paces the rig: slow another one")
        self.cams[index].every = int(factor)

    def start(self) -> None:
        self._threads = [threading.Thread(target=_paced, args=(self._stop, self.joints, self._send_joints),
                                          daemon=True),
                         threading.Thread(target=_paced, args=(self._stop, self.cams[0], self._send_cameras),
                                          daemon=True)]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2.0)
        for pub in (self._js_pub, *self._cam_pubs):
            self.node.destroy_publisher(pub)

    def sent_between(self, stream: Stream, t0: float, t1: float) -> int:
        return sum(1 for t in list(stream.sent_times) if t0 <= t < t1)


class NodeOutputs:
    """What the benchmark hears from the node: commands (header stamp = the node's tick time),
    frame stats, diagnostics; each callback only appends."""

    def __init__(self, node, name: str = "/oxygen") -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        from oxygen_ros.msg import FrameStats

        self.commands: list[tuple[int, float]] = []  # (header stamp ns, arrival monotonic)
        self.frames: list[tuple[float, Any]] = []
        self.diags: list[tuple[float, dict[str, Any]]] = []  # (monotonic, {status name: (level, msg, values)})
        from oxygen_ros.node.inputs import PolledGroup

        # the commands (200-500 Hz) are drained by a thread of their own every POLL_S, not by
        # this process's executor (a pass per message would load the machine the node runs on)
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        self._cmd_sub = node.create_subscription(JointState, f"{name}/joint_command", lambda m: None,
                                                 qos, callback_group=PolledGroup())
        node.create_subscription(FrameStats, f"{name}/frame_stats", self._frame, 100)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._diag, 10)
        self._stop = threading.Event()
        self._drain = threading.Thread(target=self._drain_commands, daemon=True)
        self._drain.start()

    def _drain_commands(self) -> None:
        sub = self._cmd_sub
        while not self._stop.wait(POLL_S):
            while True:
                with sub.handle:
                    got = sub.handle.take_message(sub.msg_type, sub.raw)
                if got is None:
                    break
                st = got[0].header.stamp
                self.commands.append((st.sec * 10**9 + st.nanosec, time.monotonic()))

    def close(self) -> None:
        self._stop.set()
        self._drain.join(2.0)

    def _frame(self, msg) -> None:
        self.frames.append((time.monotonic(), msg))

    def _diag(self, msg) -> None:
        levels = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}
        out = {}
        for st in msg.status:
            lvl = st.level if isinstance(st.level, int) else int.from_bytes(st.level, "little")
            out[st.name.split(": ", 1)[-1]] = (levels.get(lvl, str(lvl)), st.message,
                                               {kv.key: kv.value for kv in st.values})
        self.diags.append((time.monotonic(), out))

    def clear(self) -> None:
        self.commands.clear()
        self.frames.clear()
        self.diags.clear()
