"""robot/command_bytes.py on the bytes rclpy really serializes: a writer located in a template
writes, for any stamp and values, bytes that deserialise to the message the converter builds;
a template it cannot read exactly answers None."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("rclpy")
from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from oxygen_ros.node.conversions import joint_command, joint_command_array  # noqa: E402
from oxygen_ros.robot.command_bytes import SENTINEL_STAMP, CommandBytes, sentinel_values  # noqa: E402

NAMES = [f"vx300s_left/joint_{i}" for i in range(7)] + ["gripper", "a", "bb"]
SENTINEL = Time(sec=SENTINEL_STAMP[0], nanosec=SENTINEL_STAMP[1])


def _writer(n: int, field: str = "position") -> CommandBytes:
    w = CommandBytes.locate(serialize_message(joint_command(NAMES[:n], sentinel_values(n), SENTINEL,
                                                            field)), n, stamped=True)
    assert w is not None
    return w


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, len(NAMES)), field=st.sampled_from(["position", "velocity"]),
       sec=st.integers(0, 2**31 - 1), nanosec=st.integers(0, 999_999_999),
       data=st.data())
def test_written_bytes_deserialise_to_the_converters_message(n, field, sec, nanosec, data):
    values = np.array(data.draw(st.lists(st.floats(-1e6, 1e6), min_size=n, max_size=n)))
    got = deserialize_message(_writer(n, field).write(values, sec, nanosec), JointState)
    want = joint_command(NAMES[:n], values, Time(sec=sec, nanosec=nanosec), field)
    assert got == want


def test_an_unstamped_array_command_is_written_too():
    n = 30
    w = CommandBytes.locate(serialize_message(joint_command_array(sentinel_values(n))), n,
                            stamped=False)
    assert w is not None
    values = np.linspace(-2.0, 2.0, n)
    assert deserialize_message(w.write(values), Float64MultiArray) == joint_command_array(values)


def test_a_template_it_cannot_read_exactly_answers_none():
    n = 4
    good = serialize_message(joint_command(NAMES[:n], sentinel_values(n), SENTINEL))
    assert CommandBytes.locate(good, n, stamped=True) is not None
    # big-endian CDR: the values would be written in the wrong byte order
    assert CommandBytes.locate(b"\x00\x00" + good[2:], n, stamped=True) is None
    # the values (or the stamp) twice: which one to write is not known
    sent = sentinel_values(n).astype("<f8").tobytes()
    assert CommandBytes.locate(good + sent, n, stamped=True) is None
    stamp = good[4:12]
    assert CommandBytes.locate(good + stamp, n, stamped=True) is None
    # made with other values or another count: no sentinel found
    other = serialize_message(joint_command(NAMES[:n], np.zeros(n), SENTINEL))
    assert CommandBytes.locate(other, n, stamped=True) is None
    assert CommandBytes.locate(good, n + 1, stamped=True) is None
    # a stamped writer needs the sentinel stamp
    unstamped = serialize_message(joint_command(NAMES[:n], sentinel_values(n), Time(sec=1)))
    assert CommandBytes.locate(unstamped, n, stamped=True) is None


def test_a_command_of_another_size_is_refused():
    w = _writer(3)
    with pytest.raises(ValueError, match="3 values"):
        w.write(np.zeros(4))
