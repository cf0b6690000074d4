"""robot/joint_state_bytes.py on the bytes rclpy really serializes: a learned layout reads every
later message of the same frame and names exactly as deserialisation does (padding bytes are
not zeroed by the serializer: they must not decide), and anything else reads as None."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("rclpy")
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from oxygen_ros.robot.joint_state_bytes import JointStateBytes  # noqa: E402


def _msg(names, positions, frame="base", sec=12, nanosec=345, velocity=True):
    m = JointState()
    m.header.stamp.sec, m.header.stamp.nanosec = sec, nanosec
    m.header.frame_id = frame
    m.name = list(names)
    m.position = [float(p) for p in positions]
    if velocity:
        m.velocity = [0.5] * len(names)
    return m


NAMES = [f"vx300s_left/joint_{i}" for i in range(7)] + ["a", "bb", "ccc"]


def _learned(msg) -> JointStateBytes:
    r = JointStateBytes()
    raw = serialize_message(msg)
    assert r.learn(raw, msg.position)
    return r


def test_reads_a_later_message_of_the_same_names_as_deserialisation_does():
    r = _learned(_msg(NAMES, range(10)))
    later = _msg(NAMES, np.linspace(-3, 3, 10), sec=99, nanosec=7, velocity=False)
    got = r.read(serialize_message(later))
    assert got is not None
    sec, nanosec, pos = got
    assert (sec, nanosec) == (99, 7)
    np.testing.assert_array_equal(pos, deserialize_message(serialize_message(later), JointState).position)
    assert r.reads == 1


@pytest.mark.parametrize("change", ["names", "order", "frame", "count"])
def test_other_names_or_frame_read_as_none(change):
    r = _learned(_msg(NAMES, range(10)))
    names, frame = list(NAMES), "base"
    if change == "names":
        names[3] = "vx300s_left/joint_X"
    elif change == "order":
        names[0], names[1] = names[1], names[0]
    elif change == "frame":
        frame = "base2"
    else:
        names = names[:9]
    assert r.read(serialize_message(_msg(names, range(len(names)), frame=frame))) is None


def test_bad_bytes_and_nothing_learned_read_as_none():
    msg = _msg(NAMES, range(10))
    raw = serialize_message(msg)
    assert JointStateBytes().read(raw) is None  # nothing learned
    r = _learned(msg)
    assert r.read(raw[:40]) is None  # ends early
    assert r.read(b"\x00\x00" + raw[2:]) is None  # big-endian: not read here
    assert not JointStateBytes().learn(raw, [9.0] * 10)  # not what the bytes hold: not learned
    assert not JointStateBytes().learn(raw[:30], msg.position)


def test_padding_bytes_do_not_decide():
    msg = _msg(["j0", "joint_1", "x"], [1.0, 2.0, 3.0], frame="ab")
    raw = bytearray(serialize_message(msg))
    r = JointStateBytes()
    assert r.learn(bytes(raw), msg.position)
    # "ab\0" ends at body offset 15: one padding byte before the names' count; flip it
    raw[4 + 15] ^= 0xFF
    got = r.read(bytes(raw))
    assert got is not None and list(got[2]) == [1.0, 2.0, 3.0]
    raw[4 + 16] ^= 0xFF  # the count itself does decide
    assert r.read(bytes(raw)) is None


name = st.text(alphabet="abcdefghij_/0123456789", min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(names=st.lists(name, min_size=1, max_size=12, unique=True),
       other=st.lists(name, min_size=1, max_size=12, unique=True),
       frame=st.text(alphabet="abc_", max_size=6),
       values=st.lists(st.floats(allow_nan=False, width=64), min_size=12, max_size=12),
       stamp=st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 999_999_999)))
def test_a_read_is_always_what_deserialisation_gives(names, other, frame, values, stamp):
    r = _learned(_msg(names, values[:len(names)], frame=frame))
    for n in (names, other):
        m = _msg(n, values[:len(n)], frame=frame, sec=stamp[0], nanosec=stamp[1])
        raw = serialize_message(m)
        got = r.read(raw)
        if n == names:
            assert got is not None
        if got is not None:
            back = deserialize_message(raw, JointState)
            assert list(back.name) == names
            assert got[:2] == stamp
            np.testing.assert_array_equal(got[2], back.position)
