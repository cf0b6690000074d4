"""node/publishers.py's command path: ~/joint_command is written as bytes (robot/command_bytes.py)
when the writer matches the serializer, and what arrives is the message the converter builds,
as long as the middleware makes it (a bag reader checks the size: test/bags/test_record_node.py)."""
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.lifecycle import LifecycleNode  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402

from oxygen_ros.node.outputs import COMMAND_OUTPUTS  # noqa: E402
from oxygen_ros.node.publishers import Publishers  # noqa: E402


@pytest.fixture()
def ctx():
    rclpy.init()
    yield
    rclpy.try_shutdown()


@pytest.mark.parametrize("command_type,field", [("joint_state", "position"),
                                                ("joint_state", "velocity"),
                                                ("float64_array", "position")])
def test_commands_go_out_as_bytes_that_arrive_as_the_converters_message(ctx, command_type, field):
    node = LifecycleNode(f"pubs_{command_type}_{field}", namespace="test_publishers")
    listener = rclpy.create_node("listener")
    try:
        pubs = Publishers(node, command_type, field=field)
        node.trigger_configure()
        node.trigger_activate()
        msg_type = COMMAND_OUTPUTS[command_type].message
        got: list[bytes] = []
        listener.create_subscription(msg_type, pubs.joint_command.topic_name, got.append, 50,
                                     raw=True)
        names = [f"arm_{i}" for i in range(30)]
        assert pubs.command_writer(names) is not None  # the bytes path, not a message per tick
        deadline = time.monotonic() + 5.0
        while pubs.joint_command.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        sent = []
        for k in range(5):
            values, stamp = np.linspace(-1.0, 1.0, 30) * (k + 1), Time(sec=100 + k, nanosec=7 * k)
            pubs.command(names, values, stamp)
            sent.append(pubs.command_message(names, values, stamp))
        deadline = time.monotonic() + 5.0
        while len(got) < 5 and time.monotonic() < deadline:
            rclpy.spin_once(listener, timeout_sec=0.05)
        assert [deserialize_message(raw, msg_type) for raw in got] == sent
        # the size the middleware gives the same message when it serializes it for the wire
        pubs.joint_command.publish(sent[0])
        # other names: another writer; a command of another length goes out as a message
        assert pubs.command_writer(names[:3]).count == 3
        pubs.command(names[:3], np.zeros(4), Time(sec=9))
        deadline = time.monotonic() + 5.0
        while len(got) < 7 and time.monotonic() < deadline:
            rclpy.spin_once(listener, timeout_sec=0.05)
        assert deserialize_message(got[5], msg_type) == sent[0]
        assert all(len(raw) == len(got[5]) for raw in got[:5])
        assert deserialize_message(got[6], msg_type) == pubs.command_message(
            names[:3], np.zeros(4), Time(sec=9))
    finally:
        listener.destroy_node()
        node.destroy_node()
