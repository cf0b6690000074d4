"""End to end on stock Fast DDS (no profile file): a 640x480 rgb8 camera at 30 Hz from a second
process (this test's), best effort as sensor-data QoS publishers are. Fast DDS on one machine
loses most of these images (the sender's 512 KiB shared-memory segment is smaller than one
image: docs/cameras.md); the `oxygen: inputs` diagnostic must name it: the received rate, the
publisher's rate and the part lost. Then the same camera from a RELIABLE publisher: with
camera_reliability auto the node subscribes reliable, and the images arrive."""
from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402

from oxygen_ros.node import conversions as conv  # noqa: E402

from test_node_e2e import JOINTS, Client, _alive, _status, node_process  # noqa: E402

TOPIC = "/camera/image_raw"
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


class BigCameraClient(Client):
    """Publishes 640x480 rgb8 at 30 Hz on TOPIC (stamped) + joint states; `reliable` picks the
    image publisher's QoS."""

    def __init__(self) -> None:
        super().__init__()
        self.node.destroy_publisher(self.img_pub)
        self.big_pub = None
        self.sent = 0

    def use(self, reliable: bool) -> None:
        old, self.big_pub = self.big_pub, None
        if old is not None:
            self.node.destroy_publisher(old)
        self.big_pub = self.node.create_publisher(Image, TOPIC,
                                                  RELIABLE if reliable else qos_profile_sensor_data)

    def _feed(self) -> None:
        base = np.random.default_rng(0).integers(0, 255, size=(480, 640, 3), dtype=np.uint8)
        frames = [conv.encode_image(np.roll(base, 8 * i, axis=1), "rgb8") for i in range(3)]
        i, period, nxt = 0, 1.0 / 30.0, time.monotonic()
        while not self.stop.is_set():
            pub = getattr(self, "big_pub", None)
            if self.mode != "off" and pub is not None:
                now = self.node.get_clock().now().to_msg()
                msg = frames[i % len(frames)]
                msg.header.stamp = now
                pub.publish(msg)
                js = JointState()
                js.header.stamp = now
                js.name = list(JOINTS)
                js.position = [0.3 * math.sin(0.1 * i + j) for j in range(len(JOINTS))]
                self.js_pub.publish(js)
                self.sent += 1
                i += 1
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))


@pytest.fixture(scope="module")
def stock_dds():
    saved = os.environ.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)  # stock Fast DDS, both sides
    yield
    if saved is not None:
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = saved


@pytest.fixture(scope="module")
def node_proc(tmp_path_factory, stock_dds):
    with node_process(tmp_path_factory) as proc:
        yield proc


@pytest.fixture(scope="module")
def client(node_proc):
    if not rclpy.ok():
        rclpy.init()
    c = BigCameraClient()
    yield c
    c.close()
    rclpy.try_shutdown()


def _inputs_status(client, since):
    for diag in reversed(client.snapshot(client.diags, since)):
        st = _status(diag, ": inputs")
        if st is not None:
            return st
    return None


def _values(st) -> dict[str, str]:
    return {kv.key: kv.value for kv in st.values}


def test_stock_dds_640x480_loss_is_named_then_a_reliable_publisher_is_matched(node_proc, client):
    client.use(reliable=False)
    client.mode = "stream"
    client.ensure("active")
    time.sleep(3.0)  # discovery, and a full window of the stream
    t0 = time.monotonic()

    def named():
        st = _inputs_status(client, t0)
        return st if st is not None and f"camera {TOPIC} received" in st.message else None
    st = client.wait_for(named, 20, "the inputs diagnostic naming the camera's loss")
    values = _values(st)
    print("best effort:", st.message, {k: v for k, v in values.items() if k.startswith(TOPIC)})
    assert st.level == DiagnosticStatus.WARN
    assert "Hz published" in st.message and "% lost" in st.message
    received, published = float(values[f"{TOPIC} rate_hz"]), float(values[f"{TOPIC} published_hz"])
    assert published > received and float(values[f"{TOPIC} lost_pct"]) >= 10.0, values
    assert values[f"{TOPIC} qos"] == "best effort"
    _alive(node_proc)

    # the same camera from a reliable publisher: matched within a second or two, all arrive
    client.use(reliable=True)
    t1 = time.monotonic()

    def matched():
        st = _inputs_status(client, t1)
        if st is None or _values(st).get(f"{TOPIC} qos") != "reliable":
            return None
        return st if float(_values(st)[f"{TOPIC} rate_hz"]) >= 20.0 else None
    st = client.wait_for(matched, 30, "a reliable subscription receiving the camera at >= 20 Hz")
    print("reliable:", st.message, {k: v for k, v in _values(st).items() if k.startswith(TOPIC)})
    time.sleep(2.5)  # a full window after the switch
    st = _inputs_status(client, time.monotonic() - 1.0) or st
    assert f"camera {TOPIC} received" not in st.message, st.message
    client.mode = "off"
    client.ensure("inactive")
