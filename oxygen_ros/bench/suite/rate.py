"""oxygen-bench rate: action-rate targets, target vs achieved (bench/rate.py): oxygen mode, one
memory request of N tokens per frame, EngineConfig.target_action_hz with k in [k_min, k_max].

    oxygen-bench rate --preset balanced --targets 2,3,4,5,6,8     # a markdown table (--json: rows)

`oxygen-bench --rate-targets 2,3,...` adds the same table to the sweep's report.md. A benchmark,
not a CI test: the achieved rate is wall-clock on whatever else the machine runs.
"""
from __future__ import annotations

import argparse
import json

import torch

from oxygen_ros.bench.args import add_bench_args
from oxygen_ros.bench.rate import rates_arg, run_targets, table, target
from oxygen_ros.bench.sweep import Context
from oxygen_ros.engine.config import load_model_config
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    # --N, --S, --device, --dtype, --seed from their engine knobs; --preset, --threads:
    # bench/args.py
    add_bench_args(p, ("max_decode_steps", "denoise_steps", "device", "dtype", "seed"),
                   preset="balanced", threads=2, N=30, S=10)
    p.add_argument("--model-config", default=None)
    p.add_argument("--targets", type=rates_arg, default=[2.0, 3.0, 4.0, 5.0, 6.0, 8.0])
    p.add_argument("--k-min", type=int, default=1)
    p.add_argument("--k-max", type=int, default=30)
    p.add_argument("--frames", type=int, default=30)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--strict", action="store_true",
                   help="EngineConfig.target_strict: every frame fits 1/target, no carried credit")
    p.add_argument("--json", action="store_true", help="last stdout line: the rows as JSON")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    mc = load_model_config(a.preset, a.model_config)
    model = init_model(mc, seed=a.seed, device=a.device, dtype=a.dtype)
    ctx = Context(mc, model, build_tiny_tokenizer(min(mc.vocab_size, 2048)), a.device, a.dtype,
                  a.seed)
    print(f"# action-rate targets: {a.preset}, oxygen, N={a.N} S={a.S}, k in [{a.k_min}, "
          f"{a.k_max}]{', strict' if a.strict else ''}, one memory request per frame, {a.warmup} "
          f"warm-up + {a.frames} measured frames per target, {a.threads} threads\n", flush=True)
    rows = run_targets(ctx, a.targets, a.k_min, a.k_max, a.N, a.S, a.frames, a.warmup,
                       strict=a.strict)
    print(table(rows))
    t = target(rows)
    print(f"[{t['status'].upper()}] {t['name']}: {t['detail']}")
    if a.json:
        print(json.dumps(rows))
    return 0

