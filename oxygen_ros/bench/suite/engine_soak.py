"""Engine soak: does anything the engine holds grow with the number of frames?

The real model (tiny preset by default), a memory request every frame and a question every
`--ask-every` frames; prints, at checkpoints, the live Request objects (gc), traced Python memory
(tracemalloc) and the engine's KV blocks in use, then the growth per frame after the warm-up.

    oxygen-bench engine-soak --frames 2000 --mode oxygen
"""
from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc

import torch

from oxygen_ros.bench.args import add_bench_args
from oxygen_ros.engine.config import EngineConfig, load_model_config
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.core.request import Request
from oxygen_ros.engine.core.synthetic import SyntheticStream


def live_requests() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, Request))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # --mode, --k, --N, --S from their engine knobs; --preset, --threads: bench/args.py
    add_bench_args(ap, ("mode", "decode_steps_per_frame", "max_decode_steps", "denoise_steps"),
                   preset="tiny", threads=1, mode="oxygen", k=4, N=12, S=2)
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--every", type=int, default=200, help="checkpoint every this many frames")
    ap.add_argument("--ask-every", type=int, default=50)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    mc = load_model_config(args.preset)
    engine = Engine(mc, EngineConfig(mode=args.mode, decode_steps_per_frame=args.k,
                                     max_decode_steps=args.N, denoise_steps=args.S,
                                     memory_every_n_frames=1))
    stream = SyntheticStream(mc, seed=0)
    frames = [stream.frame(i) for i in range(8)]  # reused: the inputs do not grow
    tracemalloc.start()
    rows = []
    start = time.perf_counter()
    for i in range(args.frames + 1):
        if i % args.every == 0 or i == args.warmup:
            gc.collect()
            row = {"frame": i, "live_requests": live_requests(),
                   "traced_bytes": tracemalloc.get_traced_memory()[0],
                   "kv_blocks_used": engine.kv.usage().blocks_used,
                   "elapsed_s": round(time.perf_counter() - start, 1)}
            rows.append(row)
            print(json.dumps(row), flush=True)
        if i == args.frames:
            break
        if i % args.ask_every == 0:
            engine.ask("What is on the table?\n")
        engine.step(frames[i % len(frames)])
    tracemalloc.stop()
    warm = next(r for r in rows if r["frame"] == args.warmup)
    end = rows[-1]
    span = end["frame"] - warm["frame"]
    print(json.dumps({
        "mode": args.mode, "preset": args.preset, "frames": args.frames,
        "live_requests_after_warmup": warm["live_requests"], "live_requests_end": end["live_requests"],
        "live_requests_per_frame": (end["live_requests"] - warm["live_requests"]) / span,
        "traced_bytes_per_frame": (end["traced_bytes"] - warm["traced_bytes"]) / span,
    }))
