"""The CPU cost of one control tick of the node (the take of the newest joint state included).

At 200-500 Hz the control thread takes the interpreter lock that many times a second from the
model's thread: its cost per tick is what a humanoid's command rate takes from the action rate
(issue 36; `oxygen-bench humanoid-io` measures that end to end). Here the node is configured
in-process (--preset, default `balanced`; nothing is inferred), a chunk is handed to its player every 40
ticks (a new chunk cross-fades in, as at a few frames a second), a publisher sends a JointState
of --joints joints before every tick, and the tick runs --ticks times in a loop. Printed: the
thread CPU time per tick and the part of it the joint-state take used; with --profile, the
functions that cost most.

    source scripts/env.sh && oxygen-bench control-tick --joints 30
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--joints", type=int, default=30)
    ap.add_argument("--ticks", type=int, default=4000)
    ap.add_argument("--preset", default="balanced", help="the model preset the node configures")
    ap.add_argument("--profile", action="store_true", help="print the costliest functions")
    args = ap.parse_args(argv)
    if not 1 <= args.joints <= 256 or not 100 <= args.ticks <= 1_000_000:
        ap.error("--joints must be 1..256 and --ticks 100..1000000")

    import rclpy
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from oxygen_ros.node.oxygen_node import OxygenNode

    names = [f"joint_{i}" for i in range(args.joints)]
    rclpy.init()
    node = OxygenNode(parameter_overrides=[
        Parameter("model.preset", value=args.preset), Parameter("model.num_threads", value=1),
        Parameter("memory.enabled", value=False), Parameter("joint_names", value=names),
        Parameter("joint_state_topic", value="/control_tick/joint_states"),
        Parameter("control_rate_hz", value=200.0), Parameter("chunk_rate_hz", value=50.0),
        Parameter("joint_limits_lower", value=[-3.0] * args.joints),
        Parameter("joint_limits_upper", value=[3.0] * args.joints),
        Parameter("observation_timeout_s", value=60.0)])
    try:
        if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            raise SystemExit("the node did not configure")
        rt = node.rt
        sender = rclpy.create_node("control_tick_sender")
        pub = sender.create_publisher(JointState, "/control_tick/joint_states", 10)
        # the lifecycle publisher is inactive in-process: the node's command path
        # (Publishers.command) publishes on a plain publisher of the same type instead
        rt.pubs.joint_command = sender.create_publisher(JointState, "/control_tick/joint_command", 10)
        msg = JointState(name=names, position=[0.01] * args.joints, velocity=[0.0] * args.joints,
                         effort=[0.0] * args.joints)

        def chunk() -> None:
            t = node.get_clock().now().nanoseconds * 1e-9
            rt.player.set_chunk(np.full((50, args.joints), 0.01), t, t)

        def tick() -> None:
            msg.header.stamp = node.get_clock().now().to_msg()
            pub.publish(msg)
            time.sleep(0.0005)  # delivered before the tick takes it
            rt.control.tick()

        time.sleep(0.5)  # discovery
        chunk()
        for _ in range(50):
            tick()
        prof = cProfile.Profile() if args.profile else None
        commands0, take0, cpu = rt.control.commands, rt.inputs.cpu.totals["joint_states"], 0.0
        for i in range(args.ticks):
            if i % 40 == 0:
                chunk()
            msg.header.stamp = node.get_clock().now().to_msg()
            pub.publish(msg)
            time.sleep(0.0005)
            if prof is not None:
                prof.enable()
            c0 = time.thread_time()
            rt.control.tick()
            cpu += time.thread_time() - c0
            if prof is not None:
                prof.disable()
        sent = rt.control.commands - commands0
        take = rt.inputs.cpu.totals["joint_states"] - take0
        print(f"{args.joints} joints, {args.ticks} ticks, {sent} commands sent: "
              f"{cpu / args.ticks * 1e6:.1f} us CPU per tick, of which the joint-state take "
              f"{take / args.ticks * 1e6:.1f} us{' (profiled: slower)' if prof else ''}")
        if sent != args.ticks:
            print(f"WARNING: {args.ticks - sent} ticks sent no command ({rt.control.holding!r})")
        if prof is not None:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        sender.destroy_node()
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0 if sent == args.ticks else 1
