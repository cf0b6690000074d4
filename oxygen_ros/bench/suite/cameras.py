"""Cameras: does the node keep its inference rate with real camera sizes? (Not a CI test.)

Part 1, in this process: the cost of one camera callback (node/inputs.py: the cheap checks, no
decode) per image, the decode of one image (raw / jpeg, robot/images.py) and the engine's image
preparation per frame (ModelRunner.prepare_images, resize-with-pad) at the tiny model's 32x32
and at pi0.5's 224x224.
Part 2: the `oxygen_node` process (tiny model shape with 3 cameras: a checkpoint written to a
temporary folder, since the tiny preset takes 2; cameras without a topic are masked) fed 30 Hz
camera images + joint states, for 1, 2 and 3 cameras x raw / jpeg topics x 64x48, 640x480 and
1280x720: inference frames/s (~/frame_stats messages), mean frame_ms, the node's CPU use, and
the images the node's camera-0 callback actually ran for: the difference of the `<topic>
received` counter of the `oxygen: inputs` diagnostic over the measured window, per second (not
the diagnostic's rate, which is the node's own estimate). One node process; each camera set is
a lifecycle cleanup / configure (camera_topics, camera_transports), each size a few seconds of
streaming after a warm-up. `--publisher-qos` picks the images' QoS: best_effort (sensor data,
the default) or reliable (what a driver with the default QoS publishes).

    source scripts/env.sh && oxygen-bench cameras --out benchmarks/results/cameras-<date>.md

About 3 minutes. Ratios within one run are what it claims (the machine may be shared).
"""
from __future__ import annotations

import argparse
import math
import os
import shlex
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from .node_process import NodeServices, close_client, cpu_s, spin_client, start_node, stop_node

ROOT = Path(__file__).resolve().parents[3]  # the repository
JOINTS = [f"joint_{i}" for i in range(1, 7)]
SIZES = ((48, 64), (480, 640), (720, 1280))  # (height, width)
RNG = np.random.default_rng(0)


