"""oxygen-aloha-sim: the bimanual ALOHA robot on ROS topics (and, with --expert, the scripted expert).

    oxygen-aloha-sim --tasks transfer-cube --episodes 5        # wait for a policy on /oxygen/joint_command
    oxygen-aloha-sim --expert --episodes 3                     # the scripted expert, through ROS

One line per finished episode and a summary; --json writes the results. Exits after the last episode.
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
    from ..sim.aloha.env import CAMERAS, DEFAULT_CAMERAS, DEFAULT_IMAGE_SIZE
    from ..sim.aloha.node import EVAL_BASE_SEED, FAULTS
    from ..sim.aloha.tasks import TASKS

    p = argparse.ArgumentParser(prog="oxygen-aloha-sim", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--episodes", type=int, default=5, help="episodes per task")
    p.add_argument("--seed", type=int, default=EVAL_BASE_SEED, help="base layout seed")
    p.add_argument("--image-size", type=int, default=DEFAULT_IMAGE_SIZE)
    p.add_argument("--cameras", nargs="+", default=list(DEFAULT_CAMERAS), choices=CAMERAS)
    p.add_argument("--camera-rate", type=float, default=25.0, help="Hz")
    p.add_argument("--reset-hold", type=float, default=0.5, help="s of standing still after a reset")
    p.add_argument("--real-time-factor", type=float, default=1.0, help="simulated s per wall s")
    p.add_argument("--fault", default="", choices=FAULTS, help="a wiring fault fed to the policy")
    p.add_argument("--expert", action="store_true", help="also run the scripted expert (through the topics)")
    p.add_argument("--wait-for-policy", action="store_true",
                   help="hold the first episode until a command arrives (a policy's start-up is not episode time)")
    p.add_argument("--json", default=None, help="write the episode results here")
    p.add_argument("--timeout", type=float, default=0.0, help="stop after this many s (0 = none)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    from ..sim.aloha.node import AlohaSimConfig, AlohaSimNode
    from ..sim.node import RELIABLE

    try:
        cfg = AlohaSimConfig(tasks=tuple(args.tasks), episodes_per_task=args.episodes, base_seed=args.seed,
                             image_size=args.image_size, cameras=tuple(args.cameras),
                             camera_rate_hz=args.camera_rate, reset_hold_s=args.reset_hold,
                             real_time_factor=args.real_time_factor, fault=args.fault)
    except ValueError as exc:
        print(f"oxygen-aloha-sim: {exc}", file=sys.stderr)
        return 2

    def report(status) -> None:
        if status.done:
            print(f"episode {status.episode:3d} {status.task:14s} seed {status.seed:8d} "
                  f"{'success' if status.success else 'timeout'} after {status.t:5.2f} s "
                  f"(stage {status.stage}: {status.caption}; {status.late_steps} late physics steps)", flush=True)

    rclpy.init()
    sim = AlohaSimNode(cfg, on_status=report)
    nodes = [sim]
    ready = None
    if args.wait_for_policy:
        ready = threading.Event()
        sim.create_subscription(JointState, cfg.command_topic, lambda _m: ready.set(), RELIABLE)
    if args.expert:
        from ..sim.aloha.expert_node import AlohaExpertNode

        nodes.append(AlohaExpertNode(episode_topic=cfg.episode_topic, command_topic=cfg.command_topic))
    executor = SingleThreadedExecutor()  # as the node's (docs/simulation.md, Timing)
    for n in nodes:
        executor.add_node(n)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    t0 = time.monotonic()
    try:
        sim.start(ready)
        while not sim.finished.wait(0.2):
            if args.timeout and time.monotonic() - t0 > args.timeout:
                print("oxygen-aloha-sim: timeout", file=sys.stderr)
                break
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
        executor.shutdown(timeout_sec=1.0)
        spin.join(timeout=5.0)
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown()
    by_task: dict[str, list] = defaultdict(list)
    for r in sim.stats.results:
        by_task[r.task].append(r)
    for task, rs in by_task.items():
        print(f"{task:14s} success {sum(r.success for r in rs)}/{len(rs)}")
    st = sim.stats
    print(f"physics steps {st.physics_steps} (late {st.late_steps}, lost {st.lost_s:.2f} s), joint states "
          f"{st.joint_states}, image sets {st.image_sets} ({1000 * st.render_s / max(st.image_sets, 1):.1f} ms "
          f"each, {st.skipped_image_sets} skipped), commands {st.commands} (refused {st.bad_commands})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": asdict(cfg), "episodes": [asdict(r) for r in sim.stats.results],
                       "stats": {k: v for k, v in asdict(st).items() if k != "results"}}, f, indent=1)
    return 0 if len(sim.stats.results) == len(sim.episodes) else 1


if __name__ == "__main__":
    sys.exit(main())
