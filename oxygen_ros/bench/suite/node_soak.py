"""Soak the node: does its memory grow while it runs for minutes? (Not a CI test.)

Starts the `oxygen_node` executable (tiny random model, config/oxygen.yaml, autostart), feeds it
30 Hz camera images + joint states and one question per second (topic ~/ask), samples the node
process's RSS (/proc/<pid>/status VmRSS) every --interval seconds and prints the least-squares
slope in MiB/min over the samples after --warmup minutes. Goal: < 0.1 MiB/min once warm.

    source scripts/env.sh && nice -n 10 oxygen-bench node-soak --minutes 10

Prints one line per sample and a summary (slope, answered questions, commands/s, load average).
"""
from __future__ import annotations

import argparse
import math
import os
import threading
import time
from pathlib import Path

import numpy as np

from .node_process import close_client, spin_client, start_node, stop_node

ROOT = Path(__file__).resolve().parents[3]  # the repository
JOINTS = [f"joint_{i}" for i in range(1, 7)]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS")


def slope_mib_per_min(samples: list[tuple[float, float]]) -> float:
    t = np.array([s[0] for s in samples]) / 60.0
    m = np.array([s[1] for s in samples])
    return float(np.polyfit(t, m, 1)[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0, help="minutes excluded from the slope")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between RSS samples")
    ap.add_argument("--log", default="/tmp/oxygen_soak_node.log", help="the node's output")
    args = ap.parse_args(argv)

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("ROS_DOMAIN_ID", str(101 + os.getpid() % 100))
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from oxygen_ros.msg import TextMemory
    from oxygen_ros.node import conversions as conv

    log = open(args.log, "wb")
    proc = start_node(["autostart:=true", "model.num_threads:=1"], log)
    rclpy.init()
    node = rclpy.create_node("oxygen_soak")
    counts = {"answers": 0, "commands": 0, "chunks": 0}
    lock = threading.Lock()

    def count(key, pred=lambda m: True):
        def cb(msg):
            if pred(msg):
                with lock:
                    counts[key] += 1
        return cb
    node.create_subscription(TextMemory, "/oxygen/answer", count("answers", lambda m: m.is_final), 100)
    node.create_subscription(JointState, "/oxygen/joint_command", count("commands"), 100)
    node.create_subscription(JointTrajectory, "/oxygen/action_chunk", count("chunks"), 10)
    img_pub = node.create_publisher(Image, "/camera/image_raw", qos_profile_sensor_data)
    js_pub = node.create_publisher(JointState, "/joint_states", 10)
    ask_pub = node.create_publisher(String, "/oxygen/ask", 100)
    ex = spin_client(node)
    stop = threading.Event()

    def feed():
        base = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
        i, nxt = 0, time.monotonic()
        while not stop.is_set():
            now = node.get_clock().now().to_msg()
            img_pub.publish(conv.encode_image(np.roll(base, i, axis=1), "rgb8", stamp=now))
            js = JointState(name=list(JOINTS),
                            position=[0.3 * math.sin(0.1 * i + j) for j in range(6)])
            js.header.stamp = now
            js_pub.publish(js)
            if i % 30 == 0:
                ask_pub.publish(String(data=f"question {i // 30}: what is on the table?"))
            i += 1
            nxt += 1 / 30
            time.sleep(max(0.0, nxt - time.monotonic()))
    threading.Thread(target=feed, daemon=True).start()

    samples: list[tuple[float, float]] = []
    t0 = time.monotonic()
    end = t0 + args.minutes * 60
    try:
        while time.monotonic() < end:
            time.sleep(args.interval)
            if proc.poll() is not None:
                print(f"node exited with {proc.returncode}")
                return 1
            t = time.monotonic() - t0
            samples.append((t, rss_mib(proc.pid)))
            with lock:
                c = dict(counts)
            print(f"{t:7.0f} s  RSS {samples[-1][1]:8.1f} MiB  answers {c['answers']:5d}  "
                  f"chunks {c['chunks']:6d}  commands {c['commands']:7d}", flush=True)
    finally:
        stop.set()
        stop_node(proc)
        close_client(ex)
    warm = [s for s in samples if s[0] >= args.warmup * 60]
    if len(warm) < 3:
        print("too few samples after the warm-up for a slope")
        return 1
    slope = slope_mib_per_min(warm)
    elapsed = samples[-1][0]
    print(f"RSS slope after {args.warmup:g} min warm-up: {slope:+.3f} MiB/min over "
          f"{(warm[-1][0] - warm[0][0]) / 60:.1f} min ({warm[0][1]:.1f} -> {warm[-1][1]:.1f} MiB); "
          f"answers {counts['answers']}, commands {counts['commands'] / elapsed:.1f}/s, "
          f"chunks {counts['chunks'] / elapsed:.1f}/s; load avg {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs (goal < 0.1 MiB/min)")
    return 0
