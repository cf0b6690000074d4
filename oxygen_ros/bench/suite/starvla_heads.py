"""What each StarVLA action head costs per frame on its own (engine/families/starvla/heads.py; not a
CI test): random hidden states for one prefix, then per head its per-frame part
(crossattn_memory: projections and cross K/V) and its S Euler steps (DiTs), or its one shot
(OFT): the heads alone, no prefill, no language, no scheduling (the engine's frame runs
them in turn after one shared prefill: oxygen-bench's action stage, bench/table4's E comparison).

    source scripts/env.sh && oxygen-bench starvla-heads --preset starvla-tiny-e4 \
        --out benchmarks/results/starvla-heads-<date>.md

Medians over --repeats frames after --warmup (bench/timing.median_ms); the machine may be shared (say so beside numbers).
"""
from __future__ import annotations

import argparse
import platform
from pathlib import Path

import torch

from oxygen_ros.bench.args import add_bench_args
from oxygen_ros.bench.timing import median_ms
from oxygen_ros.engine.config import PRESETS, STARVLA_GR00T, STARVLA_OFT, STARVLA_PI_V3
from oxygen_ros.engine.families.starvla.heads import (build_head, crossattn_memory,
                                                      crossattn_sample, init_head, kept_layers,
                                                      query_positions, regress_chunk)

PRESET_CHOICES = ("starvla-tiny", "starvla-tiny-e3", "starvla-tiny-e4", "starvla", "starvla-e4")


def config(name: str):
    if name == "starvla-e4":  # the full-size backbone with all three heads
        return PRESETS["starvla"].replace(name=name, action_experts=(STARVLA_PI_V3, STARVLA_GR00T,
                                                                     STARVLA_OFT))
    return PRESETS[name]


def run(a: argparse.Namespace) -> str:
    mc = config(a.preset)
    dev, dtype = torch.device(a.device), getattr(torch, a.dtype)
    p = mc.prefix_tokens(mc.num_cameras, a.prompt_tokens)
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(mc.depth, 1, p, mc.vlm.width, generator=gen).to(dev, dtype)
    ids = torch.randint(0, 100, (1, p), generator=gen)
    rows = []
    with torch.inference_mode():
        for i, e in enumerate(mc.action_experts):
            head = init_head(build_head(e, mc.vlm.width), seed=i).to(dev, dtype)
            c = e.head
            if e.kind == "regress":
                ids[0, p - c.horizon - 5:p - 5] = c.query_token_id
                pos = query_positions(ids, c.query_token_id, c.horizon).to(dev)
                name = "OFT"

                def frame():
                    regress_chunk(head, hidden[-1], pos)
            else:
                src = hidden[-1] if c.source == "last" else hidden[mc.depth - e.num_layers:]
                noise = torch.randn(1, c.horizon, c.action_dim, generator=gen).to(dev)
                state = torch.zeros(1, c.state_dim, device=dev) if c.state_dim else None
                name = "PI_v3" if c.source == "layerwise" else "GR00T"

                def frame():
                    crossattn_sample(head, crossattn_memory(head, src), noise, a.S, state)
            params = sum(t.numel() for t in head.parameters()) / 1e6
            for _ in range(a.warmup - 1):  # median_ms runs one more first
                frame()
            ms = median_ms(frame, a.repeats)
            rows.append(f"| {name} | {e.kind} | {params:.2f} | {ms:.2f} |")
            del head
    lines = [f"# StarVLA heads alone: {mc.name}, {a.dtype} on {a.device}", "",
             f"`oxygen-bench starvla-heads --preset {a.preset} --S {a.S} --prompt-tokens "
             f"{a.prompt_tokens} --device {a.device} --dtype {a.dtype} --repeats {a.repeats}`", "",
             f"Prefix of {p} tokens ({mc.num_cameras} cameras, a {a.prompt_tokens}-token prompt), "
             f"one frame, S = {a.S}; torch {torch.__version__}, {platform.processor() or 'cpu'} "
             f"with {torch.get_num_threads()} threads; medians of {a.repeats} frames. The "
             f"machine may be shared with other work: compare rows within this run only. The "
             f"heads read {len(kept_layers(mc))} kept layer(s) of the prefill.", "",
             "| head | kind | parameters (M) | ms per frame |", "|---|---|---|---|", *rows, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # --S, --device, --dtype from their engine knobs; --preset: bench/args.py
    add_bench_args(ap, ("denoise_steps", "device", "dtype"), preset="starvla-tiny-e4",
                   presets=PRESET_CHOICES, S=4)
    ap.add_argument("--prompt-tokens", type=int, default=116, help="the paper's StarVLA prompt")
    ap.add_argument("--warmup", type=int, default=3, help="frames run before timing (>= 1)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", default=None, help="markdown file to write (default: print)")
    a = ap.parse_args(argv)
    text = run(a)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text)
    print(text)
    return 0
