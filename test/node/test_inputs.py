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

        def counted(msg, *args, _real=real):
            count["n"] += 1
            return _real(msg, *args)
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


# -- what the inputs lose: rates of the current window, stamp gaps, skew, size and depth bounds ----
def _stamp_at(t: float):
    return conv.sec_to_stamp(t)


def _node_s(node) -> float:
    return node.get_clock().now().nanoseconds * 1e-9


def _paced(node, inputs, n: int, hz: float, keep=lambda i: True, joint_lag: float | None = None,
           cam: bool = True) -> None:
    """n periods of a `hz` publisher stamped on the node clock, in real time; image i (and its
    joint state, stamped `joint_lag` s earlier) arrives when keep(i)."""
    cb = inputs._image_cb(0, "/test/cam", "raw")
    img = conv.encode_image(RNG.integers(0, 256, (8, 8, 3), dtype=np.uint8), "rgb8")
    t0, m0 = _node_s(node), time.monotonic()
    for i in range(n):
        time.sleep(max(0.0, m0 + i / hz - time.monotonic()))
        if not keep(i):
            continue
        if cam:
            img.header.stamp = _stamp_at(t0 + i / hz)
            cb(img)
        if joint_lag is not None:
            js = JointState()
            js.header.stamp = _stamp_at(_node_s(node) - joint_lag)
            js.name, js.position = list(JOINTS), [0.1] * len(JOINTS)
            inputs._joint_cb(js)


def test_received_rate_is_the_current_window_and_falls_when_images_stop(node):
    inputs, _ = _inputs(node)
    _paced(node, inputs, 36, 30.0)
    _, _, values = inputs.status(10.0, True)
    assert values["/test/cam rate_hz"] == pytest.approx(30.0, rel=0.25)
    time.sleep(1.0)  # images stopped 1 s ago: half the window is empty
    _, _, values = inputs.status(10.0, True)
    assert values["/test/cam rate_hz"] < 20.0, values  # was 30 (the last images' rate)
    time.sleep(1.2)
    _paced(node, inputs, 3, 30.0)  # 3 images after a pause: 3 in the window, not "30 Hz"
    _, _, values = inputs.status(10.0, True)
    assert values["/test/cam rate_hz"] < 3.0, values
    assert values["/test/cam received"] == 39
    inputs.destroy()


def test_images_lost_between_publisher_and_node_are_named(node):
    inputs, _ = _inputs(node)
    kept = {i for i in range(60) if i % 6 in (0, 1)}  # 2 of 3 images never arrive
    _paced(node, inputs, 60, 30.0, keep=lambda i: i in kept, joint_lag=0.0)
    level, message, values = inputs.status(10.0, True)
    assert level == "WARN", message
    assert "camera /test/cam received" in message and "Hz published" in message, message
    assert values["/test/cam lost_pct"] == pytest.approx(66.7, abs=6), values
    assert values["/test/cam published_hz"] == pytest.approx(30.0, rel=0.2), values
    inputs.destroy()


def test_joint_states_stamped_behind_the_cameras_are_not_fresh(node):
    inputs, _ = _inputs(node)
    _paced(node, inputs, 20, 30.0, joint_lag=0.8)
    level, message, values = inputs.status(10.0, True)
    assert level == "WARN" and message != "all inputs fresh", message
    assert "/test/joints stamped 0.8" in message and "behind /test/cam" in message, message
    assert values["/test/joints stamp_lag_s"] == pytest.approx(0.8, abs=0.05)
    inputs.destroy()
    inputs, _ = _inputs(node)
    _paced(node, inputs, 20, 30.0, joint_lag=0.0)  # in step: fine
    level, message, _ = inputs.status(10.0, True)
    assert (level, message) == ("OK", "all inputs fresh")
    inputs.destroy()


def _jpeg_of(w: int, h: int) -> bytes:
    import io

    from PIL import Image as PILImage

    buf = io.BytesIO()
    PILImage.new("RGB", (w, h), (90, 120, 30)).save(buf, format="JPEG", quality=30)
    return buf.getvalue()


def test_an_image_over_the_size_bound_is_refused_before_decoding(node, decodes):
    inputs, warnings = _inputs(node, "compressed", "/test/cam/compressed")
    cb = inputs._image_cb(0, "/test/cam/compressed", "compressed")
    msg = conv.encode_compressed(np.zeros((8, 8, 3), np.uint8), "jpeg")
    msg.data = _jpeg_of(8192, 8192)  # ~1 MB of jpeg, 200 MB of pixels
    msg.header.stamp = _now(node)
    cb(msg)
    st = inputs.stats["/test/cam/compressed"]
    assert st.ok == 0 and st.bad == 1 and decodes["n"] == 0
    assert "8192x8192" in st.last_error and "camera_max_side 4096" in st.last_error
    _joints(inputs, node)
    assert inputs.mailbox.get(timeout=0.05) is None  # it never reached the pairing
    level, message, _ = inputs.status(10.0, True)
    assert level == "WARN" and "larger than camera_max_side" in message
    inputs.destroy()
    # the bound is the node's parameter: 640x480 with a bound of 512 is refused too
    small = Inputs(node, ["/test/cam/compressed"], "/test/joints", JOINTS, 0.05, 1.0,
                   lambda k, t: None, transports=("compressed",), max_side=512)
    msg.data = _jpeg_of(640, 480)
    small._image_cb(0, "/test/cam/compressed", "compressed")(msg)
    assert "640x480" in small.stats["/test/cam/compressed"].last_error
    raw = conv.encode_image(np.zeros((600, 8, 3), np.uint8), "rgb8", stamp=_now(node))
    small2 = Inputs(node, ["/test/cam"], "/test/joints", JOINTS, 0.05, 1.0, lambda k, t: None,
                    max_side=512)
    small2._image_cb(0, "/test/cam", "raw")(raw)
    assert "8x600" in small2.stats["/test/cam"].last_error
    small.destroy()
    small2.destroy()


def test_16_bit_images_are_refused_with_the_reason(node, decodes):
    import io

    from PIL import Image as PILImage

    inputs, _ = _inputs(node, "compressed", "/test/cam/compressed")
    buf = io.BytesIO()
    PILImage.fromarray(np.full((48, 64), 40000, np.uint16)).save(buf, format="PNG")  # 16-bit grey
    msg = conv.encode_compressed(np.zeros((8, 8, 3), np.uint8), "png", stamp=_now(node))
    msg.data = buf.getvalue()
    inputs._image_cb(0, "/test/cam/compressed", "compressed")(msg)
    st = inputs.stats["/test/cam/compressed"]
    assert st.ok == 0 and "more than 8 bits per channel" in st.last_error, st.last_error
    assert "64x48 png with 16 bits" in st.last_error
    inputs.destroy()
    raw_inputs, _ = _inputs(node)
    for enc in ("16UC1", "mono16", "rgb16"):
        img = conv.encode_image(np.zeros((4, 4, 3), np.uint8), "rgb8", stamp=_now(node))
        img.encoding, img.step, img.data = enc, 4 * 6, bytes(4 * 4 * 6)
        raw_inputs._image_cb(0, "/test/cam", "raw")(img)
        assert f"encoding {enc!r}" in raw_inputs.stats["/test/cam"].last_error
        assert "more than 8 bits per channel" in raw_inputs.stats["/test/cam"].last_error
    assert decodes["n"] == 0
    raw_inputs.destroy()
