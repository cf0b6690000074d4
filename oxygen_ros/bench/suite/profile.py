"""oxygen-bench profile: the stage costs on the engine's own runner (bench/profile.py): prefill,
denoise, and one batched decode step at several batch sizes.

    oxygen-bench profile --preset balanced

`--linear`: the widest projection as F.linear ([out, in] weight) and as x @ w ([in, out] copy),
at 1 and 30 tokens (EngineConfig.linear_layout).

`--kv`: the KV manager's cost inside real frames (oxygen mode, k=1, one request per frame, so
the batch reaches N) beside the cost of replaying exactly the same calls from the same state
back to back, i.e. with the interpreter's data hot in the CPU caches instead of evicted by the
model's kernels between calls."""
from __future__ import annotations

import argparse
import json

import torch

from oxygen_ros.bench.args import add_bench_args
from oxygen_ros.bench.profile import kv_replay, linear_layouts, stage_costs
from oxygen_ros.engine.config import EngineConfig, load_model_config
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.core.synthetic import SyntheticStream


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    # --S, --device, --dtype (and --N below) from their engine knobs; --preset, --threads:
    # bench/args.py
    add_bench_args(p, ("denoise_steps", "device", "dtype"), preset="tiny", threads=2, S=10)
    p.add_argument("--model-config", default=None)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--kv", action="store_true",
                   help="KV manager cost in real frames vs the same calls replayed back to back")
    add_bench_args(p, ("max_decode_steps",), N=30)  # --kv: tokens per request (= the batch)
    p.add_argument("--frames", type=int, default=20, help="--kv: measured frames")
    p.add_argument("--linear", action="store_true",
                   help="the VLM's widest projection (fused gate/up) in both linear layouts")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    mc = load_model_config(args.preset, args.model_config)
    if args.linear:
        r = linear_layouts(mc.vlm.width, 2 * mc.vlm.mlp_dim, repeats=max(args.repeats, 20))
        for m in (1, 30):
            r[f"standard_over_transposed_m{m}"] = r[f"standard_m{m}_ms"] / r[f"transposed_m{m}_ms"]
        print(json.dumps({"width": mc.vlm.width, "out": 2 * mc.vlm.mlp_dim,
                          **{k: round(v, 4) for k, v in r.items()}}))
        return 0
    if args.kv:
        engine = Engine(mc, EngineConfig(mode="oxygen", decode_steps_per_frame=1,
                                         max_decode_steps=args.N, denoise_steps=args.S,
                                         max_active_requests=args.N + 2, device=args.device,
                                         dtype=args.dtype))
        engine.warmup()
        stream = SyntheticStream(mc, seed=0)
        for _ in range(args.N + 1):  # until the batch is full
            engine.ask("what happened?", max_new_tokens=args.N)
            engine.step(stream.frame(engine.frame))
        r = kv_replay(engine, frames=args.frames, repeats=args.repeats)
        r["in_frame_share"] = r["in_frame_us"] / 1e3 / r["frame_ms"]
        r["replayed_share"] = r["replayed_us"] / 1e3 / r["frame_ms"]
        r["in_frame_over_replayed"] = r["in_frame_us"] / r["replayed_us"]
        # 4 significant digits, not 4 decimals: a share of a slow frame can be below 5e-5
        print(json.dumps({k: float(f"{v:.4g}") for k, v in r.items()}))
        return 0
    engine = Engine(mc, EngineConfig(denoise_steps=args.S, max_active_requests=32,
                                     device=args.device, dtype=args.dtype))
    costs = stage_costs(engine, repeats=args.repeats)
    costs["decode_b16_over_b1"] = costs["decode_b16_ms"] / costs["decode_b1_ms"]
    costs["decode_b30_over_b1"] = costs["decode_b30_ms"] / costs["decode_b1_ms"]
    print(json.dumps({k: round(v, 3) for k, v in costs.items()}))
    return 0

