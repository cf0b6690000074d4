"""Record a run of the tiny node, evaluate it, replay it in two modes, compare and score them.

    source scripts/env.sh && oxygen-bench bags-sample --out benchmarks/results/bags-sample

Steps (each printed with its command line):
1. `oxygen_node` (tiny preset, autostart, record.enabled) as a subprocess; this script publishes
   a synthetic camera (64x48 rgb8, 30 Hz), joint states and a "teleoperator" reference command
   (/teleop/joint_command: the joint trajectory 0.1 s ahead) for --seconds, asks one question,
   then stops the node with SIGINT (the recorder closes the bag).
2. `oxygen-eval` on the recorded bag -> <out>/eval/
3. `oxygen-replay` of that bag with --mode oxygen and --mode isolated (same engine settings as the
   node), scored against /teleop/joint_command -> <out>/work/oxy, iso (+ -score folders)
4. `oxygen-eval --no-plots` of both replays side by side -> <out>/compare/
The bags stay under <out>/work/ (not meant to be committed); the reports and plots are small.
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
from pathlib import Path

import numpy as np

from .node_process import (
    close_client, feed, fresh_work_dir, recording_params, run_shown, sensor_feeder, spin_client, start_node,
    stop_node)

ROOT = Path(__file__).resolve().parents[3]  # the repository
JOINTS = [f"joint_{i}" for i in range(1, 7)]
NODE_SETTINGS = ["decode_steps_per_frame:=4", "max_decode_steps:=12", "denoise_steps:=10",
                 "memory.every_n_frames:=5", "model.num_threads:=1"]
REPLAY_SETTINGS = ["--k", "4", "--N", "12", "--S", "10", "--memory-every", "5", "--threads", "1"]
TOPICS = ["/camera/image_raw", "/joint_states", "/teleop/joint_command", "/oxygen/joint_command",
          "/oxygen/action_chunk", "/oxygen/memory", "/oxygen/answer", "/oxygen/frame_stats",
          "/oxygen/ask", "/oxygen/instruction", "/diagnostics"]


def positions(t: float) -> list[float]:
    return [0.3 * math.sin(0.8 * t + j) for j in range(len(JOINTS))]


def record(bag: Path, seconds: float) -> None:
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from oxygen_ros.node import conversions as conv

    node_proc = start_node(recording_params(bag, TOPICS, NODE_SETTINGS))
    node, img_pub, js_pub = sensor_feeder("bags_sample_feeder")
    chunks: list = []
    node.create_subscription(JointTrajectory, "/oxygen/action_chunk", chunks.append, 10)
    ref_pub = node.create_publisher(JointState, "/teleop/joint_command", 10)
    ask_pub = node.create_publisher(String, "/oxygen/ask", 10)
    ex = spin_client(node)
    base = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    asked = []

    def tick(i: int, running_s: float | None) -> None:
        now = node.get_clock().now()
        t = now.nanoseconds * 1e-9
        img_pub.publish(conv.encode_image(np.roll(base, i, axis=1), "rgb8", stamp=now.to_msg()))
        for pub, values in ((js_pub, positions(t)), (ref_pub, positions(t + 0.1))):
            js = JointState()
            js.header.stamp = now.to_msg()
            js.name, js.position = list(JOINTS), values
            pub.publish(js)
        if running_s is not None and not asked and running_s > seconds / 2:
            ask_pub.publish(String(data="What is on the table?"))
            asked.append(True)
    try:
        feed(node_proc, seconds, tick, lambda: bool(chunks))
    finally:
        stop_node(node_proc, wait_s=60)  # the bag is closed on the way out
        close_client(ex, node)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/results/bags-sample")
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    work = fresh_work_dir(out)
    record(work / "run", args.seconds)
    py = sys.executable
    # relative paths: the reports name the bags as the commands did
    run_shown([py, "-m", "oxygen_ros.cli.eval", "run", "--out", str(out / "eval")], work)
    for mode, name in (("oxygen", "oxy"), ("isolated", "iso")):
        run_shown([py, "-m", "oxygen_ros.cli.replay", "run", "--mode", mode, *REPLAY_SETTINGS,
             "--reference-topic", "/teleop/joint_command", "--out", name, "--quiet", "--json"], work)
    run_shown([py, "-m", "oxygen_ros.cli.eval", "oxy", "iso", "--out", str(out / "compare"), "--no-plots"], work)
    for name in ("oxy", "iso"):
        shutil.copytree(work / f"{name}-score", out / f"{name}-score", dirs_exist_ok=True)
    return 0
