"""The simulated robots on ROS topics, and with --expert the scripted expert driving them:
`oxygen-sim` (Meta-World's arm) and `oxygen-sim aloha` (the bimanual ALOHA).

    oxygen-sim --tasks door-unlock window-open --episodes 5     # wait for a policy
    oxygen-sim --expert --episodes 3                            # the expert, through ROS
    oxygen-sim aloha --tasks transfer-cube --episodes 5         # wait for a policy on /oxygen/joint_command
    oxygen-sim aloha --expert --episodes 3                      # the bimanual expert, through ROS

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
from typing import Any, Callable, Sequence

os.environ.setdefault("MUJOCO_GL", "osmesa")


def _parser(prog: str, epilog: str | None, tasks: Sequence[str], all_tasks: Sequence[str], seed: int,
            image_size: int, camera_rate: float, real_time_help: str) -> argparse.ArgumentParser:
    """The flags both robots take (their own defaults)."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__, epilog=epilog,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=list(tasks), choices=list(all_tasks))
    p.add_argument("--episodes", type=int, default=5, help="episodes per task")
    p.add_argument("--seed", type=int, default=seed, help="base layout seed")
    p.add_argument("--image-size", type=int, default=image_size)
    p.add_argument("--camera-rate", type=float, default=camera_rate, help="Hz")
    p.add_argument("--reset-hold", type=float, default=0.5, help="s of standing still after a reset")
    p.add_argument("--real-time-factor", type=float, default=1.0, help=real_time_help)
    p.add_argument("--expert", action="store_true",
                   help="also run the scripted expert as a policy node (through the topics)")
    p.add_argument("--json", default=None, help="write the episode results here")
    p.add_argument("--timeout", type=float, default=0.0, help="stop after this many s (0 = none)")
    return p


def parse_metaworld(argv: list[str] | None = None, epilog: str | None = None) -> argparse.Namespace:
    from ..sim.env import CAMERAS, DEFAULT_CAMERA, DEFAULT_IMAGE_SIZE
    from ..sim.tasks import ALL_TASKS, TASKS

    p = _parser("oxygen-sim", epilog, TASKS, ALL_TASKS, 0, DEFAULT_IMAGE_SIZE, 20.0,
                "simulated s per wall s (below 1: a slower world for plumbing checks on a slow "
                "machine; evaluate policies at 1)")
    p.add_argument("--camera", default=DEFAULT_CAMERA, choices=CAMERAS)
    p.add_argument("--command-topic", default="/oxygen/joint_command")
    p.add_argument("--instruction-topic", default="/oxygen/instruction", help="'' = none")
    return p.parse_args(argv)


def parse_aloha(argv: list[str] | None = None) -> argparse.Namespace:
    from ..sim.aloha.env import CAMERAS, DEFAULT_CAMERAS, DEFAULT_IMAGE_SIZE, DEFAULT_TOP_FOVY
    from ..sim.aloha.node import EVAL_BASE_SEED, FAULTS
    from ..sim.aloha.tasks import TASKS

    p = _parser("oxygen-sim aloha", None, TASKS, TASKS, EVAL_BASE_SEED, DEFAULT_IMAGE_SIZE, 25.0,
                "simulated s per wall s")
    p.add_argument("--cameras", nargs="+", default=list(DEFAULT_CAMERAS), choices=CAMERAS)
    p.add_argument("--fault", default="", choices=FAULTS, help="a wiring fault fed to the policy")
    p.add_argument("--top-fovy", type=float, default=DEFAULT_TOP_FOVY,
                   help="the top camera's vertical field of view, degrees (the policy's training data's)")
    p.add_argument("--wait-for-policy", action="store_true",
                   help="hold the first episode until a command arrives (a policy's start-up is not episode time)")
    return p.parse_args(argv)


