"""node/inputs.py in-process: camera callbacks only check and keep the message (no decode, a cost
that does not grow with the image); the worker decodes the pair it takes, once; a corrupt jpeg
is refused on its topic and shown in the inputs diagnostic, never a failing frame."""
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

from sensor_msgs.msg import JointState  # noqa: E402

import oxygen_ros.robot.images as images_mod  # noqa: E402
from oxygen_ros.node import conversions as conv  # noqa: E402
from oxygen_ros.node.inference_worker import InferenceWorker  # noqa: E402
from oxygen_ros.node.inputs import Inputs  # noqa: E402

JOINTS = [f"joint_{i}" for i in range(1, 7)]
RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def node():
    context = rclpy.Context()
    rclpy.init(context=context)
    n = rclpy.create_node("oxygen_inputs_test", context=context)
    yield n
    n.destroy_node()
    rclpy.try_shutdown(context=context)


@pytest.fixture
def decodes(monkeypatch):
    """Counts the pixel decodes of robot/images.py (raw and compressed)."""
    count = {"n": 0}
    for name in ("decode_image_numpy", "decode_compressed"):
        real = getattr(images_mod, name)

        def counted(msg, _real=real):
            count["n"] += 1
            return _real(msg)
        monkeypatch.setattr(images_mod, name, counted)
    return count


def _inputs(node, transport="raw", topic="/test/cam"):
    warnings = []
    inputs = Inputs(node, [topic], "/test/joints", JOINTS, 0.05, 1.0,
                    lambda key, text: warnings.append(text), transports=(transport,))
    inputs.open()
    return inputs, warnings


def _now(node):
    return conv.sec_to_stamp(node.get_clock().now().nanoseconds * 1e-9)


def _joints(inputs, node):
    js = JointState()
    js.header.stamp = _now(node)
    js.name, js.position = list(JOINTS), [0.1] * len(JOINTS)
    inputs._joint_cb(js)


def test_callbacks_do_not_decode_and_do_not_cost_more_for_big_images(node, decodes):
    inputs, _ = _inputs(node)
    cb = inputs._image_cb(0, "/test/cam", "raw")
    msgs = {size: [conv.encode_image(RNG.integers(0, 256, (*size, 3), dtype=np.uint8), "bgr8",
                                     pad=4) for _ in range(3)] for size in ((48, 64), (720, 1280))}
    cost = {size: [] for size in msgs}
    for i in range(30):  # interleaved: a load spike hits both sizes alike
        for size, ms in msgs.items():
            msg = ms[i % 3]
            msg.header.stamp = _now(node)
            t0 = time.perf_counter()
            cb(msg)
            cost[size].append(time.perf_counter() - t0)
    assert decodes["n"] == 0 and inputs.stats["/test/cam"].ok == 60
    # the fastest call of each size (robust on a loaded machine): the old callback decoded and
    # area-resized every 1280x720 image (~0.5 s), 5000x its 64x48 cost
    small, big = min(cost[(48, 64)]), min(cost[(720, 1280)])
    assert big <= 3 * small + 3e-4, f"64x48 {small * 1e6:.0f} us, 1280x720 {big * 1e6:.0f} us"
    _joints(inputs, node)
    pair = inputs.mailbox.get(timeout=1.0)
    cams = inputs.decode_pair(pair)  # what the worker does with the pair it takes
    assert decodes["n"] == 1 and cams[0].shape == (720, 1280, 3)
    inputs.destroy()


def test_corrupt_jpeg_is_refused_and_shown_in_the_inputs_diagnostic(node, decodes):
    inputs, warnings = _inputs(node, "compressed", "/test/cam/compressed")
    cb = inputs._image_cb(0, "/test/cam/compressed", "compressed")
    good = conv.encode_compressed(RNG.integers(0, 256, (480, 640, 3), dtype=np.uint8), "jpeg")
    good.header.stamp = _now(node)
    cb(good)
    _joints(inputs, node)
    cams = inputs.decode_pair(inputs.mailbox.get(timeout=1.0))
    assert cams[0].shape == (480, 640, 3)
    level, message, _ = inputs.status(10.0, True)
    assert level == "OK", message
    bad = conv.encode_compressed(RNG.integers(0, 256, (480, 640, 3), dtype=np.uint8), "jpeg")
    bad.data = bytes(bad.data)[: len(bad.data) // 3]  # truncated: passes the cheap checks
    bad.header.stamp = _now(node)
    cb(bad)
    _joints(inputs, node)
    assert inputs.decode_pair(inputs.mailbox.get(timeout=1.0)) is None  # refused, no exception
    level, message, values = inputs.status(10.0, True)
    assert level == "WARN" and "/test/cam/compressed bad input: corrupt jpeg image" in message
    assert values["/test/cam/compressed bad"] == 1 and warnings and "corrupt jpeg" in warnings[-1]
    # not a jpeg at all: refused in the callback already
    png = conv.encode_compressed(np.zeros((4, 4, 3), np.uint8), "png")
    png.format = "jpeg"
    png.header.stamp = _now(node)
    cb(png)
    assert inputs.stats["/test/cam/compressed"].bad == 2
    assert "does not start like a jpeg" in inputs.stats["/test/cam/compressed"].last_error
    inputs.destroy()


def test_worker_skips_a_pair_that_does_not_decode(node):
    """The inference worker's frame(): a refused pair is no step error."""
    from oxygen_ros.robot.images import CameraFrame
    from oxygen_ros.robot.pairing import Pair

    inputs, _ = _inputs(node, "compressed", "/test/cam2/compressed")
    bad = conv.encode_compressed(np.zeros((48, 64, 3), np.uint8), "jpeg")
    bad.data = bytes(bad.data)[:40]
    pair = Pair(stamp=1.0, images=(CameraFrame(bad, "compressed"),), state=np.zeros(6, np.float32),
                header_stamp=bad.header.stamp, image_stamps=(1.0,), state_stamp=1.0)
    worker = InferenceWorker(None, lambda: None, None, inputs.mailbox, None, None, JOINTS, "x", "f",
                             lambda *a: None, node, decode=inputs.decode_pair)
    assert worker.frame(pair) is None and worker.step_errors == 0  # the engine is not reached
    assert inputs.stats["/test/cam2/compressed"].bad == 1
    inputs.destroy()
