"""oxygen-sim: the simulated robot on ROS topics (and, with --expert, the scripted expert driving it).

    oxygen-sim --tasks door-unlock window-open --episodes 5              # wait for a policy
    oxygen-sim --expert --episodes 3                                     # the expert, through ROS

Prints one line per finished episode and a summary (success rate per task); --json writes the
episode results. Exits when the last episode ends.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections import defaultdict
from dataclasses import asdict

os.environ.setdefault("MUJOCO_GL", "osmesa")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from ..sim.env import CAMERAS, DEFAULT_CAMERA, DEFAULT_IMAGE_SIZE
    from ..sim.tasks import ALL_TASKS, TASKS

    p = argparse.ArgumentParser(prog="oxygen-sim", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(ALL_TASKS))
    p.add_argument("--episodes", type=int, default=5, help="episodes per task")
    p.add_argument("--seed", type=int, default=0, help="base layout seed")
    p.add_argument("--image-size", type=int, default=DEFAULT_IMAGE_SIZE)
    p.add_argument("--camera", default=DEFAULT_CAMERA, choices=CAMERAS)
    p.add_argument("--camera-rate", type=float, default=20.0, help="Hz")
    p.add_argument("--reset-hold", type=float, default=0.5, help="s of standing still after a reset")
    p.add_argument("--real-time-factor", type=float, default=1.0,
                   help="simulated s per wall s (below 1: a slower world for plumbing checks on a slow "
                        "machine; evaluate policies at 1)")
    p.add_argument("--command-topic", default="/oxygen/joint_command")
    p.add_argument("--instruction-topic", default="/oxygen/instruction", help="'' = none")
    p.add_argument("--expert", action="store_true",
                   help="also run the scripted expert as a policy node (through the topics)")
    p.add_argument("--json", default=None, help="write the episode results here")
    p.add_argument("--timeout", type=float, default=0.0, help="stop after this many s (0 = none)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from ..sim.node import SimConfig, SimNode

    try:
        cfg = SimConfig(tasks=tuple(args.tasks), episodes_per_task=args.episodes, base_seed=args.seed,
                        image_size=args.image_size, camera=args.camera, camera_rate_hz=args.camera_rate,
                        reset_hold_s=args.reset_hold, real_time_factor=args.real_time_factor,
                        command_topic=args.command_topic,
                        instruction_topic=args.instruction_topic, privileged=args.expert)
    except ValueError as exc:
        print(f"oxygen-sim: {exc}", file=sys.stderr)
        return 2

    def report(status) -> None:
        if status.done:
            print(f"episode {status.episode:3d} {status.task:22s} seed {status.seed:5d} "
                  f"{'success' if status.success else 'timeout'} after {status.t:5.2f} s "
                  f"({status.step} steps, {status.late_steps} late)", flush=True)

    rclpy.init()
    sim = SimNode(cfg, on_status=report)
    nodes = [sim]
    if args.expert:
        from ..sim.expert import ExpertNode

        nodes.append(ExpertNode(command_topic=args.command_topic))
    # single-threaded, as the node's: rclpy's multi-threaded executor rebuilds its wait set in
    # Python and holds the interpreter lock the physics thread needs (docs/simulation.md, Timing)
    executor = SingleThreadedExecutor()
    for n in nodes:
        executor.add_node(n)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    t0 = time.monotonic()
    try:
        sim.start()
        while not sim.finished.wait(0.2):
            if args.timeout and time.monotonic() - t0 > args.timeout:
                print("oxygen-sim: timeout", file=sys.stderr)
                break
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
        executor.shutdown(timeout_sec=1.0)
        spin.join(timeout=5.0)  # a spin thread still inside rcl at exit aborts the process
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown()
    results = sim.stats.results
    by_task: dict[str, list] = defaultdict(list)
    for r in results:
        by_task[r.task].append(r)
    for task, rs in by_task.items():
        ok = sum(r.success for r in rs)
        print(f"{task:22s} success {ok}/{len(rs)}")
    st = sim.stats
    print(f"steps {st.steps} (late {st.late_steps}, lost {st.lost_s:.2f} s), images {st.images} "
          f"({1000 * st.render_s / max(st.images, 1):.1f} ms each, {st.skipped_images} skipped while "
          f"drawing), commands {st.commands} "
          f"(refused {st.bad_commands})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": asdict(cfg), "episodes": [asdict(r) for r in results]}, f, indent=1)
    return 0 if len(results) == len(sim.episodes) else 1


if __name__ == "__main__":
    sys.exit(main())
