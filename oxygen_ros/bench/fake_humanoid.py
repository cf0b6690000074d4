"""A fake humanoid for the humanoid-io benchmark: it publishes what a humanoid's drivers publish
(30 joint positions at 500 Hz - 1 kHz, three 640x480 cameras at 30 Hz, raw or jpeg) and records
what it really sent, and what arrived from the node (~/joint_command, ~/frame_stats,
/diagnostics), so the node's figures can be checked against the truth.

As on a robot, the joint driver and the camera rig are separate processes (each its own rclpy
context): publishing three 900 KiB images holds that process's interpreter lock for
milliseconds, and a joint sender sharing it paused up to 30 ms (measured: its longest pause
5.9 ms with one camera, 30.3 ms with three), which the node then reported, truthfully, as the
age of the joint state it used. The joint driver runs SCHED_FIFO (`joint_priority`, where
permitted: a robot's joint driver is a real-time process), the cameras at normal priority.

Each stream keeps absolute deadlines (a late message does not shift the following ones; a
stream more than a period late skips ahead instead of bursting) and records, per message, the
monotonic time it was sent and the header stamp it carried; the records come back when the
driver stops. The received messages are only appended to lists in their callbacks (this
process must keep its own rates).
"""
from __future__ import annotations

import math
import multiprocessing as mp
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CAMERAS = ("/head/image_raw", "/wrist_left/image_raw", "/wrist_right/image_raw")
JOINT_TOPIC = "/humanoid/joint_states"
JOINTS = [f"joint_{i:02d}" for i in range(30)]
POLL_S = 0.01  # how often the received commands are drained
JOINT_PRIORITY = 50  # SCHED_FIFO of the joint driver (above the node's control_priority 20)
START_TIMEOUT_S = 60.0


@dataclass
class Stream:
    """One published stream and what was sent (filled from its driver's records at stop)."""

    topic: str
    hz: float
    sent: int = 0
    sent_times: list[float] = field(default_factory=list)  # monotonic, every message
    sent_stamps: list[int] = field(default_factory=list)  # header stamp ns, every message

    def max_pause_ms(self, t0: float, t1: float) -> float:
        """The sender's own longest pause between two messages sent in [t0, t1)."""
        times = [t for t in self.sent_times if t0 <= t < t1]
        return max((b - a for a, b in zip(times, times[1:])), default=float("nan")) * 1e3


def age_floor_ms(stamps_ns, out_ns, used_at_ns) -> np.ndarray:
    """For each time a joint state was used (node clock ns), the age in ms of the newest
    message the sender had published by then (`out_ns`: when its publish() returned; `stamps_ns`
    its header stamp): the youngest joint state any receiver could have used. The node's age at
    use is this plus the delivery and its own waits. nan before the first one."""
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    out = np.asarray(out_ns, dtype=np.int64)
    order = np.argsort(out, kind="stable")
    out, newest = out[order], np.maximum.accumulate(stamps[order]) if len(stamps) else stamps
    used = np.asarray(used_at_ns, dtype=np.int64)
    i = np.searchsorted(out, used, side="right") - 1
    ages = np.full(len(used), np.nan)
    ok = i >= 0
    ages[ok] = (used[ok] - newest[i[ok]]) * 1e-6
    return ages


# -- the drivers (child processes) ----------------------------------------------------------------
def _pace(stop, hz_of, send) -> tuple[list[float], list[int]]:
    """Call send() at hz_of() Hz with absolute deadlines until `stop`; send returns the stamp
    ns it published (None: nothing sent this tick). Returns (monotonic times, stamps)."""
    times: list[float] = []
    stamps: list[int] = []
    nxt = time.monotonic()
    while not stop.is_set():
        st = send()
        if st is not None:
            times.append(time.monotonic())
            stamps.append(st)
        period = 1.0 / hz_of()
        nxt += period
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -period:
            nxt = time.monotonic()
    return times, stamps


def _scheduling(priority: int) -> str:
    if priority <= 0:
        return "normal"
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return f"SCHED_FIFO {priority}"
    except (OSError, AttributeError) as exc:
        return f"normal (SCHED_FIFO {priority} not permitted: {exc})"


def _place(cpus) -> None:
    """The whole process on `cpus` (empty: anywhere) before rclpy starts its threads, which
    inherit it: a robot's drivers kept off the cores given to the model."""
    if cpus:
        os.sched_setaffinity(0, set(cpus))


def _joint_driver(hz, stop, ready, conn, priority: int, cpus=()) -> None:
    _place(cpus)
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState

    # the whole process real-time, as a robot's driver is started (chrt): the middleware's
    # threads inherit it, so a lock one of them holds is not left waiting behind normal work
    sched = _scheduling(priority)
    rclpy.init()
    node = rclpy.create_node("fake_humanoid_joints")
    pub = node.create_publisher(JointState, JOINT_TOPIC, qos_profile_sensor_data)  # a driver's QoS
    js = JointState(name=list(JOINTS), position=[0.0] * len(JOINTS))
    clock = node.get_clock()
    published: list[int] = []  # system ns when publish() returned, every message
    i = 0

    def send() -> int:
        nonlocal i
        i += 1
        js.position = [0.2 * math.sin(0.002 * i + 0.1 * j) for j in range(len(JOINTS))]
        now = clock.now()
        js.header.stamp = now.to_msg()
        pub.publish(js)
        published.append(time.time_ns())
        return now.nanoseconds

    ready.set()
    times, stamps = _pace(stop, lambda: hz.value, send)
    conn.send({JOINT_TOPIC: (times, stamps), "scheduling": sched, "publish_ns": published})
    conn.close()
    node.destroy_node()
    rclpy.try_shutdown()


