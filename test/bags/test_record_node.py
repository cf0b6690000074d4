"""Record from a running node (tiny preset, record.enabled) and evaluate that bag (a process test)."""
from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from oxygen_ros.bags.metrics import evaluate  # noqa: E402
from oxygen_ros.bags.reader import read_bag  # noqa: E402
from oxygen_ros.node import conversions as conv  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
JOINTS = [f"joint_{i}" for i in range(1, 7)]


def test_node_records_a_bag_that_oxygen_eval_reads(tmp_path):
    bag = tmp_path / "run"
    cmd = [sys.executable, "-m", "oxygen_ros.cli.node", "--ros-args",
           "--params-file", str(ROOT / "config" / "oxygen.yaml"), "-p", "autostart:=true",
           "-p", "record.enabled:=true", "-p", f"record.path:={bag}", "-p", "model.num_threads:=1",
           "-p", "memory.every_n_frames:=2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("record_test_client", context=ctx)
    chunks: list = []
    node.create_subscription(JointTrajectory, "/oxygen/action_chunk", chunks.append, 10)
    img_pub = node.create_publisher(Image, "/camera/image_raw", qos_profile_sensor_data)
    js_pub = node.create_publisher(JointState, "/joint_states", 10)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    spin = threading.Thread(target=ex.spin, daemon=True)
    spin.start()
    img = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    try:
        deadline, i = time.monotonic() + 60, 0
        t_start, t_first = time.monotonic(), None
        # 20 chunks and at least 2.5 s of recording after the first one: /diagnostics comes at
        # 1 Hz, and on an idle machine the 20 chunks alone take well under a second
        while ((len(chunks) < 20 or t_first is None or time.monotonic() - t_start - t_first < 2.5)
               and time.monotonic() < deadline and proc.poll() is None):
            now = node.get_clock().now().to_msg()
            img_pub.publish(conv.encode_image(np.roll(img, i, axis=1), "rgb8", stamp=now))
            js = JointState()
            js.header.stamp = now
            js.name = list(JOINTS)
            js.position = [0.3 * math.sin(0.1 * i + j) for j in range(len(JOINTS))]
            js_pub.publish(js)
            i += 1
            if chunks and t_first is None:
                t_first = time.monotonic() - t_start
            time.sleep(1 / 30)
        print(f"first chunk after {t_first:.1f} s, 20 chunks after {time.monotonic() - t_start:.1f} s")
        assert len(chunks) >= 20, "the node produced too few action chunks"
    finally:
        t_stop = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            out = proc.communicate(timeout=30)[0]
            print(f"node stopped in {time.monotonic() - t_stop:.1f} s")
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0]
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    assert "recording" in out, out[-3000:]
    data = read_bag(bag)
    assert data.errors == [], data.errors
    for topic in ("/camera/image_raw", "/joint_states", "/oxygen/joint_command", "/oxygen/action_chunk",
                  "/oxygen/frame_stats", "/oxygen/memory", "/diagnostics"):
        assert data.get(topic), f"{topic} not recorded; topics: {sorted(data.topics)}"
    s = evaluate(data).summary
    # the stop can fall between a frame's chunk and its stats: the last frame may be cut
    assert s["action_chunks"] >= 20 and abs(s["frames"] - s["action_chunks"]) <= 1
    assert 40.0 < s["command_rate_hz"] < 60.0  # control_rate_hz 50 (config/oxygen.yaml)
    assert s["memory_finished"] > 0 and s["tokens_per_s"] > 0
    assert s["obs_to_command_ms_p50"] > 0
    names = {st.name for _, arr in data.get("/diagnostics") for st in arr.status}
    assert "oxygen: recorder" in names
