"""oxygen-bench floor: the memory-bandwidth floor of each stage of a frame (bench/floor.py),
as a markdown table or --json.

    oxygen-bench floor --preset pi05 --dtype bfloat16 --device thor --k 1 --N 30 --S 10
    oxygen-bench floor --preset starvla --heads pi_v3,gr00t,oft --S 4     # E = 4
"""
from __future__ import annotations

import argparse
import json

from oxygen_ros.bench.args import add_bench_args
from oxygen_ros.bench.floor import floor_table, known_bandwidth, markdown, no_floor_reason, with_heads
from oxygen_ros.engine.config import load_model_config


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # --k, --N, --S, --dtype as their engine knobs declare them (a model: no torch device)
    add_bench_args(p, ("decode_steps_per_frame", "max_decode_steps", "denoise_steps", "dtype"),
                   preset="pi05", k=1, N=30, S=10, dtype="bfloat16")
    p.add_argument("--model-config", default=None)
    p.add_argument("--device", default="thor", help="device name (known: thor, h200, rtx 4090)")
    p.add_argument("--bandwidth-gbs", type=float, default=None, help="overrides the device's")
    p.add_argument("--batch", type=int, default=None, help="decode batch (default ceil(N/k))")
    p.add_argument("--heads", default=None,
                   help="replace the preset's action experts by these full-size StarVLA heads, "
                        "in frame order (pi_v3, gr00t, oft; e.g. pi_v3,gr00t,oft is E = 4)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    bw = a.bandwidth_gbs or known_bandwidth(a.device)
    if bw is None:
        p.error(f"unknown device {a.device!r}: pass --bandwidth-gbs")
    config = load_model_config(a.preset, a.model_config)
    if a.heads:
        try:
            config = with_heads(config, a.heads)
        except ValueError as err:
            p.error(str(err))
    if no_floor_reason(config):
        p.error(no_floor_reason(config))
    table = floor_table(config, a.dtype, bw, a.k, a.N, a.S, a.batch)
    print(json.dumps(table, indent=1) if a.json else markdown(table), end="")
    return 0
