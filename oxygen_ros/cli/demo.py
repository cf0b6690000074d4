"""oxygen-demo: run the engine and watch it work.

Default: a synthetic camera + joint-state stream; prints per-frame action rate, language tokens/s,
active batch and the textual memory as it grows. With --sim TASK (and a simulator checkpoint such
as checkpoints/sim-policy): the engine drives a Meta-World robot (no ROS) and prints per frame the
true stage, the memory text and the target sent, per episode whether it succeeded.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from ..bench.compare import collect_requests
from ..bench.metrics import ratio_check, summarize, warmup_frames
from ..engine import MODES, Engine, FrameOutput, SyntheticStream
from .engine_args import add_engine_args, check_engine_args, engine_config, model_source
from ..robot.build import build_engine


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="oxygen-demo", description=__doc__)
    add_engine_args(p)
    p.add_argument("--frames", type=int, default=30, help="frames to measure")
    p.add_argument("--warmup", type=int, default=None,
                   help="frames before measuring (default: ceil(N/k)+1, the batch ramp-up)")
    p.add_argument("--compare", default=None, choices=MODES,
                   help="also run this mode (e.g. isolated) and print measured vs predicted ratio")
    p.add_argument("--json", action="store_true", help="last stdout line: one JSON summary")
    p.add_argument("--dump", default=None, metavar="PATH",
                   help="write every request's tokens and margins and every frame's actions")
    p.add_argument("--quiet", action="store_true", help="no per-frame lines")
    p.add_argument("--sim", default=None, metavar="TASK",
                   help="drive the simulator instead of the synthetic stream: a task name "
                        "(oxygen_ros.sim.ALL_TASKS) or 'all' (the evaluated tasks); needs metaworld "
                        "and a simulator checkpoint (--checkpoint checkpoints/sim-policy)")
    p.add_argument("--episodes", type=int, default=1, help="--sim: episodes per task")
    p.add_argument("--replan", type=int, default=4, help="--sim: chunk targets played per frame")
    args = p.parse_args(argv)
    check_engine_args(p, args)
    if args.frames < 1:
        p.error("--frames must be >= 1")
    if args.sim is not None:
        from ..sim import ALL_TASKS, TASKS, unavailable_reason

        if args.sim != "all" and args.sim not in ALL_TASKS:
            p.error(f"--sim: unknown task {args.sim!r}; one of {sorted(ALL_TASKS)} or 'all'")
        if not args.checkpoint:
            p.error("--sim needs a simulator checkpoint: --checkpoint checkpoints/sim-policy")
        if args.compare or args.dump:
            p.error("--sim does not take --compare or --dump")
        if args.episodes < 1:
            p.error("--episodes must be >= 1")
        reason = unavailable_reason()
        if reason:
            p.error(f"--sim: the simulator cannot run here: {reason}")
        args.sim_tasks = list(TASKS) if args.sim == "all" else [args.sim]
    return args


def run_mode(engine: Engine, args: argparse.Namespace, log: bool, drain: bool) -> tuple[list[FrameOutput], list[FrameOutput]]:
    """Warm-up frames, then measured frames; with drain, keep stepping (no new requests) until
    every request has finished. Returns (all frames, measured frames)."""
    stream = SyntheticStream(engine.model_config, seed=args.seed)
    warm = args.warmup if args.warmup is not None else warmup_frames(args.k, args.N)
    outputs: list[FrameOutput] = []
    memory: dict[int, str] = {}

    def frames() -> Iterator[FrameOutput]:
        for i in range(warm + args.frames):
            yield engine.step(stream.frame(i))
        if drain:  # on the stream's next frames, no new periodic requests
            yield from engine.drain(stream.frame)

    for i, out in enumerate(frames()):
        outputs.append(out)
        for u in out.updates:
            if u.kind == "memory":
                memory[u.id] = u.text
        if log:
            latest = max(memory) if memory else None
            text = memory.get(latest, "") if latest else ""
            tag = "warm" if i < warm else "    "
            print(f"{tag} frame {out.frame:4d} {out.frame_ms:7.1f} ms  {1e3 / out.frame_ms:6.1f} Hz  "
                  f"{out.tokens_this_frame / out.frame_ms * 1e3:7.1f} tok/s  batch {out.batch_size:2d}  "
                  f"kv {out.kv.blocks_used:4d}/{out.kv.blocks_total}  memory[{latest}]: {text!r}",
                  flush=True)
    measured = outputs[warm: warm + args.frames]
    return outputs, measured


def dump(path: str, engine: Engine, outputs: list[FrameOutput], args: argparse.Namespace) -> None:
    data = {
        "mode": engine.config.mode, "preset": args.preset, "k": args.k, "N": args.N, "S": args.S,
        "seed": args.seed,
        "requests": collect_requests(outputs),
        "frames": [{"frame": o.frame, "actions": o.actions.tolist()} for o in outputs],
    }
    Path(path).write_text(json.dumps(data))


def run_sim(built, args: argparse.Namespace, log: bool) -> int:
    """--sim: episodes of the task(s) driven by the engine; exit status 0 even when an episode
    fails (the demo shows what happens; oxygen-sim eval measures success rates)."""
    from ..sim.demo_loop import check_memory_prompt, period_steps, run_demo, summary_line

    try:
        check_memory_prompt(built.engine)
        start = time.perf_counter()
        results = run_demo(built, args.sim_tasks, args.episodes, args.replan, quiet=not log,
                           period=period_steps(args.checkpoint))
    except ValueError as exc:
        print(f"oxygen-demo: {exc}", file=sys.stderr)
        return 2
    print(summary_line(results) + f" in {time.perf_counter() - start:.1f} s", flush=True)
    if args.json:
        print(json.dumps({"sim": [r.__dict__ for r in results]}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log = not args.quiet
    try:  # the same construction as the node's and oxygen-replay's (robot/build.py)
        built = build_engine(model_source(args), engine_config(args))
        engine = built.engine
    except (ValueError, FileNotFoundError) as exc:
        print(f"oxygen-demo: {exc}", file=sys.stderr)
        return 2
    if log:
        mc = engine.model_config
        print(f"oxygen-demo: preset {mc.name} ({sum(p.numel() for p in engine.model.parameters()) / 1e6:.2f}M "
              f"params), mode {args.mode}, k={args.k} N={args.N} S={args.S}, attention "
              f"{engine.runner.backend}, KV pool {engine.kv.usage().blocks_total} blocks", flush=True)
    if args.sim is not None:
        return run_sim(built, args, log)
    start = time.perf_counter()
    outputs, measured = run_mode(engine, args, log, drain=args.dump is not None)
    summary = summarize(measured, [o.decode_steps for o in measured], [o.admitted for o in measured])
    result: dict[str, Any] = {
        "mode": args.mode, "preset": args.preset, "k": args.k, "N": args.N, "S": args.S,
        "frames": len(measured), "action_hz": summary.action_hz, "tokens_per_s": summary.tokens_per_s,
        "frame_ms_p50": summary.frame_ms_p50, "frame_ms_p99": summary.frame_ms_p99,
        "mean_batch": summary.mean_batch, "kv_peak_bytes": summary.kv_peak_bytes,
        "stage_ms": summary.stage_ms, "decode_step_ms": summary.decode_step_ms,
        "attention_backend": engine.runner.backend,
    }
    if args.dump:
        dump(args.dump, engine, outputs, args)
    if args.compare:
        # the same weights and tokenizer under the other mode
        other = Engine(engine.model_config, engine_config(args, args.compare), model=engine.model,
                       tokenizer=engine.tokenizer)
        _, measured_o = run_mode(other, args, log=False, drain=False)
        base = summarize(measured_o, [o.decode_steps for o in measured_o],
                         [o.admitted for o in measured_o])
        check = ratio_check(summary, base, args.N)
        result.update(check)
        result[f"{args.compare}_action_hz"] = base.action_hz
        result[f"{args.compare}_tokens_per_s"] = base.tokens_per_s
        print(f"{args.mode} vs {args.compare}: action-frequency ratio measured "
              f"{check['ratio_measured']:.2f}x, predicted from stage costs "
              f"{check['ratio_predicted']:.2f}x (error {check['ratio_error'] * 100:.1f}%); "
              f"{args.mode} {summary.action_hz:.1f} Hz / {summary.tokens_per_s:.0f} tok/s, "
              f"{args.compare} {base.action_hz:.1f} Hz / {base.tokens_per_s:.0f} tok/s", flush=True)
    result["wall_s"] = time.perf_counter() - start
    if log or not args.json:
        print(f"summary: {summary.action_hz:.1f} Hz actions, {summary.tokens_per_s:.1f} tokens/s, "
              f"frame p50 {summary.frame_ms_p50:.1f} ms p99 {summary.frame_ms_p99:.1f} ms, "
              f"mean batch {summary.mean_batch:.1f}, KV peak {summary.kv_peak_bytes / 1e6:.2f} MB",
              flush=True)
    if args.json:
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
