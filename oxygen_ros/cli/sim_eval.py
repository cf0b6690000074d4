"""oxygen-sim eval: closed-loop evaluation of a checkpoint through the oxygen node and the sim.

    oxygen-sim eval --checkpoint CKPT --episodes 30 --out results/sim
    oxygen-sim eval --random-checkpoint --episodes 2 --settings isolated oxygen-k1 --out /tmp/e

For every setting (default: the scripted expert as the ceiling, then isolated, oxygen-k1 and
oxygen-k5, each with memory every frame, N = --N, under every --blends entry) it starts a node
process, runs E episodes per task on the same seeded layouts, and writes into --out:
results.json (everything), table.md (success [95% Wilson interval], time to success, action Hz,
tokens/s, memory correctness: stage named and completion claims' precision, per task too),
progress.png (task progress against wall time per setting),
bags/<setting>/ (the node's recording of each run) and the node's log and parameters per run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from ..sim.env import CONTROL_PERIOD_S
    from ..sim.tasks import ALL_TASKS, TASKS

    p = argparse.ArgumentParser(prog="oxygen-sim eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group()  # one is needed unless every setting is expert
    src.add_argument("--checkpoint", help="LeRobot / openpi checkpoint folder (model.checkpoint)")
    src.add_argument("--random-checkpoint", action="store_true",
                     help="write and use a random-weight checkpoint shaped for the sim (plumbing only)")
    p.add_argument("--tokenizer", default="", help="model.tokenizer (default: next to the checkpoint)")
    p.add_argument("--out", required=True, help="results folder")
    p.add_argument("--robot", default="metaworld", choices=["metaworld", "aloha"],
                   help="the simulated robot: Meta-World's arm (docs/simulation.md) or the bimanual "
                        "ALOHA (docs/aloha.md: 3 cameras, 14 joints; tasks transfer-cube, insertion)")
    p.add_argument("--tasks", nargs="+", default=None,
                   help=f"Meta-World: {', '.join(ALL_TASKS)} (default {' '.join(TASKS)}); "
                        "ALOHA: transfer-cube, insertion (default both)")
    p.add_argument("--episodes", type=int, default=10, help="episodes per task and setting")
    p.add_argument("--seed", type=int, default=1_000_000,
                   help="base layout seed (default far from the seeds demonstrations use, 0..)")
    p.add_argument("--settings", nargs="+", default=["expert", "isolated", "oxygen-k1", "oxygen-k5"],
                   help="expert | <mode> | <mode>-k<N> | ...-nomem, each optionally +bgr or +state-swapped "
                   "(a wiring fault fed to the policy) or +stale (the node plays every chunk from its "
                   "first step, one latency late); mode: isolated, oxygen, shared, parallel")
    p.add_argument("--blends", nargs="+", default=["crossfade", "rtc"], choices=["crossfade", "rtc", "none"],
                   help="chunk_blend of every node setting")
    p.add_argument("--N", type=int, default=30, help="max_decode_steps (memory text length)")
    p.add_argument("--memory-every", type=int, default=1, help="memory.every_n_frames")
    p.add_argument("--memory-prompt", default="", help="memory.prompt (default: the node's)")
    p.add_argument("--denoise-steps", type=int, default=0, help="S (0 = the node's default)")
    p.add_argument("--control-rate", type=float, default=0.0,
                   help="the node's control_rate_hz: the chunk step of the checkpoint's training data "
                   "(default 0: the rate the checkpoint names, training.json control_rate_hz or "
                   "LeRobot train_config.json env.fps, else the sim's 80 Hz)")
    p.add_argument("--threads", type=int, default=0,
                   help="model.num_threads of the node (0: its default, every core but one)")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--top-fovy", type=float, default=0.0,
                   help="ALOHA's top camera field of view, degrees (default 0: the one the checkpoint "
                        "was trained on, training.json, else the robot's default)")
    p.add_argument("--camera-rate", type=float, default=0.0, help="Hz (default: Meta-World 20, ALOHA 25)")
    p.add_argument("--reset-hold", type=float, default=0.5)
    p.add_argument("--after-success", type=float, default=0.0, metavar="S",
                   help="ALOHA: each episode goes on S seconds after its success (0..10; success and "
                        "its time are the first success's), so what the memory says after success "
                        "is judged too")
    p.add_argument("--param", action="append", default=[], metavar="NAME=JSON",
                   help="another node parameter, e.g. --param crossfade_s=0.05 (repeatable)")
    return p.parse_args(argv)


def control_rate(requested: float, checkpoint: str) -> float:
    """The node's control_rate_hz: the one asked for, else the checkpoint's own action rate (a
    policy trained at 20 Hz played at 80 Hz would run its chunk four times too fast), else the
    sim's control rate."""
    from ..sim.checkpoint import checkpoint_rate_hz
    from ..sim.env import CONTROL_PERIOD_S

    if requested < 0:
        raise ValueError(f"--control-rate must be >= 0 (0: the checkpoint's), got {requested}")
    if requested:
        return float(requested)
    named = checkpoint_rate_hz(checkpoint) if checkpoint else None
    return named or 1.0 / CONTROL_PERIOD_S