def _camera_rig(topics: list[str], transport: str, size, hz: float, every, stop, ready, conn,
                cpus=()) -> None:
    _place(cpus)
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import CompressedImage, Image

    rclpy.init()
    node = rclpy.create_node("fake_humanoid_cameras")
    mtype = CompressedImage if transport == "compressed" else Image
    pubs = [node.create_publisher(mtype, t, qos_profile_sensor_data) for t in topics]
    rng = np.random.default_rng(0)
    h, w = size
    # a few pre-encoded frames per camera: encoding is the camera's work, not its driver's
    frames = []
    for _ in topics:
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        frames.append([_frame(np.roll(img, 7 * k, axis=1), transport) for k in range(3)])
    clock = node.get_clock()
    records: dict[str, tuple[list[float], list[int]]] = {t: ([], []) for t in topics}
    tick = 0

    def send() -> int:
        # one thread sends every camera (as a synchronised rig does); the first is the rig's clock
        nonlocal tick
        now = clock.now()
        stamp = now.to_msg()
        for c, pub in enumerate(pubs):
            if tick % every[c]:
                continue
            msg = frames[c][tick % 3]
            msg.header.stamp = stamp
            pub.publish(msg)
            if c:
                records[topics[c]][0].append(time.monotonic())
                records[topics[c]][1].append(now.nanoseconds)
        tick += 1
        return now.nanoseconds

    ready.set()
    records[topics[0]] = _pace(stop, lambda: hz, send)
    conn.send(records)
    conn.close()
    node.destroy_node()
    rclpy.try_shutdown()


def _frame(rgb: np.ndarray, transport: str):
    """One camera message: rgb8, or jpeg through node/conversions.py (which imports the engine:
    seconds, so a raw rig does without it)."""
    if transport != "raw":
        from oxygen_ros.node import conversions as conv

        return conv.encode_compressed(rgb, "jpeg")
    from sensor_msgs.msg import Image

    h, w = rgb.shape[:2]
    return Image(height=h, width=w, encoding="rgb8", is_bigendian=0, step=3 * w,
                 data=np.ascontiguousarray(rgb, dtype=np.uint8).tobytes())


class FakeHumanoid:
    """The joint driver and the camera rig, each a process of its own (spawned: a forked rclpy
    context is not usable), started by start(), stopped (and their records read) by stop()."""

    def __init__(self, joint_hz: float, cameras: int, transport: str, size=(480, 640),
                 camera_hz: float = 30.0, joint_priority: int = JOINT_PRIORITY,
                 cpus: tuple[int, ...] = ()) -> None:
        self.topics = [t + ("/compressed" if transport == "compressed" else "") for t in CAMERAS[:cameras]]
        self.joints = Stream(JOINT_TOPIC, joint_hz)
        self.cams = [Stream(t, camera_hz) for t in self.topics]
        self.joint_scheduling = ""
        self.joint_published_ns: list[int] = []  # system ns when the joint driver's publish() returned
        ctx = mp.get_context("spawn")
        self._ctx = ctx
        self._hz = ctx.Value("d", float(joint_hz))
        self._every = ctx.Array("i", [1] * cameras)  # camera c sends every this many rig ticks
        self._stop = ctx.Event()
        self._ready = [ctx.Event(), ctx.Event()]
        self._pipes = [ctx.Pipe(duplex=False), ctx.Pipe(duplex=False)]
        self._procs = [
            ctx.Process(target=_joint_driver, args=(self._hz, self._stop, self._ready[0],
                                                    self._pipes[0][1], joint_priority, tuple(cpus)),
                       daemon=True),
            ctx.Process(target=_camera_rig, args=(self.topics, transport, tuple(size), camera_hz,
                                                  self._every, self._stop, self._ready[1],
                                                  self._pipes[1][1], tuple(cpus)), daemon=True)]

    @property
    def pids(self) -> dict[str, int | None]:
        """The joint driver's and the camera rig's process ids (None before start)."""
        return {"joint_driver": self._procs[0].pid, "camera_rig": self._procs[1].pid}

    def slow_joints(self, factor: float) -> None:
        self.set_joint_hz(self.joints.hz / float(factor))

    def set_joint_hz(self, hz: float) -> None:
        """The joint driver's rate from its next message on (its deadlines stay absolute)."""
        self._hz.value = float(hz)

    def slow_camera(self, index: int, factor: int) -> None:
        """Camera `index` (not the first: the rig's clock) sends every `factor`-th frame."""
        if index < 1:
            raise ValueError("the first camera paces the rig: slow another one")
        self._every[index] = int(factor)

    def start(self) -> None:
        for p in self._procs:
            p.start()
        for ev, p in zip(self._ready, self._procs):
            if not ev.wait(START_TIMEOUT_S):
                self.stop()
                raise RuntimeError(f"the fake humanoid's {p.name} did not start")

    def stop(self) -> None:
        """Stops the drivers and fills the streams with what they sent (once)."""
        if self._stop.is_set():
            return
        self._stop.set()
        got: dict[str, Any] = {}
        for (recv, _), p in zip(self._pipes, self._procs):
            if p.pid is not None and recv.poll(10.0):
                got.update(recv.recv())
            p.join(5.0)
            if p.is_alive():
                p.kill()
        self.joint_scheduling = got.pop("scheduling", self.joint_scheduling)
        self.joint_published_ns = got.pop("publish_ns", [])
        for s in (self.joints, *self.cams):
            times, stamps = got.get(s.topic, ([], []))
            s.sent, s.sent_times, s.sent_stamps = len(times), list(times), list(stamps)

    def sent_between(self, stream: Stream, t0: float, t1: float) -> int:
        return sum(1 for t in stream.sent_times if t0 <= t < t1)


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
