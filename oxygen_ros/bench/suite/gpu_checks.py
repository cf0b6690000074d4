"""Device checks for benchmarks/gpu.sh that need nothing but torch (+ triton) and this package.

    oxygen-bench gpu-checks attention --device cuda --out DIR   # Triton kernel vs reference
    oxygen-bench gpu-checks frames --preset pi05 --device cuda --dtype bfloat16 --out DIR

attention: the Triton paged attention kernels against the gathering reference in float32 and
bfloat16 on the engine's shapes (decode batch with ragged lengths, causal suffix after a long
prefix, denoise queries sharing a row; GQA 8:1, 4:2 and 32:8; head_dim 64, 128 and 256; block
sizes 16 and 32; split-KV 1 and 4; the query-tiled kernel for suffix and denoise). On a CPU it needs TRITON_INTERPRET=1 (gpu.sh's dry run sets it).
frames: the same frames with EngineConfig.cuda_graphs off and on (same weights, same stream):
the tokens must be equal and the actions within the dtype's tolerance; frame times of both.
Each writes DIR/<check>.json and prints one summary line; exit 1 when a check fails.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from oxygen_ros.bench.args import add_bench_args
from oxygen_ros.bench.timing import peak_rss_bytes
from oxygen_ros.engine.runner.attention import paged_attention_reference

TOL = {"float32": 1e-4, "bfloat16": 3e-2, "float16": 1e-2}


def _case(kind: str, hq: int, hkv: int, d: int, bs: int, dtype: torch.dtype, device: str, seed: int):
    g = torch.Generator().manual_seed(seed)
    if kind == "decode":
        lens = [1, bs + 3, 5 * bs, 300, 77, 2 * bs]
        rows = list(range(len(lens)))
    elif kind == "suffix":
        lens = [290 + i + 1 for i in range(7)]
        rows = [0] * len(lens)
    else:  # denoise: every action query sees prefix + horizon
        lens = [310] * 10
        rows = [0] * 10
    width = -(-max(lens) // bs)
    nrows = max(rows) + 1
    nb = nrows * width + 2
    perm = torch.randperm(nb - 1, generator=g)[: nrows * width].view(nrows, width).int()
    k = torch.randn(nb, bs, hkv, d, generator=g)
    v = torch.randn(nb, bs, hkv, d, generator=g)
    q = torch.randn(len(rows), hq, d, generator=g)
    to = lambda t: t.to(dtype).to(device)  # noqa: E731
    i32 = lambda x: torch.tensor(x, dtype=torch.int32, device=device)  # noqa: E731
    return to(q), to(k), to(v), perm.to(device), i32(rows), i32(lens)


def check_attention(device: str, quick: bool) -> dict:
    from oxygen_ros.engine.runner.attention.triton_paged import paged_attention_triton

    shapes = [(8, 1, 256, 16), (4, 2, 64, 32), (32, 8, 128, 16)] if not quick else [(8, 1, 64, 16)]
    kinds = ("decode", "suffix", "denoise") if not quick else ("decode", "denoise")
    rows, ok = [], True
    for dtype_name in ("float32", "bfloat16"):
        dtype = getattr(torch, dtype_name)
        for hq, hkv, d, bs in shapes:
            for kind in kinds:
                args = _case(kind, hq, hkv, d, bs, dtype, device, seed=len(rows))
                ref = paged_attention_reference(*[a.float() if a.is_floating_point() else a for a in args],
                                                d ** -0.5)
                # split-KV 1 and 4 of the per-query kernel; the query-tiled kernel where the
                # queries share one row (suffix, denoise), as the engine dispatches them
                variants = [dict(num_splits=1), dict(num_splits=4)]
                if kind != "decode":
                    starts = torch.tensor([0, args[0].shape[0]], dtype=torch.int32, device=device)
                    variants.append(dict(seq_start=starts))
                for kw in variants:
                    out = paged_attention_triton(*args, d ** -0.5, **kw)
                    err = (out.float() - ref).abs().max().item()
                    good = bool(torch.isfinite(out).all()) and err <= TOL[dtype_name] * max(1.0, ref.abs().max().item())
                    ok &= good
                    rows.append({"dtype": dtype_name, "kind": kind, "heads": f"{hq}:{hkv}", "head_dim": d,
                                 "block_size": bs, "splits": kw.get("num_splits", 1),
                                 "kernel": "tiled" if "seq_start" in kw else "per-query",
                                 "max_abs_err": err, "ok": good})
    return {"check": "attention", "device": device, "ok": ok, "cases": rows}


def check_frames(preset: str, device: str, dtype: str, frames: int, k: int, n: int, s: int) -> dict:
    from oxygen_ros.engine.config import PRESETS, EngineConfig
    from oxygen_ros.engine.core.engine import Engine
    from oxygen_ros.engine.families.loader import init_model
    from oxygen_ros.engine.core.synthetic import SyntheticStream
    from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

    cfg = PRESETS[preset]
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    model = init_model(cfg, seed=0, device=device, dtype=dtype).fuse_projections()
    build_s = time.perf_counter() - t0
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if cuda:
        build_peak = torch.cuda.max_memory_allocated(device)
    else:
        build_peak = peak_rss_bytes()
    tok = build_tiny_tokenizer(min(cfg.vocab_size, 2048))
    runs = {}
    for graphs in (False, True):
        engine = Engine(cfg, EngineConfig(device=device, dtype=dtype, decode_steps_per_frame=k,
                                          max_decode_steps=n, denoise_steps=s, cuda_graphs=graphs),
                        model=model, tokenizer=tok)
        engine.ask("What is on the table?\n")
        stream = SyntheticStream(cfg, seed=0)
        outs = [engine.step(stream.frame(i)) for i in range(frames)]
        runs[graphs] = {
            "actions": [torch.as_tensor(o.actions) for o in outs],
            "tokens": [(u.id, list(u.new_tokens)) for o in outs for u in o.updates],
            "frame_ms": [o.frame_ms for o in outs],
            "decode_ms": [o.timings_ms.get("decode", 0.0) for o in outs],
            "graph_sizes": engine.runner.decode_graphs.sizes if graphs else [],
        }
        del engine
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    eager, graphed = runs[False], runs[True]
    diff = max((a - b).abs().max().item() for a, b in zip(eager["actions"], graphed["actions"]))
    scale = max(a.abs().max().item() for a in eager["actions"])
    same_tokens = eager["tokens"] == graphed["tokens"]
    actions_ok = diff <= TOL[dtype] * max(1.0, scale) * 4
    later = slice(1, None)  # the first frame includes one-time work (capture, autotuning)
    return {"check": "frames", "preset": preset, "device": device, "dtype": dtype, "k": k, "N": n,
            "S": s, "frames": frames, "build_s": build_s, "parameter_bytes": param_bytes,
            "build_peak_bytes": build_peak, "build_peak_kind": "max_memory_allocated" if cuda else "peak RSS",
            "build_peak_over_parameters": build_peak / param_bytes, "ok": same_tokens and actions_ok,
            "same_tokens": same_tokens, "max_action_diff": diff, "action_scale": scale,
            "tokens_eager": eager["tokens"], "tokens_graphs": graphed["tokens"],
            "graph_sizes": graphed["graph_sizes"],
            "frame_ms_median": {"eager": statistics.median(eager["frame_ms"][later]),
                                "graphs": statistics.median(graphed["frame_ms"][later])},
            "decode_ms_median": {"eager": statistics.median(eager["decode_ms"][later]),
                                 "graphs": statistics.median(graphed["decode_ms"][later])}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("check", choices=("attention", "frames"))
    # --device, --dtype, --k, --N, --S from their engine knobs; --preset: bench/args.py
    add_bench_args(p, ("device", "dtype", "decode_steps_per_frame", "max_decode_steps",
                       "denoise_steps"), preset="pi05", device="cuda", dtype="bfloat16",
                   k=2, N=6, S=10)
    p.add_argument("--frames", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="fewer attention shapes (the CPU interpreter)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    from oxygen_ros.engine.runner.device import check_device

    check_device(a.device)
    if a.check == "attention":
        res = check_attention(a.device, a.quick)
        bad = [c for c in res["cases"] if not c["ok"]]
        line = f"attention: {len(res['cases']) - len(bad)}/{len(res['cases'])} cases within tolerance"
    else:
        res = check_frames(a.preset, a.device, a.dtype, a.frames, a.k, a.N, a.S)
        line = (f"frames ({a.preset} {a.dtype}, cuda_graphs off/on): same tokens {res['same_tokens']}, "
                f"max action diff {res['max_action_diff']:.2e}, frame ms {res['frame_ms_median']}, "
                f"decode ms {res['decode_ms_median']}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{a.check}.json").write_text(json.dumps(res, indent=1))
    print(("[PASS] " if res["ok"] else "[FAIL] ") + line, flush=True)
    return 0 if res["ok"] else 1