def _median_us(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def part1(lines: list[str]) -> None:
    import rclpy
    from sensor_msgs.msg import JointState  # noqa: F401 - ROS message types loaded first

    from oxygen_ros.engine.runner.images import prepare
    from oxygen_ros.node import conversions as conv
    from oxygen_ros.node.inputs import Inputs
    from oxygen_ros.robot.images import decode_image
    import torch

    torch.set_num_threads(1)  # as the node runs here (model.num_threads 1): on a loaded 2-core
    # machine two OpenMP threads wait on each other and small ops take 10-50x longer
    rclpy.init()
    node = rclpy.create_node("oxygen_cameras_bench")
    lines += ["## Per image and per frame (this process, one torch thread, median of repeats)", "",
              "| image | transport | callback us/image | decode ms/image | prepare ms/camera to 32x32 "
              "| prepare ms/camera to 224x224 |", "|---|---|---|---|---|---|"]
    for h, w in SIZES:
        img = RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)
        for transport in ("raw", "compressed"):
            topic = f"/bench/{transport}_{w}x{h}"
            inputs = Inputs(node, [topic], "/bench/joints", JOINTS, 0.05, 1e9, lambda k, t: None,
                            transports=(transport,))
            inputs.open()
            cb = inputs._image_cb(0, topic, transport)
            msg = conv.encode_image(img, "rgb8") if transport == "raw" else conv.encode_compressed(img, "jpeg")

            def call():
                msg.header.stamp = conv.sec_to_stamp(node.get_clock().now().nanoseconds * 1e-9)
                cb(msg)
            cb_us = _median_us(call, 200)
            dec_ms = _median_us(lambda: decode_image(msg, transport), 20) / 1e3
            x = torch.from_numpy(img)
            p32 = _median_us(lambda: prepare(x, 32), 20) / 1e3
            p224 = _median_us(lambda: prepare(x, 224), 20) / 1e3
            lines.append(f"| {w}x{h} | {'raw rgb8' if transport == 'raw' else 'jpeg'} | {cb_us:.0f} | "
                         f"{dec_ms:.2f} | {p32:.2f} | {p224:.2f} |")
            inputs.destroy()
            print(lines[-1], flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    lines.append("")


def checkpoint(folder: Path) -> Path:
    from oxygen_ros.engine.config import load_model_config
    from oxygen_ros.engine.model import NormStats
    from oxygen_ros.engine.families.loader import init_model
    from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint
    from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

    mc = load_model_config("tiny").replace(num_cameras=3)
    stats = NormStats.quantiles(np.full(6, -2.0, np.float32), np.full(6, 2.0, np.float32),
                                np.full(6, -3.0, np.float32), np.full(6, 3.0, np.float32))
    return save_lerobot_checkpoint(init_model(mc, seed=0), mc, folder / "tiny3", norm_stats=stats,
                                   tokenizer=build_tiny_tokenizer(mc.vocab_size))


def part2(lines: list[str], seconds: float, warm: float, log_path: str,
          camera_counts=(1, 2, 3), transports=("raw", "compressed"), rounds: int = 3,
          settle: float = 0.5, publisher_qos: str = "best_effort",
          profile_in: str = "both") -> None:
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("ROS_DOMAIN_ID", str(101 + os.getpid() % 100))
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from lifecycle_msgs.msg import Transition
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
    from sensor_msgs.msg import CompressedImage, Image, JointState

    from oxygen_ros.msg import FrameStats
    from oxygen_ros.node import conversions as conv

    pub_qos = qos_profile_sensor_data if publisher_qos == "best_effort" else QoSProfile(
        depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
    tmp = Path(tempfile.mkdtemp(prefix="oxygen_cameras_"))
    ck = checkpoint(tmp)
    log = open(log_path, "wb")
    profile = os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE")
    if profile_in == "publisher":
        os.environ.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)  # the node: stock Fast DDS
    proc = start_node(["model.num_threads:=1", f"model.checkpoint:={ck}"], log)
    if profile_in == "publisher" and profile:
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = profile  # this process (the publisher)
    elif profile_in == "node":
        os.environ.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    rclpy.init()
    node = rclpy.create_node("oxygen_cameras_bench")
    lock = threading.Lock()
    stats: list[tuple[float, FrameStats]] = []

    def on_stats(msg):
        with lock:
            stats.append((time.monotonic(), msg))
    node.create_subscription(FrameStats, "/oxygen/frame_stats", on_stats, 100)
    # topic -> [(monotonic, "<topic> received" counter)]: the callbacks the node ran
    received: dict[str, list[tuple[float, int]]] = {}

    def on_diag(msg):
        for st in msg.status:
            if st.name.endswith(": inputs"):
                for kv in st.values:
                    if kv.key.endswith(" received"):
                        with lock:
                            received.setdefault(kv.key[: -len(" received")], []).append(
                                (time.monotonic(), int(kv.value)))
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 10)
    js_pub = node.create_publisher(JointState, "/joint_states", 10)
    services = NodeServices(node, proc, log_path)
    ex = spin_client(node)
    transition = services.transition

    lines += ["## Node inference rate (oxygen_node, tiny model shape with 3 cameras, 30 Hz cameras "
              "+ joint states)", "",
              "| cameras | transport | image | frames/s | x 64x48 | frame_ms | vision_prefill_ms | "
              "published Hz/camera | received Hz (camera 0, callbacks run) | node CPU s/s | bench CPU s/s |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    configured = False
    try:
        for cams in camera_counts:
            for transport in transports:
                topics = [f"/cam{c}/image_raw" + ("/compressed" if transport == "compressed" else "")
                          for c in range(cams)]
                if configured:
                    transition(Transition.TRANSITION_DEACTIVATE)
                    transition(Transition.TRANSITION_CLEANUP)
                services.set({"camera_topics": topics, "camera_transports": [transport] * cams})
                transition(Transition.TRANSITION_CONFIGURE)
                transition(Transition.TRANSITION_ACTIVATE)
                configured = True
                mtype = CompressedImage if transport == "compressed" else Image
                pubs = [node.create_publisher(mtype, t, pub_qos) for t in topics]
                # a few pre-encoded frames per camera and size (the publisher must keep 30 Hz)
                frames = {}
                for h, w in SIZES:
                    frames[(h, w)] = []
                    for c in range(cams):
                        img = RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)
                        frames[(h, w)].append([
                            conv.encode_image(np.roll(img, 5 * k, axis=1), "rgb8") if transport == "raw"
                            else conv.encode_compressed(np.roll(img, 5 * k, axis=1), "jpeg")
                            for k in range(3)])
                current = {"size": SIZES[0]}
                stop = threading.Event()
                sent = [0]

                def feed():
                    i, nxt = 0, time.monotonic()
                    while not stop.is_set():
                        now = node.get_clock().now().to_msg()
                        for c, pub in enumerate(pubs):
                            msg = frames[current["size"]][c][i % 3]
                            msg.header.stamp = now
                            pub.publish(msg)
                        js = JointState(name=list(JOINTS),
                                        position=[0.3 * math.sin(0.1 * i + j) for j in range(6)])
                        js.header.stamp = now
                        js_pub.publish(js)
                        i += 1
                        sent[0] = i
                        nxt += 1 / 30
                        time.sleep(max(0.0, nxt - time.monotonic()))
                th = threading.Thread(target=feed, daemon=True)
                th.start()
                time.sleep(warm)
                # sizes interleaved over rounds: a load change on the shared machine hits all alike
                acc = {sz: {"t": 0.0, "cpu": 0.0, "sent": 0, "bench": 0.0, "win": [], "got": []}
                       for sz in SIZES}
                for _ in range(rounds):
                    for sz in SIZES:
                        current["size"] = sz
                        time.sleep(settle)  # frames of the previous size drain
                        t0, c0, s0, b0 = time.monotonic(), cpu_s(proc.pid), sent[0], time.process_time()
                        time.sleep(seconds / rounds)
                        t1, c1, s1, b1 = time.monotonic(), cpu_s(proc.pid), sent[0], time.process_time()
                        a = acc[sz]
                        with lock:
                            a["win"] += [m for t, m in stats if t0 <= t < t1]
                            stats.clear()
                            # the node's camera-0 callback count, first and last report in
                            # the window: callbacks run per second
                            seen = [(t, c) for t, c in received.get(topics[0], []) if t0 <= t < t1]
                            received.clear()
                            if len(seen) >= 2:
                                a["got"].append((seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0]))
                        a["t"] += t1 - t0
                        a["cpu"] += c1 - c0
                        a["sent"] += s1 - s0
                        a["bench"] += b1 - b0
                stop.set()
                th.join()
                base_rate = None
                for (h, w) in SIZES:
                    a = acc[(h, w)]
                    win, dt = a["win"], a["t"]
                    rate = len(win) / dt
                    base_rate = rate if base_rate is None else base_rate
                    fm = statistics.mean(m.frame_ms for m in win) if win else float("nan")
                    vp = statistics.mean(m.vision_prefill_ms for m in win) if win else float("nan")
                    lines.append(f"| {cams} | {'raw rgb8' if transport == 'raw' else 'jpeg'} | {w}x{h} | "
                                 f"{rate:.1f} | {rate / base_rate:.2f} | {fm:.1f} | {vp:.1f} | "
                                 f"{a['sent'] / dt:.1f} | "
                                 f"{statistics.mean(a['got']) if a['got'] else float('nan'):.1f} | "
                                 f"{a['cpu'] / dt:.2f} | {a['bench'] / dt:.2f} |")
                    print(lines[-1], flush=True)
                for pub in pubs:
                    node.destroy_publisher(pub)
    finally:
        stop_node(proc)
        close_client(ex)
    lines.append("")


