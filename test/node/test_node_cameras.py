"""End to end with what a robot's camera driver publishes: the installed node subscribed to a
sensor_msgs/CompressedImage topic (camera_transports: compressed), fed 640x480 jpeg at 30 Hz
with joint states; a stretch of truncated jpegs is refused in `oxygen: inputs` while the engine
reports no failing frame, and inference goes on when good frames come back."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import CompressedImage, JointState  # noqa: E402

from oxygen_ros.node import conversions as conv  # noqa: E402

from test_node_e2e import JOINTS, Client, _alive, _status, node_process  # noqa: E402

TOPIC = "/camera/image_raw/compressed"


class JpegClient(Client):
    """Publishes 640x480 jpeg frames on TOPIC (mode "corrupt": truncated ones) + joint states."""

    def __init__(self) -> None:
        super().__init__()
        self.jpeg_pub = self.node.create_publisher(CompressedImage, TOPIC, qos_profile_sensor_data)

    def _feed(self) -> None:
        rng = np.random.default_rng(0)
        base = rng.integers(0, 255, size=(480, 640, 3), dtype=np.uint8)
        frames = [conv.encode_compressed(np.roll(base, 8 * i, axis=1), "jpeg") for i in range(4)]
        i, period, nxt = 0, 1.0 / 30.0, time.monotonic()
        while not self.stop.is_set():
            if self.mode != "off" and hasattr(self, "jpeg_pub"):
                now = self.node.get_clock().now().to_msg()
                msg = frames[i % len(frames)]
                out = CompressedImage(header=msg.header, format=msg.format, data=msg.data)
                out.header.stamp = now
                if self.mode == "corrupt":
                    out.data = bytes(msg.data)[: len(msg.data) // 2]
                self.jpeg_pub.publish(out)
                js = JointState()
                js.header.stamp = now
                js.name = list(JOINTS)
                js.position = [0.3 * math.sin(0.1 * i + j) for j in range(len(JOINTS))]
                self.js_pub.publish(js)
                i += 1
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))


@pytest.fixture(scope="module")
def node_proc(tmp_path_factory):
    with node_process(tmp_path_factory, "-p", f"camera_topics:=[{TOPIC}]",
                      "-p", "camera_transports:=[compressed]") as proc:
        yield proc


@pytest.fixture(scope="module")
def client(node_proc):
    if not rclpy.ok():
        rclpy.init()
    c = JpegClient()
    yield c
    c.close()
    rclpy.try_shutdown()


def _latest(client, suffix, since):
    for diag in reversed(client.snapshot(client.diags, since)):
        st = _status(diag, suffix)
        if st is not None:
            return st
    return None


def test_jpeg_camera_end_to_end_and_corrupt_frames_refused(node_proc, client):
    client.mode = "stream"
    client.ensure("active")
    t0 = time.monotonic()
    client.wait_for(lambda: len(client.snapshot(client.chunks, t0)) >= 5, 90, "action chunks from jpeg")
    t1 = time.monotonic()
    client.wait_for(lambda: (lambda st: st is not None and st.level == DiagnosticStatus.OK)(
        _latest(client, ": inputs", t1)), 10, "inputs OK while jpeg frames stream")
    client.mode = "corrupt"
    t2 = time.monotonic()
    st = client.wait_for(lambda: (lambda s: s if s is not None and "corrupt jpeg image" in s.message
                                  else None)(_latest(client, ": inputs", t2)), 15,
                         "the inputs diagnostic naming the corrupt jpeg")
    assert st.level == DiagnosticStatus.WARN and TOPIC in st.message
    time.sleep(1.0)
    engine = _latest(client, ": engine", t2)
    values = {kv.key: kv.value for kv in engine.values}
    assert values["step_errors"] == "0", values  # refused inputs, never a failing frame
    client.mode = "stream"
    t3 = time.monotonic()
    client.wait_for(lambda: len(client.snapshot(client.chunks, t3)) >= 3, 30, "chunks after recovery")
    _alive(node_proc)
    client.mode = "off"
    client.ensure("inactive")
