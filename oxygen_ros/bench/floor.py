"""Memory-bandwidth floor of each stage: the bytes a stage must read (and write) at least, over the
device's memory bandwidth, and measured / floor for the stages oxygen-bench micro-benchmarks.

Bytes per stage (parameters counted on the preset's model built on the meta device, so nothing
is allocated; weights in the run's dtype):
- prefill of one observation: the vision tower + projector and the VLM expert's layers, plus
  the prefix's K/V written to the pool;
- one denoise step: the action expert's layers without its adaRMS dense layers (their output
  depends only on t, computed once per S: `adarms_once`), action in/out projections, the
  prefix + action K/V read once (all action queries share one block-table row) and the action
  tokens' K/V written;
- one batched decode step of B requests with C tokens of context each: the VLM expert's layers,
  the tied LM head (vocab x width: 257k x 2048 for pi0.5), B x C tokens of K/V read, B written.
Each stage's bytes are shown as weights and attention (K/V) apart, so that measured / floor on a
GPU tells a weight-bound stage from an attention-bound one; for the denoise step also the K/V
the Triton kernels load (per-query: once per action query; query-tiled: once per BLOCK_M).
Compute and launch overheads are ignored: a floor, not a prediction.

`python -m oxygen_ros.bench.floor --preset pi05 --dtype bfloat16 --device thor --k 1 --N 30 --S 10`
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import dataclass

import torch

from ..engine.config import DTYPES, PRESETS, ModelConfig, is_starvla, load_model_config

# GB/s (1e9 bytes/s) of memory bandwidth by a lower-case substring of the device name
KNOWN_BANDWIDTH_GBS = {"thor": 273.0, "h200": 4800.0, "rtx 4090": 1008.0, "4090": 1008.0}


def known_bandwidth(device_name: str | None) -> float | None:
    name = (device_name or "").lower()
    for key, gbs in KNOWN_BANDWIDTH_GBS.items():
        if key in name:
            return gbs
    return None


@dataclass(frozen=True)
class ParamCounts:
    vision: int  # tower + projector
    vlm_layers: int  # expert 0's decoder layers and final norm
    lm_head: int  # tied embedding (vocab x width), read by every logits computation
    action_step: int  # action expert layers without adaRMS dense + action in/out projections
    adarms_once: int  # adaRMS dense layers + time MLP: once per S


def no_floor_reason(config: ModelConfig) -> str | None:
    """Why this floor does not cover ``config`` (None: it does)."""
    if is_starvla(config):
        return (f"model {config.name!r}: its StarVLA heads are not MoT experts; the floor "
                f"covers kv-layerwise action experts only (docs/starvla.md)")
    return None


@functools.lru_cache(maxsize=8)
def count_params(config: ModelConfig, expert: int = 1) -> ParamCounts:
    from ..engine.model.mot import MoTModel

    reason = no_floor_reason(config)
    if reason:
        raise ValueError(reason)
    with torch.device("meta"):
        model = MoTModel(config)
    groups = dict(vision=0, vlm_layers=0, lm_head=0, action_step=0, adarms_once=0)
    for name, p in model.named_parameters():
        n = p.numel()
        if name.startswith("vision."):
            groups["vision"] += n
        elif name == "token_embedding.weight":
            groups["lm_head"] += n
        elif name.startswith("experts.0."):
            groups["vlm_layers"] += n
        elif name.startswith(f"experts.{expert}."):
            groups["adarms_once" if ".dense." in name else "action_step"] += n
        elif name.startswith(f"action_heads.{expert - 1}."):
            groups["adarms_once" if ".time_mlp" in name else "action_step"] += n
    return ParamCounts(**groups)


STAGES = ("prefill", "denoise_step", "adarms_once", "decode_step")


def _elem(dtype: str) -> int:
    """Bytes per element of one of the engine's DTYPES."""
    if dtype not in DTYPES:
        raise KeyError(dtype)
    return getattr(torch, dtype).itemsize