def make_sim_config(args: argparse.Namespace):
    """The simulated robot's config from the arguments (ValueError on bad ones)."""
    from ..sim.tasks import ALL_TASKS, TASKS

    if args.robot == "aloha":
        from ..sim.aloha.node import AlohaSimConfig
        from ..sim.aloha.tasks import TASKS as ALOHA_TASKS

        from ..sim.aloha.env import DEFAULT_TOP_FOVY
        from ..sim.checkpoint import checkpoint_top_fovy

        fovy = args.top_fovy or (checkpoint_top_fovy(args.checkpoint) if args.checkpoint else None)
        return AlohaSimConfig(tasks=tuple(args.tasks or ALOHA_TASKS), episodes_per_task=args.episodes,
                              base_seed=args.seed, image_size=args.image_size,
                              top_fovy=fovy or DEFAULT_TOP_FOVY,
                              camera_rate_hz=args.camera_rate or 25.0, reset_hold_s=args.reset_hold,
                              after_success_s=args.after_success)
    if args.after_success:
        raise ValueError("--after-success is the ALOHA robot's (--robot aloha); Meta-World's episodes end at success")
    from ..sim.node import SimConfig

    tasks = tuple(args.tasks or TASKS)
    unknown = [t for t in tasks if t not in ALL_TASKS]
    if unknown:
        raise ValueError(f"unknown tasks {unknown}; Meta-World has {', '.join(ALL_TASKS)}")
    return SimConfig(tasks=tasks, episodes_per_task=args.episodes, base_seed=args.seed,
                     image_size=args.image_size, camera_rate_hz=args.camera_rate or 20.0,
                     reset_hold_s=args.reset_hold)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from ..sim.evaluate import NodeOptions, Setting, run_all
    from ..sim.metrics import CLAIM_SLACK_S
    from ..sim.report import memory_table, progress_plot, table

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        settings: list = []
        for text in args.settings:
            if text == "expert":
                settings.append(Setting.parse(text))
            else:
                settings += [Setting.parse(text, blend) for blend in args.blends]
        sim_cfg = make_sim_config(args)
        extra = {}
        for item in args.param:
            name, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--param {item!r}: expected NAME=JSON")
            extra[name] = json.loads(value)
    except (ValueError, json.JSONDecodeError) as exc:
        print(f"oxygen-sim eval: {exc}", file=sys.stderr)
        return 2
    if not (args.checkpoint or args.random_checkpoint) and any(s.mode != "expert" for s in settings):
        print("oxygen-sim eval: --checkpoint or --random-checkpoint is needed for node settings",
              file=sys.stderr)
        return 2
    checkpoint = args.checkpoint or ""
    if args.random_checkpoint and args.robot == "aloha":
        print("oxygen-sim eval: --random-checkpoint is shaped for Meta-World's robot; for ALOHA pass "
              "--checkpoint (docs/aloha.md)", file=sys.stderr)
        return 2
    if args.random_checkpoint:
        from ..sim.checkpoint import write_random_checkpoint

        checkpoint = str(write_random_checkpoint(out / "random_checkpoint", image_size=args.image_size))
    try:
        rate = control_rate(args.control_rate, checkpoint)
    except ValueError as exc:
        print(f"oxygen-sim eval: {exc}", file=sys.stderr)
        return 2
    opts = NodeOptions(checkpoint=str(Path(checkpoint).resolve()) if checkpoint else "", tokenizer=args.tokenizer,
                       control_rate_hz=rate, max_decode_steps=args.N,
                       memory_every_n_frames=args.memory_every, memory_prompt=args.memory_prompt,
                       denoise_steps=args.denoise_steps, num_threads=args.threads, extra=extra)
    runs = run_all(settings, sim_cfg, out, opts)
    summaries = [r.summary() for r in runs]
    (out / "results.json").write_text(json.dumps(
        {"command": "oxygen-sim eval " + " ".join(sys.argv[1:] if argv is None else argv),
         "checkpoint": opts.checkpoint, "sim": {k: (list(v) if isinstance(v, tuple) else v)
                                                 for k, v in vars(sim_cfg).items()},
         "settings": summaries}, indent=1))
    md = table(summaries, list(sim_cfg.tasks))
    mem_md = memory_table(summaries, list(sim_cfg.tasks))
    if mem_md.count("\n") > 2:  # any setting with memory texts
        md += ("\nMemory per task (stage: the text names the stage of the scene it was generated "
               "from; a completion claim is false when its observation came more than "
               f"{CLAIM_SLACK_S:g} s before the episode's success, or the episode never "
               "succeeded):\n\n" + mem_md)
    (out / "table.md").write_text(md)
    horizon_s = None
    if args.robot == "aloha":
        from ..sim.aloha.env import CONTROL_PERIOD_S as ALOHA_PERIOD_S
        from ..sim.aloha.tasks import get_task as aloha_task

        horizon_s = max(aloha_task(t).horizon for t in sim_cfg.tasks) * ALOHA_PERIOD_S
    progress_plot(runs, list(sim_cfg.tasks), out / "progress.png", horizon_s=horizon_s)
    print(md)
    print(f"written: {out}/results.json, table.md, progress.png, bags/")
    return 1 if any(r.error for r in runs) else 0
