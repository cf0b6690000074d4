"""The issue-18 scenario measured: the tiny random model at 50 Hz, joint limits +-3 rad, joints
standing still far from the model's output, once without limits and once with
joint_velocity_limits 1.0 rad/s (the node records each run; oxygen-eval compares them).

    source scripts/env.sh && oxygen-bench command-safety --out benchmarks/results/command-safety

Per run it prints (and writes to <out>/summary.txt): the first command's distance from the
measured pose, the largest step between two commands (rad and rad/s), the velocity p99 and the
largest step of any command from both the previous command and the measured pose (the "done
when" number: at most 1.0 rad/s x dt with the limit). <out>/eval/ holds oxygen-eval's report and
plots of both runs. The bags stay under <out>/work/ (not meant to be committed).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .node_process import (
    close_client, feed, fresh_work_dir, recording_params, run_shown, sensor_feeder, spin_client, start_node,
    stop_node)

ROOT = Path(__file__).resolve().parents[3]  # the repository
JOINTS = [f"joint_{i}" for i in range(1, 7)]
POSE = [0.8, -0.6, 0.5, -0.7, 0.9, -0.4]
RATE_HZ = 50.0
SETTINGS = ["joint_limits_lower:=[-3.0,-3.0,-3.0,-3.0,-3.0,-3.0]",
            "joint_limits_upper:=[3.0,3.0,3.0,3.0,3.0,3.0]", "model.num_threads:=1",
            "memory.every_n_frames:=5", f"control_rate_hz:={RATE_HZ}"]
TOPICS = ["/joint_states", "/oxygen/joint_command", "/oxygen/action_chunk", "/oxygen/frame_stats",
          "/diagnostics"]


def record(bag: Path, seconds: float, extra: list[str]) -> None:
    from sensor_msgs.msg import JointState

    from oxygen_ros.node import conversions as conv

    proc = start_node(recording_params(bag, TOPICS, [*SETTINGS, *extra]))
    node, img_pub, js_pub = sensor_feeder("command_safety_feeder")
    commands: list = []
    node.create_subscription(JointState, "/oxygen/joint_command", commands.append, 100)
    ex = spin_client(node)
    base = np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8)

    def tick(i: int, running_s: float | None) -> None:
        now = node.get_clock().now().to_msg()
        img_pub.publish(conv.encode_image(np.roll(base, i, axis=1), "rgb8", stamp=now))
        js = JointState()
        js.header.stamp = now
        js.name, js.position = list(JOINTS), list(POSE)
        js_pub.publish(js)
    try:
        feed(proc, seconds, tick, lambda: bool(commands), start_timeout_s=180.0)
    finally:
        stop_node(proc, wait_s=60)  # the bag is closed on the way out
        close_client(ex, node)


def numbers(bag: Path) -> dict:
    from oxygen_ros.bags.messages import stamp_ns
    from oxygen_ros.bags.reader import read_bag

    b = read_bag(bag)
    cmds = b.get("/oxygen/joint_command")
    states = b.get("/joint_states")
    pos = np.array([m.position for _, m in cmds])
    first_ns = stamp_ns(cmds[0][1].header.stamp)
    pose = np.array(POSE)
    before = [m for _, m in states if stamp_ns(m.header.stamp) <= first_ns]
    measured = np.array(before[-1].position) if before else pose
    steps = np.abs(np.diff(pos, axis=0)).max(axis=1)
    from_pose = np.abs(pos[1:] - pose).max(axis=1)
    dt = 1.0 / RATE_HZ
    worst = np.concatenate([[np.abs(pos[0] - measured).max()], np.minimum(steps, from_pose)])
    return {"commands": len(pos), "first_from_pose_rad": float(np.abs(pos[0] - measured).max()),
            "max_step_rad": float(steps.max()), "max_step_rad_s": float(steps.max() / dt),
            "p99_step_rad_s": float(np.percentile(steps, 99) / dt),
            "done_when_worst_rad": float(worst.max()), "allowed_rad": 1.0 * dt,
            "distance_travelled_max_rad": float(np.abs(pos - pose).max())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/results/command-safety")
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    work = fresh_work_dir(out)
    runs = {"no-limits": [], "limit-1rad-s": ["joint_velocity_limits:=[1.0]"]}
    lines = [f"# {' '.join(sys.argv)}  (shared 2-core machine; tiny random model, {RATE_HZ:g} Hz, "
             f"joints still at {POSE})"]
    for name, extra in runs.items():
        record(work / name, args.seconds, extra)
        n = numbers(work / name)
        line = f"{name}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                       for k, v in n.items())
        print(line, flush=True)
        lines.append(line)
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    run_shown([sys.executable, "-m", "oxygen_ros.cli.eval", *runs, "--out", str(out / "eval")], work)
    return 0