def stage_bytes(config: ModelConfig, dtype: str, batch: int, context_tokens: int,
                prefix_tokens: int | None = None) -> dict:
    """Bytes moved by one prefill, one denoise step, adarms once per S, one decode step (each the
    sum of its weight bytes and attention bytes, also returned apart as weights / attention)."""
    elem = _elem(dtype)
    c = count_params(config)
    kv_token = config.depth * 2 * config.num_kv_heads * config.head_dim * elem
    p = config.max_prefix_tokens if prefix_tokens is None else prefix_tokens
    h = config.action_horizon
    weights = {"prefill": (c.vision + c.vlm_layers) * elem, "denoise_step": c.action_step * elem,
               "adarms_once": c.adarms_once * elem,
               "decode_step": (c.vlm_layers + c.lm_head) * elem}
    # K/V through the pool: the prefix written; prefix + action tokens read once (all action
    # queries share one block-table row) and the action tokens written; each request's context
    # read and one token written
    attention = {"prefill": p * kv_token, "denoise_step": (p + h) * kv_token + h * kv_token,
                 "adarms_once": 0, "decode_step": batch * (context_tokens + 1) * kv_token}
    out: dict = {key: weights[key] + attention[key] for key in STAGES}
    out.update(kv_bytes_per_token=kv_token, weights=weights, attention=attention)
    return out


