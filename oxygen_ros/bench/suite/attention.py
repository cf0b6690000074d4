"""Paged attention micro-benchmark: one layer's attention call at the engine's shapes.

`oxygen-bench attention [--threads 1] [--backends cpp,reference]` prints the median
milliseconds per call for
- denoise: the action queries of one frame (one block-table row, all seeing prefix + horizon),
- suffix: a causal prompt suffix after the prefix,
- decode: one query per request over its own prefix + generated tokens (batch 30),
on pi0.5's attention shape (8 query heads, 1 KV head, head_dim 256) unless told otherwise.
The default denoise case is 10 action queries over 316 keys (the OxyGen authors' "larger" shape).
For the triton backend, denoise and suffix run twice: `triton` is the per-query kernel (one
program per query and KV head) and `triton-tiled` the query-tiled one (BLOCK_M queries of the
sequence per program, as the engine dispatches them):
`oxygen-bench attention --backends triton --device cuda --dtype bfloat16 --horizon 50`
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from oxygen_ros.engine.runner.attention import paged_attention, select_backend
from oxygen_ros.bench.args import add_bench_args


def _case(kind: str, prefix: int, horizon: int, batch: int, heads: int, kv_heads: int, dim: int,
          block_size: int, dtype: torch.dtype, device: str):
    g = torch.Generator().manual_seed(0)
    if kind == "denoise":
        rows, lens = [0] * horizon, [prefix + horizon] * horizon
    elif kind == "suffix":
        rows, lens = [0] * horizon, [prefix + i + 1 for i in range(horizon)]
    else:
        rows, lens = list(range(batch)), [prefix + 1 + i % 16 for i in range(batch)]
    width = -(-max(lens) // block_size)
    num_rows = max(rows) + 1
    nb = num_rows * width + 1
    kc = torch.randn(nb, block_size, kv_heads, dim, generator=g).to(dtype).to(device)
    vc = torch.randn(nb, block_size, kv_heads, dim, generator=g).to(dtype).to(device)
    tables = torch.randperm(nb - 1, generator=g)[: num_rows * width].view(num_rows, width).int()
    q = torch.randn(len(rows), heads, dim, generator=g).to(dtype).to(device)
    as_int = lambda v: torch.tensor(v, dtype=torch.int32, device=device)  # noqa: E731
    return q, kc, vc, tables.to(device), as_int(rows), as_int(lens)


def time_call(backend: str, args, scale: float, repeats: int,
              seq_start: torch.Tensor | None = None) -> float:
    """Median ms of `repeats` calls after two warm-up calls (CUDA-synchronised)."""
    sync = torch.cuda.synchronize if args[0].is_cuda else (lambda: None)
    times = []
    for i in range(repeats + 2):
        sync()
        t0 = time.perf_counter()
        paged_attention(backend, *args, scale, seq_start)
        sync()
        if i >= 2:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="cpp,reference", help="comma-separated: cpp, triton, reference")
    # --device, --dtype from their engine knobs; --threads (0: leave torch's): bench/args.py
    add_bench_args(p, ("device", "dtype"), threads=0)
    p.add_argument("--prefix", type=int, default=306)
    p.add_argument("--horizon", type=int, default=10)
    p.add_argument("--batch", type=int, default=30)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=1)
    p.add_argument("--head-dim", type=int, default=256)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    results = {}
    for kind in ("denoise", "suffix", "decode"):
        args = _case(kind, a.prefix, a.horizon, a.batch, a.heads, a.kv_heads, a.head_dim,
                     a.block_size, dtype, a.device)
        for name in a.backends.split(","):
            backend = select_backend(name, a.device)
            results[f"{kind}/{backend}"] = time_call(backend, args, a.head_dim ** -0.5, a.repeats)
            if backend == "triton" and kind != "decode":  # one sequence: the tiled kernel
                starts = torch.tensor([0, a.horizon], dtype=torch.int32, device=a.device)
                results[f"{kind}/triton-tiled"] = time_call(backend, args, a.head_dim ** -0.5,
                                                            a.repeats, starts)
    if a.json:
        print(json.dumps(results, indent=1))
    else:
        print(f"paged attention, {a.device} {a.dtype}, {torch.get_num_threads()} thread(s), "
              f"heads {a.heads}:{a.kv_heads} x {a.head_dim}, prefix {a.prefix}, horizon {a.horizon}, "
              f"decode batch {a.batch}")
        for key, ms in results.items():
            print(f"  {key:<22} {ms:8.3f} ms")
    return 0
