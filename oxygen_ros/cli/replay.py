"""oxygen-replay: feed a recorded bag's camera images and joint states through the engine offline
(no ROS) with any engine settings or checkpoint, write the predicted action_chunk, joint_command,
memory, answer and frame_stats into a new bag, and score the chunks against a reference topic."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from oxygen_ros.cli.engine_args import engine_config, model_source
from oxygen_ros.robot.build import build_engine
from oxygen_ros.robot.inference import executed_steps

from ..robot.command_config import BLENDS, EXECUTIONS
from ..robot.shaper import DEFAULT_TRACKING_ERROR
from ..bags.reader import BagData, bag_topics, messages, read_bag
from ..bags.replay import ReplayConfig, Replayer
from ..bags.score import markdown, plot, reference_series, score
from ..bags.typestore import CAMERA_TYPES, JOINT_STATE, STRING
from ..bags.replay_outputs import write_outputs
from ..bags.writer import STORAGES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from oxygen_ros.cli.engine_args import add_engine_args, check_engine_args

    p = argparse.ArgumentParser(prog="oxygen-replay", description=__doc__)
    p.add_argument("bag", help="input rosbag2 folder or .mcap file")
    p.add_argument("--out", default=None, help="output bag folder (default: <bag>-replay-<mode>)")
    p.add_argument("--storage", default="mcap", choices=sorted(STORAGES))
    add_engine_args(p)  # the same engine flags as oxygen-demo
    # inputs and the node's settings (its parameter names)
    p.add_argument("--camera-topics", nargs="+", default=None,
                   help="camera topics in model order, sensor_msgs/Image or CompressedImage (default: "
                   "/camera/image_raw, else /camera/image_raw/compressed, else every camera topic)")
    p.add_argument("--camera-keys", nargs="+", default=None,
                   help="checkpoint camera key of each camera topic (as the node's camera_keys)")
    p.add_argument("--joint-state-topic", default=None, help="default: /joint_states")
    p.add_argument("--joint-names", nargs="+", default=None,
                   help="default: the names of the first joint state message")
    p.add_argument("--state-names", nargs="+", default=[],
                   help="the model's state values read by name from the joint states (`name`, "
                   "`name:velocity`, `name:effort`), as the node's state_names; default: joint names")
    p.add_argument("--command-names", nargs="+", default=[],
                   help="the values the actions command, as the node's command_names; default: "
                   "joint names")
    p.add_argument("--command-kinds", nargs="+", default=[],
                   help="position | delta | velocity per command or one for all, as the node's "
                   "command_kinds; default: position")
    p.add_argument("--joint-limits-lower", nargs="+", type=float, default=None)
    p.add_argument("--joint-limits-upper", nargs="+", type=float, default=None)
    p.add_argument("--instruction", default="", help="task text (default: the engine's); a recorded "
                   "~/instruction topic changes it as it did live")
    p.add_argument("--stamp-tolerance-s", type=float, default=0.05)
    p.add_argument("--max-stamp-offset-s", type=float, default=1.0,
                   help="refuse inputs stamped further than this from their log time, as the node "
                        "does against its clock (0: not checked)")
    p.add_argument("--control-rate-hz", type=float, default=50.0)
    p.add_argument("--chunk-rate-hz", type=float, default=0.0,
                   help="rate of the action chunk's steps (the node's chunk_rate_hz); 0 = the "
                        "checkpoint's when it names one, else --control-rate-hz")
    p.add_argument("--crossfade-s", type=float, default=0.1)
    p.add_argument("--chunk-blend", choices=BLENDS, default="crossfade",
                   help="as the node's chunk_blend: crossfade, rtc (real-time chunking, docs/rtc.md; "
                        "the engine's --rtc-* flags apply) or none")
    p.add_argument("--chunk-execution", choices=EXECUTIONS, default="stream",
                   help="as the node's chunk_execution: stream, or sync (each chunk plays to its "
                        "end, then the next one made from an observation taken at rest)")
    p.add_argument("--chunk-replan-steps", type=int, default=0,
                   help="as the node's chunk_replan_steps: a newer chunk takes over only after "
                        "the playing one has played this many steps (0 = at once)")
    p.add_argument("--n-action-steps", type=int, default=0,
                   help="steps of each chunk the robot executes, as the node's n_action_steps "
                        "(0 = the checkpoint's)")
    p.add_argument("--no-skip-latency", action="store_true",
                   help="the node's chunk_skip_latency false: play every chunk from its first step, "
                        "one latency late (a deliberate fault, for comparison)")
    p.add_argument("--observation-timeout-s", type=float, default=0.5)
    p.add_argument("--joint-velocity-limits", nargs="+", type=float, default=[],
                   help="rad/s, one value or one per joint (the node's joint_velocity_limits)")
    p.add_argument("--joint-acceleration-limits", nargs="+", type=float, default=[],
                   help="rad/s^2, one value or one per joint (joint_acceleration_limits)")
    p.add_argument("--max-start-deviation", nargs="+", type=float, default=[],
                   help="rad, one value or one per joint, 0 = off (max_start_deviation)")
    p.add_argument("--max-tracking-error", nargs="*", type=float, default=list(DEFAULT_TRACKING_ERROR),
                   help="rad, one value or one per joint; given with no value = off "
                        "(max_tracking_error)")
    p.add_argument("--rate", type=float, default=0.0,
                   help="0: as fast as possible, every paired observation inferred (default); "
                        "R > 0: recorded timing x R with the node's drop-oldest hand-over")
    p.add_argument("--node", default="/oxygen", help="prefix of the output topics")
    p.add_argument("--reference-topic", default=None,
                   help="JointState topic to score the predicted chunks against (open loop)")
    p.add_argument("--no-drain", action="store_true",
                   help="do not finish the language requests still running when the bag ends")
    p.add_argument("--no-warmup", action="store_true")
    p.add_argument("--json", action="store_true", help="last stdout line: one JSON summary")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    check_engine_args(p, args)
    return args


def _suffix_topic(bag: BagData, msgtype: str, suffix: str) -> str | None:
    c = [t for t in bag.topics_of(msgtype) if t.endswith(suffix)]
    return c[0] if c else None


def config_from(args: argparse.Namespace, bag: BagData, num_cameras: int, action_dim: int) -> ReplayConfig:
    images = sorted(t for t, ty in bag.topics.items() if ty in CAMERA_TYPES)  # raw and compressed
    default = next(([t] for t in ("/camera/image_raw", "/camera/image_raw/compressed") if t in images),
                   images)
    cams = args.camera_topics or default
    cams = cams[:num_cameras] if not args.camera_topics else cams
    js = args.joint_state_topic or ("/joint_states" if "/joint_states" in bag.topics else None)
    if js is None:
        others = [t for t in bag.topics_of(JOINT_STATE)
                  if not t.endswith("joint_command") and t != args.reference_topic]
        js = others[0] if others else ""
    missing = [t for t in [*cams, js] if t not in bag.topics]
    if missing or not cams:
        raise ValueError(f"input topics {missing or 'camera'} not in the bag; it has "
                         f"{sorted(bag.topics)} (use --camera-topics / --joint-state-topic)")
    not_cams = [f"{t} ({bag.topics[t]})" for t in cams if bag.topics[t] not in CAMERA_TYPES]
    if not_cams:
        raise ValueError(f"camera topics {not_cams} are neither sensor_msgs/Image nor CompressedImage")
    names = args.joint_names
    if not names:
        first = next(messages(args.bag, BagData(str(args.bag)), topics=[js]), None)
        names = list(first[2].name)[:action_dim] if first else []
    return ReplayConfig(camera_topics=cams, camera_transports=tuple(CAMERA_TYPES[bag.topics[t]] for t in cams),
                        joint_state_topic=js, joint_names=list(names),
                        instruction=args.instruction, ask_topic=_suffix_topic(bag, STRING, "/ask"),
                        instruction_topic=_suffix_topic(bag, STRING, "/instruction"),
                        stamp_tolerance_s=args.stamp_tolerance_s,
                        max_stamp_offset_s=args.max_stamp_offset_s, control_rate_hz=args.control_rate_hz,
                        crossfade_s=args.crossfade_s, chunk_blend=args.chunk_blend,
                        chunk_skip_latency=not args.no_skip_latency,
                        chunk_execution=args.chunk_execution,
                        chunk_replan_steps=args.chunk_replan_steps,
                        observation_timeout_s=args.observation_timeout_s,
                        rate=args.rate, drain=not args.no_drain,
                        joint_velocity_limits=list(args.joint_velocity_limits),
                        joint_acceleration_limits=list(args.joint_acceleration_limits),
                        max_start_deviation=list(args.max_start_deviation),
                        max_tracking_error=list(args.max_tracking_error),
                        state_names=list(args.state_names), command_names=list(args.command_names),
                        command_kinds=list(args.command_kinds))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out or f"{str(args.bag).rstrip('/')}-replay-{args.mode}")
    if out.exists():
        print(f"oxygen-replay: {out} exists already; choose another --out", file=sys.stderr)
        return 2
    bag = BagData(str(args.bag))  # topics now; errors while streaming
    bag.topics.update(bag_topics(args.bag))
    try:
        # the same construction as the node's (robot/build.py)
        built = build_engine(model_source(args), engine_config(args))
        engine, norm = built.engine, built.norm
        mc = engine.model_config
        cfg = config_from(args, bag, mc.num_cameras, mc.action_dim)
        from oxygen_ros.robot.values import camera_slots

        cfg.camera_slots = camera_slots(cfg.camera_topics, list(args.camera_keys or []), built.camera_keys)
        cfg.n_action_steps = executed_steps(args.n_action_steps, built.n_action_steps, mc.action_horizon)
        cfg.chunk_rate_hz = float(args.chunk_rate_hz or built.fps or 0.0)  # 0: the control rate
        if cfg.chunk_rate_hz < 0:
            raise ValueError(f"--chunk-rate-hz must be >= 0, got {args.chunk_rate_hz}")
        from oxygen_ros.robot.values import StateMapping

        lo = np.asarray(args.joint_limits_lower, np.float32) if args.joint_limits_lower else None
        hi = np.asarray(args.joint_limits_upper, np.float32) if args.joint_limits_upper else None
        robot = cfg.robot
        mapping = StateMapping(robot.num_commands, lo, hi, norm, robot)
    except (ValueError, FileNotFoundError) as exc:
        print(f"oxygen-replay: {exc}", file=sys.stderr)
        return 2
    if not args.no_warmup:
        engine.warmup()
    log = not args.quiet
    if log:
        print(f"oxygen-replay: {args.bag} -> {out}: {mc.name}, mode {args.mode} k={args.k} N={args.N} "
              f"S={args.S}, cameras {cfg.camera_topics}, joints {cfg.joint_names}", flush=True)

    def progress(fr: Any) -> None:
        if log:
            print(f"frame {fr.out.frame:4d} {fr.out.frame_ms:7.1f} ms  batch {fr.out.batch_size:2d}  "
                  f"tokens {fr.out.tokens_this_frame}", flush=True)

    start = time.perf_counter()
    replayer = Replayer(engine, mapping, cfg)
    res = replayer.run(messages(args.bag, bag, topics=replayer.input_topics()), progress)
    for e in bag.errors:
        print(f"oxygen-replay: {e}", file=sys.stderr)
    wall = time.perf_counter() - start
    counts = write_outputs(out, args.storage, res, cfg, args.node, replayer.player.config.clip)
    summary: dict[str, Any] = {
        "bag": str(args.bag), "out": str(out), "mode": args.mode, "k": args.k, "N": args.N, "S": args.S,
        "rate": args.rate, "pairs": res.pairs, "frames": len(res.frames), "dropped": res.dropped,
        "bad_inputs": res.bad_inputs, "action_chunks": len(res.frames), "drain_frames": len(res.drained),
        "tokens": int(sum(f.out.tokens_this_frame for f in res.frames + res.drained)), "wall_s": wall,
        "limited_ticks": res.limited_ticks, "gated_chunks": res.gated, **counts}
    for e in res.errors:
        print(f"oxygen-replay: {e}", file=sys.stderr)
    rc = 1 if bag.errors else 0
    if args.reference_topic:
        try:
            ref = read_bag(args.bag, topics=[args.reference_topic])
            commands = list(cfg.robot.command_names)  # the chunk's columns
            rt, rv = reference_series(ref.get(args.reference_topic), commands)
            sc = score([(f.header_ns, f.chunk) for f in res.frames], rt, rv,
                       cfg.step_s, commands)
        except ValueError as exc:
            print(f"oxygen-replay: cannot score against {args.reference_topic}: {exc}", file=sys.stderr)
            rc = 1
        else:
            sdir = out.with_name(out.name + "-score")
            sdir.mkdir(parents=True, exist_ok=True)
            title = f"{args.mode} k={args.k} N={args.N} S={args.S} vs {args.reference_topic}"
            png = plot(sc, sdir / "score.png", title)
            (sdir / "score.md").write_text(markdown(sc, title, png))
            (sdir / "score.json").write_text(json.dumps(sc.as_dict()))
            summary["score"] = sc.as_dict()
            summary["score_dir"] = str(sdir)
            print(f"open-loop vs {args.reference_topic}: MSE {sc.mse:.6g}, MAE {sc.mae:.6g} over "
                  f"{sc.chunks_scored} chunks ({sdir / 'score.md'})", flush=True)
    print(f"replayed {len(res.frames)} frames of {res.pairs} pairs ({res.dropped} dropped) in {wall:.1f} s "
          f"-> {out}", flush=True)
    if args.json:
        print(json.dumps(summary), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
