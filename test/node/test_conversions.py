"""conversions: ROS messages <-> engine values (needs the ROS message packages, no spinning)."""
import math

import numpy as np
import pytest

pytestmark = pytest.mark.ros
pytest.importorskip("sensor_msgs.msg")
conv = pytest.importorskip("oxygen_ros.node.conversions")

from builtin_interfaces.msg import Time  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from oxygen_ros.engine.core.engine import FrameOutput, RequestUpdate  # noqa: E402
from oxygen_ros.robot.images import ENCODINGS, decode_compressed, decode_image_numpy  # noqa: E402
from oxygen_ros.robot.values import StateMapping, joint_state_to_vector  # noqa: E402
from oxygen_ros.engine.core.kv import KVUsage  # noqa: E402

RNG = np.random.default_rng(0)


def rgb(h=6, w=5):
    return RNG.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("enc", ["rgb8", "bgr8", "rgba8", "bgra8"])
@pytest.mark.parametrize("pad", [0, 3])
def test_color_roundtrip_with_row_padding(enc, pad):
    img = rgb()
    msg = conv.encode_image(img, enc, pad=pad)
    assert msg.step == img.shape[1] * ENCODINGS[enc] + pad
    assert np.array_equal(decode_image_numpy(msg), img)


def test_mono8_is_replicated_to_rgb():
    gray = RNG.integers(0, 256, size=(4, 7), dtype=np.uint8)
    msg = conv.encode_image(np.repeat(gray[:, :, None], 3, axis=2), "mono8", pad=1)
    out = decode_image_numpy(msg)
    assert out.shape == (4, 7, 3) and all(np.array_equal(out[:, :, c], gray) for c in range(3))


def test_unknown_encoding_and_wrong_size_raise_naming_it():
    msg = conv.encode_image(rgb(), "rgb8")
    msg.encoding = "yuv422"
    with pytest.raises(ValueError, match="yuv422"):
        conv.decode_image(msg)
    msg = conv.encode_image(rgb(), "rgb8")
    msg.data = bytes(msg.data)[:-1]
    with pytest.raises(ValueError, match="step\\*height"):
        conv.decode_image(msg)
    msg = conv.encode_image(rgb(), "rgb8")
    msg.step = 3
    with pytest.raises(ValueError, match="step"):
        conv.decode_image(msg)


def test_compressed_roundtrip():
    img = rgb(48, 64)
    msg = conv.encode_compressed(img, "png")
    assert msg.format == "png" and np.array_equal(decode_compressed(msg), img)
    jpg = conv.encode_compressed(img, "jpeg")
    assert jpg.format == "jpeg" and decode_compressed(jpg).shape == (48, 64, 3)


@pytest.mark.skipif(not conv.cv_bridge_available(), reason="ROS 2 cv_bridge not importable here")
@pytest.mark.parametrize("enc", ["rgb8", "bgr8", "mono8"])
def test_cv_bridge_path_equals_numpy_path(enc):
    msg = conv.encode_image(rgb(30, 40), enc, pad=4)
    assert np.array_equal(conv.decode_image(msg, use_cv_bridge=True), decode_image_numpy(msg))


def js(names, pos):
    m = JointState()
    m.name, m.position = list(names), [float(p) for p in pos]
    return m


def test_joint_state_mapped_by_name():
    v = joint_state_to_vector(js(["b", "x", "a"], [2, 9, 1]), ["a", "b"])
    assert v.dtype == np.float32 and v.tolist() == [1.0, 2.0]


def test_joint_state_missing_and_nan_named():
    with pytest.raises(ValueError, match=r"missing joints \['c'\]"):
        joint_state_to_vector(js(["a", "b"], [1, 2]), ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"non-finite.*\['b'\]"):
        joint_state_to_vector(js(["a", "b"], [1, math.nan]), ["a", "b"])
    bad = js(["a", "b"], [1])
    with pytest.raises(ValueError, match="2 names but 1 positions"):
        joint_state_to_vector(bad, ["a"])


def test_state_mapping_limits_roundtrip_and_identity():
    m = StateMapping(2, np.array([-2.0, 0.0]), np.array([2.0, 1.0]))
    assert np.allclose(m.to_model([0.0, 0.5]), [0.0, 0.0])
    assert np.allclose(m.to_model([10.0, -10.0]), [5.0, -21.0])  # not clipped (pi0.5 bins -1/255)
    act = np.array([[-1.0, 1.0, 0.3], [0.0, 0.0, 0.3]])
    assert np.allclose(m.to_robot(act), [[-2.0, 1.0], [0.0, 0.5]])
    ident = StateMapping(2)
    assert np.allclose(ident.to_robot(act), act[:, :2])
    with pytest.raises(ValueError):
        StateMapping(3, np.zeros(2), np.ones(2))
    with pytest.raises(ValueError):
        ident.to_robot(np.zeros((4, 1)))


