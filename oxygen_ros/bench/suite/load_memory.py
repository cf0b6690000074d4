"""Peak resident memory of loading a checkpoint (oxygen_ros.engine.families.pi05.checkpoint.load_weights).

    oxygen-bench load-memory --preset pi05 --dtype bfloat16 --dir /tmp/oxy-load
    oxygen-bench load-memory --file /data/pi05/model.safetensors --preset pi05

Without --file it first writes a random checkpoint of the preset's shape in the LeRobot key layout
(streamed tensor by tensor, so writing needs no model in memory; 6.7 GB for pi05 in bf16; the
values are one random block repeated) and
deletes it afterwards unless --keep. The load runs in a fresh subprocess, which reports its
resident set before loading and its peak (ru_maxrss, which counts touched file pages of the
mapping as well) against the parameter bytes in the target dtype.
"""
from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import time
from pathlib import Path

from oxygen_ros.bench.args import add_bench_args
from oxygen_ros.bench.registry import child_command
from oxygen_ros.bench.timing import peak_rss_bytes, rss_bytes

_ST = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def write_random_checkpoint(path: Path, preset: str, dtype: str, seed: int = 0) -> int:
    """Stream a safetensors file (8-byte header length, JSON header, data) of random weights."""
    import torch

    from oxygen_ros.engine.config import PRESETS
    from oxygen_ros.engine.families.pi05.checkpoint import to_lerobot_name
    from oxygen_ros.engine.families.pi05.model import MoTModel

    config = PRESETS[preset]
    tdtype = getattr(torch, dtype)
    with torch.device("meta"):
        shapes = {to_lerobot_name(n): tuple(t.shape) for n, t in MoTModel(config).state_dict().items()}
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for key, shape in shapes.items():
        n = 1
        for d in shape:
            n *= d
        nbytes = n * tdtype.itemsize
        header[key] = {"dtype": _ST[dtype], "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    # one random block of 16 M values, repeated: the values do not matter for memory, and drawing
    # 3.35 B normal samples would take minutes
    block = torch.randn(1 << 24, generator=torch.Generator().manual_seed(seed)).mul_(0.02).to(tdtype)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for key, shape in shapes.items():
            flat = torch.empty(shape, dtype=tdtype).reshape(-1)
            for i in range(0, flat.numel(), 1 << 24):  # 16 M values at a time
                blk = flat[i: i + (1 << 24)]
                blk.copy_(block[: blk.numel()])
            f.write(flat.view(torch.uint8).numpy().tobytes())
            del flat
    (path.parent / "config.json").write_text(json.dumps({"oxygen_model_config": config.to_dict()}))
    return offset


def _child(path: str, preset: str, dtype: str) -> None:
    import torch

    from oxygen_ros.engine.config import PRESETS
    from oxygen_ros.engine.families.pi05.checkpoint import load_weights

    config = PRESETS[preset]
    before = rss_bytes()
    t0 = time.perf_counter()
    model = load_weights(path, config, "cpu", dtype, progress=True)
    seconds = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    peak = peak_rss_bytes()
    assert all(p.dtype == getattr(torch, dtype) for p in model.parameters())
    print(json.dumps({"preset": preset, "dtype": dtype, "params": params, "param_bytes": param_bytes,
                      "rss_before": before, "peak_rss": peak, "rss_after": rss_bytes(),
                      "peak_over_param_bytes": peak / param_bytes,
                      "load_added_over_param_bytes": (peak - before) / param_bytes,
                      "seconds": round(seconds, 1)}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # --dtype from its engine knob (the same three dtypes as _ST); --preset: bench/args.py
    add_bench_args(ap, ("dtype",), preset="pi05", dtype="bfloat16")
    ap.add_argument("--file-dtype", default=None, choices=sorted(_ST), help="default: --dtype")
    ap.add_argument("--dir", default="/tmp/oxygen-load-memory")
    ap.add_argument("--file", default=None, help="an existing model.safetensors of the preset's shape")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.file, args.preset, args.dtype)
        return 0
    path = Path(args.file) if args.file else Path(args.dir) / "model.safetensors"
    written = False
    if not args.file:
        path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        n = write_random_checkpoint(path, args.preset, args.file_dtype or args.dtype)
        written = True
        print(f"wrote {n / 2**30:.2f} GiB in {time.perf_counter() - t0:.0f} s: {path}", file=sys.stderr)
    try:
        out = subprocess.run(child_command("oxygen_ros.bench.suite.load_memory:main", "--child", "--file", str(path),
                                           "--preset", args.preset, "--dtype", args.dtype), check=True, stdout=subprocess.PIPE,
                             text=True).stdout.strip().splitlines()[-1]
    finally:
        if written and not args.keep:
            path.unlink()
    r = json.loads(out)
    r["file_dtype"] = args.file_dtype or args.dtype
    gib = 2 ** 30
    print(f"{r['preset']} {r['file_dtype']} file -> {r['dtype']}: {r['params'] / 1e9:.3f} B params, "
          f"{r['param_bytes'] / gib:.2f} GiB; RSS before {r['rss_before'] / gib:.2f} GiB, peak "
          f"{r['peak_rss'] / gib:.2f} GiB = {r['peak_over_param_bytes']:.3f}x the parameter bytes "
          f"(loading added {r['load_added_over_param_bytes']:.3f}x); {r['seconds']} s")
    print(json.dumps(r))
    return 0