def _spin_until_done(prog: str, make_nodes: Callable[[], list], timeout_s: float,
                     ready: Callable[[Any], threading.Event | None] = lambda _sim: None):
    """rclpy up, the nodes (the sim first) spun by one single-threaded executor, as the node's
    (rclpy's multi-threaded executor rebuilds its wait set in Python and holds the interpreter
    lock the physics thread needs: docs/simulation.md, Timing) until the last episode ends or
    `timeout_s` passes; the sim node."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from ..sim.node import spinning

    rclpy.init()
    nodes = make_nodes()
    sim = nodes[0]
    start_signal = ready(sim)
    try:
        with spinning(sim, nodes, SingleThreadedExecutor()):
            t0 = time.monotonic()
            try:
                sim.start(start_signal)
                while not sim.finished.wait(0.2):
                    if timeout_s and time.monotonic() - t0 > timeout_s:
                        print(f"{prog}: timeout", file=sys.stderr)
                        break
            except KeyboardInterrupt:
                pass
    finally:
        rclpy.try_shutdown()
    return sim


def _run(prog: str, args: argparse.Namespace, make_config: Callable[[], Any], make_sim: Callable,
         make_expert: Callable[[Any], Any], episode_tail: Callable[[Any], str], stats_line: Callable[[Any], str],
         widths: tuple[int, int], ready: Callable[[Any, Any], threading.Event | None] = lambda _s, _c: None,
         json_stats: bool = False) -> int:
    """Either robot: its config from the flags, its node (and with --expert the expert's), one
    line per finished episode, the success per task, `stats_line` and --json; exit status 0 when
    every episode ran, 1 otherwise, 2 on a bad config."""
    try:
        cfg = make_config()
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    task_w, seed_w = widths

    def report(status) -> None:
        if status.done:
            print(f"episode {status.episode:3d} {status.task:{task_w}s} seed {status.seed:{seed_w}d} "
                  f"{'success' if status.success else 'timeout'} after {status.t:5.2f} s "
                  f"{episode_tail(status)}", flush=True)

    def make_nodes() -> list:
        return [make_sim(cfg, on_status=report), *([make_expert(cfg)] if args.expert else [])]

    sim = _spin_until_done(prog, make_nodes, args.timeout, lambda node: ready(node, cfg))
    results = sim.stats.results
    by_task: dict[str, list] = defaultdict(list)
    for r in results:
        by_task[r.task].append(r)
    for task, rs in by_task.items():
        print(f"{task:{task_w}s} success {sum(r.success for r in rs)}/{len(rs)}")
    print(stats_line(sim.stats))
    if args.json:
        out = {"config": asdict(cfg), "episodes": [asdict(r) for r in results]}
        if json_stats:
            out["stats"] = {k: v for k, v in asdict(sim.stats).items() if k != "results"}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if len(results) == len(sim.episodes) else 1


def metaworld(argv: list[str] | None = None, epilog: str | None = None) -> int:
    """oxygen-sim: Meta-World's arm."""
    args = parse_metaworld(argv, epilog)
    from ..sim.node import SimConfig, SimNode

    def config() -> SimConfig:
        return SimConfig(tasks=tuple(args.tasks), episodes_per_task=args.episodes, base_seed=args.seed,
                         image_size=args.image_size, camera=args.camera, camera_rate_hz=args.camera_rate,
                         reset_hold_s=args.reset_hold, real_time_factor=args.real_time_factor,
                         command_topic=args.command_topic,
                         instruction_topic=args.instruction_topic, privileged=args.expert)

    def expert(cfg: SimConfig):
        from ..sim.expert import ExpertNode

        return ExpertNode(command_topic=cfg.command_topic)

    def stats(st) -> str:
        return (f"steps {st.steps} (late {st.late_steps}, lost {st.lost_s:.2f} s), images {st.images} "
                f"({1000 * st.render_s / max(st.images, 1):.1f} ms each, {st.skipped_images} skipped while "
                f"drawing), commands {st.commands} (refused {st.bad_commands})")

    return _run("oxygen-sim", args, config, SimNode, expert,
                lambda s: f"({s.step} steps, {s.late_steps} late)", stats, (22, 5))


def aloha(argv: list[str] | None = None) -> int:
    """oxygen-sim aloha: the bimanual robot."""
    args = parse_aloha(argv)
    from ..sim.aloha.node import AlohaSimConfig, AlohaSimNode

    def config() -> AlohaSimConfig:
        return AlohaSimConfig(tasks=tuple(args.tasks), episodes_per_task=args.episodes, base_seed=args.seed,
                              image_size=args.image_size, top_fovy=args.top_fovy, cameras=tuple(args.cameras),
                              camera_rate_hz=args.camera_rate, reset_hold_s=args.reset_hold,
                              real_time_factor=args.real_time_factor, fault=args.fault)

    def expert(cfg: AlohaSimConfig):
        from ..sim.aloha.expert_node import AlohaExpertNode

        return AlohaExpertNode(episode_topic=cfg.episode_topic, command_topic=cfg.command_topic)

    def ready(sim, cfg: AlohaSimConfig) -> threading.Event | None:
        """--wait-for-policy: set by the first command."""
        if not args.wait_for_policy:
            return None
        from sensor_msgs.msg import JointState

        from ..sim.node import RELIABLE

        event = threading.Event()
        sim.create_subscription(JointState, cfg.command_topic, lambda _m: event.set(), RELIABLE)
        return event

    def stats(st) -> str:
        return (f"physics steps {st.physics_steps} (late {st.late_steps}, lost {st.lost_s:.2f} s), joint "
                f"states {st.joint_states}, image sets {st.image_sets} "
                f"({1000 * st.render_s / max(st.image_sets, 1):.1f} ms each, {st.skipped_image_sets} "
                f"skipped), commands {st.commands} (refused {st.bad_commands})")

    return _run("oxygen-sim aloha", args, config, AlohaSimNode, expert,
                lambda s: f"(stage {s.stage}: {s.caption}; {s.late_steps} late physics steps)", stats,
                (14, 8), ready, json_stats=True)