def test_chunk_to_trajectory_times_and_stamp():
    stamp = Time(sec=12, nanosec=345)
    msg = conv.chunk_to_trajectory(np.arange(6.0).reshape(3, 2), ["a", "b"], stamp, dt=0.02)
    assert msg.header.stamp == stamp and msg.joint_names == ["a", "b"]
    assert [p.time_from_start.nanosec for p in msg.points] == [0, 20_000_000, 40_000_000]
    assert list(msg.points[2].positions) == [4.0, 5.0]
    with pytest.raises(ValueError):
        conv.chunk_to_trajectory(np.zeros((3, 3)), ["a", "b"], stamp, 0.02)


def kv():
    return KVUsage(blocks_used=5, blocks_cached=1, blocks_free=10, blocks_total=16, bytes_used=5000,
                   peak_blocks=6, peak_bytes=6000)


def update(kind="memory", final=True):
    return RequestUpdate(id=7, kind=kind, prompt="Memory: what happened?\n", new_tokens=(3, 4),
                         text="a cube", num_tokens=4, is_final=final, frames_spanned=2, birth_frame=11,
                         stamp=1.5, finish_reason="length" if final else None)


def test_text_memory_uses_source_stamp_and_kinds():
    src = Time(sec=1_700_000_000, nanosec=123_456_789)
    m = conv.text_memory(update(), src)
    assert m.header.stamp == src and m.kind == "memory" and m.is_final
    assert (m.request_id, m.token_count, m.frames_spanned, m.source_frame) == (7, 4, 2, 11)
    assert m.finish_reason == "length" and m.text == "a cube"
    a = conv.text_memory(update("question", final=False), src)
    assert a.kind == "answer" and a.finish_reason == "" and not a.is_final


def test_frame_stats_fields():
    out = FrameOutput(frame=3, stamp=1.0, mode="oxygen", k=4, n=12, s=10,
                      actions=np.zeros((10, 8), np.float32), updates=(update(),),
                      timings_ms={"vision_prefill": 1.0, "denoise": 2.0, "decode": 3.0,
                                  "kv": 0.1, "sched": 0.5},
                      frame_ms=7.0, batch_size=3, tokens_this_frame=12, num_waiting=1,
                      num_running=3, kv=kv(), k_chosen=2, target_action_hz=15.0,
                      target_feasible=False)
    stamp = Time(sec=5)
    m = conv.frame_stats(out, stamp, action_rate_hz=9.5, tokens_per_s=100.0)
    assert m.header.stamp == stamp and m.frame == 3 and m.mode == "oxygen"
    assert (m.k, m.n, m.s, m.batch_size, m.tokens_this_frame, m.waiting_requests) == (4, 12, 10, 3, 12, 1)
    assert m.denoise_ms == pytest.approx(2.0) and m.action_rate_hz == pytest.approx(9.5)
    assert m.kv_ms == pytest.approx(0.1) and m.sched_ms == pytest.approx(0.5)
    assert (m.kv_blocks_used, m.kv_blocks_total, m.kv_bytes_used) == (5, 16, 5000)
    assert (m.k_chosen, m.target_action_hz, m.target_feasible) == (2, 15.0, False)


def test_markers_and_diagnostics():
    ma = conv.markers("saw a cube", "stats", Time(sec=1), "base_link")
    assert [m.text for m in ma.markers] == ["saw a cube", "stats"]
    assert all(m.header.frame_id == "base_link" and m.type == m.TEXT_VIEW_FACING for m in ma.markers)
    st = conv.diagnostic_status("oxygen: engine", "WARN", "msg", {"a": 1, "b": 0.5, "c": float("nan")})
    arr = conv.diagnostic_array([st], Time(sec=2))
    assert arr.status[0].level == st.WARN and [kv.key for kv in st.values] == ["a", "b", "c"]
    assert st.values[2].value == "nan"


def test_stamp_helpers():
    t = Time(sec=1_700_000_000, nanosec=999_999_999)
    assert conv.copy_stamp(t) == t
    assert conv.stamp_to_sec(conv.sec_to_stamp(12.25)) == 12.25


def test_joint_command_array_in_joint_names_order():
    msg = conv.joint_command_array(np.array([0.5, -1.25, 3.0], np.float32))
    assert type(msg).__name__ == "Float64MultiArray" and list(msg.data) == [0.5, -1.25, 3.0]


def test_velocity_commands_go_in_the_velocity_fields():
    """Issue 38: velocity commands are JointState.velocity (position stays empty) and a chunk's
    JointTrajectoryPoint.velocities."""
    msg = conv.joint_command(["a", "b"], np.array([0.5, -1.0]), Time(sec=1), "velocity")
    assert list(msg.velocity) == [0.5, -1.0] and list(msg.position) == []
    traj = conv.chunk_to_trajectory(np.array([[0.5, -1.0]]), ["a", "b"], Time(sec=1), 0.1,
                                    field="velocity")
    assert list(traj.points[0].velocities) == [0.5, -1.0] and list(traj.points[0].positions) == []