def _rel(path: str | None) -> str:
    if not path:
        return ""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.5, help="measured seconds per configuration "
                    "(split over --rounds windows, the sizes interleaved)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dds-profile", default=str(ROOT / "config" / "fastdds_big_images.xml"),
                    help="FASTDDS_DEFAULT_PROFILES_FILE for this process and the node ('' = Fast DDS "
                    "defaults: a best-effort image larger than the sender's 512 KiB shared-memory "
                    "segment is mostly lost)")
    ap.add_argument("--warmup", type=float, default=1.5, help="seconds streamed before measuring")
    ap.add_argument("--out", default=None, help="also write the report (markdown) here")
    ap.add_argument("--log", default="/tmp/oxygen_cameras_node.log", help="the node's output")
    ap.add_argument("--skip-node", action="store_true", help="part 1 only")
    ap.add_argument("--skip-part1", action="store_true", help="the node's rates only")
    ap.add_argument("--profile-publisher-only", action="store_true", help="--dds-profile for this "
                    "process (the camera publisher) only; the node runs with stock Fast DDS")
    ap.add_argument("--profile-node-only", action="store_true", help="--dds-profile for the node "
                    "only; this process (the camera publisher) runs with stock Fast DDS")
    ap.add_argument("--cameras", type=int, nargs="+", default=[1, 2, 3], choices=[1, 2, 3])
    ap.add_argument("--transports", nargs="+", default=["raw", "compressed"], choices=["raw", "compressed"])
    ap.add_argument("--publisher-qos", default="best_effort", choices=["best_effort", "reliable"],
                    help="QoS of the camera publishers (the node's camera_reliability is auto)")
    ap.add_argument("--sizes", nargs="+", default=None, help="HxW sizes (default: 48x64 480x640 "
                    "720x1280)")
    args = ap.parse_args(argv)
    if args.dds_profile:
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = args.dds_profile
    else:
        os.environ.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    load0 = os.getloadavg()[0]
    lines = ["# Cameras benchmark", "",
             f"Command: `oxygen-bench cameras {shlex.join(sys.argv[1:] if argv is None else argv)}`", "",
             f"DDS profile: {_rel(os.environ.get('FASTDDS_DEFAULT_PROFILES_FILE')) or 'Fast DDS defaults'}"
             + (" (camera publisher only; the node: Fast DDS defaults)" if args.profile_publisher_only
                else " (the node only; the camera publisher: Fast DDS defaults)"
                if args.profile_node_only else ""),
             ""]
    if args.sizes:
        global SIZES
        SIZES = tuple(tuple(int(v) for v in s.split("x")) for s in args.sizes)
    lines.append(f"Camera publishers: {args.publisher_qos}")
    lines.append("")
    if not args.skip_part1:
        part1(lines)
    if not args.skip_node:
        part2(lines, args.seconds, args.warmup, args.log, args.cameras, args.transports, args.rounds,
              publisher_qos=args.publisher_qos,
              profile_in="publisher" if args.profile_publisher_only else
              "node" if args.profile_node_only else "both")
    lines.append(f"Load average {load0:.1f} at start, {os.getloadavg()[0]:.1f} at the end, on "
                 f"{os.cpu_count()} CPUs (a shared machine distorts absolute numbers; compare ratios "
                 "within one run).")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0