def denoise_kv_loads(config: ModelConfig, dtype: str, prefix_tokens: int | None = None) -> dict:
    """K/V bytes one denoise step's attention loads from L2 / HBM as each Triton kernel walks
    them: the per-query kernel reads the prefix + action keys once per action query, the
    query-tiled one once per tile of BLOCK_M queries (its launch for the action expert's heads
    in this dtype); the floor counts one pass. Caches may absorb the repeats: a GPU run says."""
    import torch

    from ..engine.attention.triton_paged import tiled_launch

    elem = _elem(dtype)
    p = config.max_prefix_tokens if prefix_tokens is None else prefix_tokens
    h = config.action_horizon
    one_pass = config.depth * 2 * config.num_kv_heads * config.head_dim * elem * (p + h)
    heads = getattr(config.action_experts[0], "num_heads", None) or config.num_heads
    launch = tiled_launch(heads, config.num_kv_heads, config.head_dim, 16, getattr(torch, dtype))
    block_m = dict(launch.constexprs)["BLOCK_M"]
    tiles = -(-h // block_m)
    return {"one_pass": one_pass, "per_query": h * one_pass, "tiled": tiles * one_pass,
            "block_m": block_m, "tiles": tiles, "queries": h}


def floor_table(config: ModelConfig, dtype: str, bandwidth_gbs: float, k: int, n: int, s: int,
                batch: int | None = None, context_tokens: int | None = None) -> dict:
    """Floor ms per stage and the oxygen frame at (k, N, S): one prefill, S denoise steps, k
    decode steps of the steady-state batch ceil(N / k) (one request born per frame)."""
    batch = batch or -(-n // k)
    ctx = context_tokens if context_tokens is not None else config.max_prefix_tokens + n
    b = stage_bytes(config, dtype, batch, ctx)
    ms = {key: b[key] / (bandwidth_gbs * 1e9) * 1e3 for key in STAGES}
    frame = ms["prefill"] + ms["adarms_once"] + s * ms["denoise_step"] + k * ms["decode_step"]
    return {"preset": config.name, "dtype": dtype, "bandwidth_gbs": bandwidth_gbs, "k": k, "N": n,
            "S": s, "batch": batch, "context_tokens": ctx, "bytes": b, "floor_ms": ms,
            "frame_floor_ms": frame, "action_hz_ceiling": 1e3 / frame,
            "tokens_per_s_ceiling": batch * k * 1e3 / frame,
            "denoise_kv_loads": denoise_kv_loads(config, dtype)}


def ratios(micro: dict, config: ModelConfig, dtype: str, bandwidth_gbs: float) -> list[dict]:
    """measured / floor for oxygen-bench's stage micro-benchmarks (bench.sweep.stage_micro)."""
    out = []
    ctx = micro.get("context_tokens", config.max_prefix_tokens)
    gbs = bandwidth_gbs * 1e9
    if "prefill_ms" in micro:
        floor = stage_bytes(config, dtype, 1, ctx)["prefill"] / gbs * 1e3
        out.append({"stage": "prefill", "measured_ms": micro["prefill_ms"], "floor_ms": floor})
    for s, ms in micro.get("denoise_ms", {}).items():
        b = stage_bytes(config, dtype, 1, ctx)
        floor = (int(s) * b["denoise_step"] + b["adarms_once"]) / gbs * 1e3
        out.append({"stage": f"denoise S={s}", "measured_ms": ms, "floor_ms": floor})
    for bsz, ms in micro.get("ms_per_step", {}).items():
        floor = stage_bytes(config, dtype, int(bsz), ctx)["decode_step"] / gbs * 1e3
        out.append({"stage": f"decode step batch {bsz}", "measured_ms": ms, "floor_ms": floor})
    for r in out:
        r["ratio"] = r["measured_ms"] / r["floor_ms"]
    return out


def markdown(table: dict, measured: list[dict] | None = None) -> str:
    t = table
    lines = [f"Bandwidth floor: {t['preset']} {t['dtype']} at {t['bandwidth_gbs']:g} GB/s "
             f"(k={t['k']} N={t['N']} S={t['S']}, decode batch {t['batch']}, "
             f"{t['context_tokens']} tokens of context)\n",
             "| stage | GB read/written | weights GB | attention K/V GB | floor ms | "
             "attention ms |", "| --- | --- | --- | --- | --- | --- |"]
    gbs = t["bandwidth_gbs"] * 1e9
    for key in STAGES:
        att = t["bytes"]["attention"][key]
        lines.append(f"| {key} | {t['bytes'][key] / 1e9:.3f} | {t['bytes']['weights'][key] / 1e9:.3f} "
                     f"| {att / 1e9:.4f} | {t['floor_ms'][key]:.2f} | {att / gbs * 1e3:.3f} |")
    lines.append(f"\nFrame floor {t['frame_floor_ms']:.1f} ms: at most {t['action_hz_ceiling']:.1f} Hz "
                 f"actions with {t['tokens_per_s_ceiling']:.0f} tokens/s.")
    kv = t.get("denoise_kv_loads")
    if kv:
        lines.append(
            f"\nK/V loaded per denoise step by the attention kernel ({kv['queries']} action "
            f"queries): per-query kernel {kv['per_query'] / 1e9:.3f} GB "
            f"({kv['per_query'] / gbs * 1e3:.2f} ms if none hits a cache), query-tiled "
            f"(BLOCK_M {kv['block_m']}, {kv['tiles']} tiles) {kv['tiled'] / 1e9:.3f} GB "
            f"({kv['tiled'] / gbs * 1e3:.2f} ms), one pass {kv['one_pass'] / 1e9:.4f} GB (the floor).")
    if measured:
        lines += ["\n| stage (micro-benchmark) | measured ms | floor ms | measured / floor |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| {r['stage']} | {r['measured_ms']:.2f} | {r['floor_ms']:.3f} | {r['ratio']:.1f}x |"
                  for r in measured]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="pi05", choices=sorted(PRESETS))
    p.add_argument("--model-config", default=None)
    p.add_argument("--dtype", default="bfloat16", choices=DTYPES)
    p.add_argument("--device", default="thor", help="device name (known: thor, h200, rtx 4090)")
    p.add_argument("--bandwidth-gbs", type=float, default=None, help="overrides the device's")
    p.add_argument("--k", type=int, default=1)
    p.add_argument("--N", type=int, default=30)
    p.add_argument("--S", type=int, default=10)
    p.add_argument("--batch", type=int, default=None, help="decode batch (default ceil(N/k))")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    bw = a.bandwidth_gbs or known_bandwidth(a.device)
    if bw is None:
        p.error(f"unknown device {a.device!r}: pass --bandwidth-gbs")
    config = load_model_config(a.preset, a.model_config)
    if no_floor_reason(config):
        p.error(no_floor_reason(config))
    table = floor_table(config, a.dtype, bw, a.k, a.N, a.S, a.batch)
    print(json.dumps(table, indent=1) if a.json else markdown(table), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def report_section(results: dict, bandwidth_gbs: float | None, model_config: str | None = None) -> str:
    """The oxygen-bench report's floor section; stores results['floor'] (per preset)."""
    env = results["env"]
    bw = bandwidth_gbs or known_bandwidth(env.get("gpu") or env.get("cpu"))
    md = ["\n## Bandwidth floor (bench/floor.py)\n"]
    if bw is None:
        md.append(f"No known memory bandwidth for {env.get('gpu') or env.get('cpu')}: pass "
                  "--bandwidth-gbs for the floor table and measured/floor ratios.\n")
        return "\n".join(md)
    results["floor"] = {}
    for preset, micro in results.get("decode_micro", {}).items():
        if not isinstance(micro, dict) or "ms_per_step" not in micro:
            continue
        cfg = load_model_config(preset, model_config)
        table = floor_table(cfg, env["dtype"], bw, 1, 30, 10)
        measured = ratios(micro, cfg, env["dtype"], bw)
        results["floor"][preset] = {"table": table, "ratios": measured}
        md.append(markdown(table, measured))
    return "\n".join(md)
