"""Parameter bytes and peak memory of building a preset's model for inference (random init +
fused projections, as the Engine holds it).

`oxygen-bench memory --preset pi05 --dtype bfloat16 [--device cuda] [--json]`
CPU: peak RSS of this process (ru_maxrss; the interpreter and torch included, ~0.4 GB), also
printed net of the RSS before the build. CUDA: torch.cuda.max_memory_allocated.
Run it in a fresh process: the peak RSS is the whole process's.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.config import family_registry
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.bench.args import add_bench_args
from oxygen_ros.bench.timing import peak_rss_bytes, rss_bytes


def measure_build(preset: str, dtype: str, device: str, layout: str = "standard", seed: int = 0
                  ) -> dict[str, float]:
    dev = torch.device(device)
    before = rss_bytes()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    t0 = time.perf_counter()
    config = PRESETS[preset]
    model = init_model(config, seed=seed, device=dev, dtype=dtype)
    family_registry.family_of(config).prepare(model, layout)  # fused projections, where the family has them
    took = time.perf_counter() - t0
    storages = {}  # fused views share storage with the parameters: count each storage once
    tensors = list(model.parameters()) + list(model.buffers()) + [
        v for m in model.modules() for v in vars(m).values() if isinstance(v, torch.Tensor)]
    for t in tensors:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    out = {"preset": preset, "dtype": dtype, "device": device, "build_s": round(took, 2),
           "parameters": sum(p.numel() for p in model.parameters()),
           "parameter_bytes": params, "held_bytes": sum(storages.values())}
    if dev.type == "cuda":
        out["peak_bytes"] = torch.cuda.max_memory_allocated(dev)
        out["peak_over_parameters"] = round(out["peak_bytes"] / params, 3)
    else:
        peak = peak_rss_bytes()
        out.update(rss_before_bytes=before, peak_rss_bytes=peak,
                   peak_over_parameters=round(peak / params, 3),
                   peak_net_over_parameters=round((peak - before) / params, 3))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # --dtype, --device, --linear-layout from their engine knobs; --preset: bench/args.py
    add_bench_args(p, ("dtype", "device", "linear_layout"), preset="pi05", dtype="bfloat16")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    r = measure_build(a.preset, a.dtype, a.device, a.linear_layout)
    if a.json:
        print(json.dumps(r))
        return 0
    gb = 1e9
    print(f"{r['preset']} {r['dtype']} on {r['device']}: {r['parameters'] / 1e9:.3f} B parameters, "
          f"{r['parameter_bytes'] / gb:.2f} GB; held after fusing {r['held_bytes'] / gb:.2f} GB; "
          f"built in {r['build_s']} s")
    if "peak_rss_bytes" in r:
        print(f"peak RSS {r['peak_rss_bytes'] / gb:.2f} GB = {r['peak_over_parameters']}x the parameters "
              f"({r['peak_net_over_parameters']}x net of the {r['rss_before_bytes'] / gb:.2f} GB before)")
    else:
        print(f"max_memory_allocated {r['peak_bytes'] / gb:.2f} GB = {r['peak_over_parameters']}x")
    return 0
