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
StarVLA models (docs/starvla.md): the prefill also writes the hidden states it keeps for the
heads; then each head in turn: a DiT's per-frame part (layer projections, cross K/V, what
depends only on t or the state; the kept hidden states read, the cross K/V written) and its
step (S times: the rest of its weights, the cross K/V read), OFT's MLP once; decode as above.
Each family counts its own parameters and prices its action stage (engine/families/:
Family.count_params, Family.action_costs); prefill and decode are priced here alike.
Each stage's bytes are shown as weights, attention (K/V) and hidden states apart, so that
measured / floor on a GPU tells a weight-bound stage from an attention-bound one; for the
denoise step also the K/V the Triton kernels load (per-query: once per action query;
query-tiled: once per BLOCK_M).
Compute and launch overheads are ignored: a floor, not a prediction.

The sweep's report has a floor section (report_section); `oxygen-bench floor` (bench/suite/floor.py)
prints one table.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from ..engine.config import (DTYPES, PRESETS, STARVLA_GR00T, STARVLA_OFT, STARVLA_PI_V3,
                             ModelConfig, frame_unsupported_reason, load_model_config)
from ..engine.families.base import ParamCounts
from ..engine.config.family_registry import family_of
from ..engine.families.pi05.family import MOT_PER_FRAME

# GB/s (1e9 bytes/s) of memory bandwidth by a lower-case substring of the device name
KNOWN_BANDWIDTH_GBS = {"thor": 273.0, "h200": 4800.0, "rtx 4090": 1008.0, "4090": 1008.0}


def known_bandwidth(device_name: str | None) -> float | None:
    name = (device_name or "").lower()
    for key, gbs in KNOWN_BANDWIDTH_GBS.items():
        if key in name:
            return gbs
    return None


def no_floor_reason(config: ModelConfig) -> str | None:
    """Why this floor does not cover ``config`` (None: it does): the models a frame cannot run
    (its family's unsupported_reason)."""
    reason = frame_unsupported_reason(config)
    if reason:
        return f"{reason}; the floor costs what a frame runs"
    return None


@functools.lru_cache(maxsize=8)
def count_params(config: ModelConfig, expert: int = 1) -> ParamCounts:
    """Parameters by what reads them, counted by the config's family on its model built on the
    meta device (Family.count_params)."""
    reason = no_floor_reason(config)
    if reason:
        raise ValueError(reason)
    return family_of(config).count_params(config, expert)


# MOT_PER_FRAME (engine/families/pi05/family.py): a kv-layerwise model's stages after the prefill and
# how many times a frame runs each: "1", "S" (denoise steps) or "k" (decode steps)


def _elem(dtype: str) -> int:
    """Bytes per element of one of the engine's DTYPES."""
    if dtype not in DTYPES:
        raise KeyError(dtype)
    return getattr(torch, dtype).itemsize


def head_stages(name: str) -> tuple[str, str]:
    """A StarVLA DiT head's two stages: once a frame, once per Euler step."""
    return f"head {name} (per frame)", f"head {name} step"


def stage_bytes(config: ModelConfig, dtype: str, batch: int, context_tokens: int,
                prefix_tokens: int | None = None) -> dict:
    """Bytes moved by each stage (``stages``, in frame order, each run ``per_frame`` times a
    frame: 1, S or k), each the sum of its weight, attention (K/V) and hidden-state bytes, also
    returned apart. kv-layerwise models: one prefill, one denoise step, adarms once per S, one
    decode step. StarVLA models: one prefill (+ the hidden states it keeps for the heads), each
    head's per-frame part and step (OFT: per frame only), one decode step."""
    elem = _elem(dtype)
    c = count_params(config)
    # what a sequence keeps (the family's cache spec): K/V per token of its attention layers,
    # and a recurrent state (hybrid backbones) written once by the prefill, read and written
    # by every decode step of every request
    spec = family_of(config).cache_spec(config)
    kv_token = spec.attention.bytes_per_token(elem)
    state = spec.recurrent.bytes_per_sequence() if spec.recurrent is not None else 0
    p = config.max_prefix_tokens if prefix_tokens is None else prefix_tokens
    weights = {"prefill": (c.vision + c.vlm_layers) * elem}
    attention = {"prefill": p * kv_token + state}
    hidden = {"prefill": 0}
    per_frame = {"prefill": "1"}
    # the family's action stage (engine/families/: Family.action_costs), in frame order
    for st in family_of(config).action_costs(config, c, p, elem):
        if st.name == "prefill":  # what the action stage makes the prefill do more
            weights["prefill"] += st.weights
            attention["prefill"] += st.attention
            hidden["prefill"] += st.hidden
            continue
        weights[st.name], attention[st.name] = st.weights, st.attention
        hidden[st.name], per_frame[st.name] = st.hidden, st.per_frame
    weights["decode_step"] = (c.vlm_layers + c.lm_head) * elem
    # each request's context read and one token written
    attention["decode_step"] = batch * ((context_tokens + 1) * kv_token + 2 * state)
    hidden["decode_step"] = 0
    per_frame["decode_step"] = "k"
    stages = tuple(per_frame)
    out: dict = {key: weights[key] + attention[key] + hidden[key] for key in stages}
    out.update(kv_bytes_per_token=kv_token, weights=weights, attention=attention, hidden=hidden,
               stages=stages, per_frame=per_frame)
    return out


def frame_bytes(b: dict, k: int, s: int, skip: tuple[str, ...] = ()) -> int:
    """Bytes of a frame's stages (but ``skip``), each times its per-frame count (1, S or k)."""
    times = {"1": 1, "S": s, "k": k}
    return sum(b[st] * times[n] for st, n in b["per_frame"].items() if st not in skip)


def action_bytes(b: dict, s: int) -> int:
    """Bytes of a frame's action stage with S steps (everything but the prefill and decode)."""
    return frame_bytes(b, 0, s, skip=("prefill", "decode_step"))


def denoise_kv_loads(config: ModelConfig, dtype: str, prefix_tokens: int | None = None) -> dict:
    """K/V bytes one denoise step's attention loads from L2 / HBM as each Triton kernel walks
    them: the per-query kernel reads the prefix + action keys once per action query, the
    query-tiled one once per tile of BLOCK_M queries (its launch for the action expert's heads
    in this dtype); the floor counts one pass. Caches may absorb the repeats: a GPU run says."""
    import torch

    from ..engine.runner.attention.triton_paged import tiled_launch

    elem = _elem(dtype)
    p = config.max_prefix_tokens if prefix_tokens is None else prefix_tokens
    h = config.action_horizon
    layers = config.action_experts[0].num_layers or config.depth
    one_pass = layers * 2 * config.num_kv_heads * config.head_dim * elem * (p + h)
    heads = getattr(config.action_experts[0], "num_heads", None) or config.num_heads
    launch = tiled_launch(heads, config.num_kv_heads, config.head_dim, 16, getattr(torch, dtype))
    block_m = dict(launch.constexprs)["BLOCK_M"]
    tiles = -(-h // block_m)
    return {"one_pass": one_pass, "per_query": h * one_pass, "tiled": tiles * one_pass,
            "block_m": block_m, "tiles": tiles, "queries": h}


def floor_table(config: ModelConfig, dtype: str, bandwidth_gbs: float, k: int, n: int, s: int,
                batch: int | None = None, context_tokens: int | None = None) -> dict:
    """Floor ms per stage and the oxygen frame at (k, N, S): one prefill, the action stage (S
    denoise steps; StarVLA: each head in turn, S steps per DiT), k decode steps of the
    steady-state batch ceil(N / k) (one request born per frame)."""
    batch = batch or -(-n // k)
    ctx = context_tokens if context_tokens is not None else config.max_prefix_tokens + n
    b = stage_bytes(config, dtype, batch, ctx)
    ms = {key: b[key] / (bandwidth_gbs * 1e9) * 1e3 for key in b["stages"]}
    frame = frame_bytes(b, k, s) / (bandwidth_gbs * 1e9) * 1e3
    return {"preset": config.name, "dtype": dtype, "bandwidth_gbs": bandwidth_gbs, "k": k, "N": n,
            "S": s, "batch": batch, "context_tokens": ctx, "bytes": b, "floor_ms": ms,
            "frame_floor_ms": frame, "action_hz_ceiling": 1e3 / frame,
            "tokens_per_s_ceiling": batch * k * 1e3 / frame,
            "action_floor_ms": action_bytes(b, s) / (bandwidth_gbs * 1e9) * 1e3,
            "denoise_kv_loads": denoise_kv_loads(config, dtype)
            if "denoise_step" in b["per_frame"] else None}


def ratios(micro: dict, config: ModelConfig, dtype: str, bandwidth_gbs: float) -> list[dict]:
    """measured / floor for oxygen-bench's stage micro-benchmarks (bench.sweep.stage_micro);
    its denoise_ms is the frame's whole action stage (StarVLA: every head in turn)."""
    out = []
    ctx = micro.get("context_tokens", config.max_prefix_tokens)
    gbs = bandwidth_gbs * 1e9
    b = stage_bytes(config, dtype, 1, ctx)
    action = family_of(config).action_stage_label
    if "prefill_ms" in micro:
        out.append({"stage": "prefill", "measured_ms": micro["prefill_ms"],
                    "floor_ms": b["prefill"] / gbs * 1e3})
    for s, ms in micro.get("denoise_ms", {}).items():
        out.append({"stage": f"{action} S={s}", "measured_ms": ms,
                    "floor_ms": action_bytes(b, int(s)) / gbs * 1e3})
    for bsz, ms in micro.get("ms_per_step", {}).items():
        floor = stage_bytes(config, dtype, int(bsz), ctx)["decode_step"] / gbs * 1e3
        out.append({"stage": f"decode step batch {bsz}", "measured_ms": ms, "floor_ms": floor})
    for r in out:
        r["ratio"] = r["measured_ms"] / r["floor_ms"]
    return out


def _times(table: dict, times: str) -> str:
    return "x 1" if times == "1" else f"x {times} = {table[times]}"


def markdown(table: dict, measured: list[dict] | None = None) -> str:
    t = table
    lines = [f"Bandwidth floor: {t['preset']} {t['dtype']} at {t['bandwidth_gbs']:g} GB/s "
             f"(k={t['k']} N={t['N']} S={t['S']}, decode batch {t['batch']}, "
             f"{t['context_tokens']} tokens of context)\n",
             "| stage | GB read/written | weights GB | attention K/V GB | floor ms | "
             "attention ms | hidden states GB | per frame |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    gbs = t["bandwidth_gbs"] * 1e9
    b = t["bytes"]
    for key in b["stages"]:
        att = b["attention"][key]
        times = b["per_frame"][key]
        lines.append(f"| {key} | {b[key] / 1e9:.3f} | {b['weights'][key] / 1e9:.3f} "
                     f"| {att / 1e9:.4f} | {t['floor_ms'][key]:.2f} | {att / gbs * 1e3:.3f} "
                     f"| {b['hidden'][key] / 1e9:.4f} | {_times(t, times)} |")
    lines.append(f"\nFrame floor {t['frame_floor_ms']:.1f} ms (action stage "
                 f"{t['action_floor_ms']:.1f} ms): at most {t['action_hz_ceiling']:.1f} Hz "
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


# --heads: the full-size StarVLA heads (engine/config/presets.py) by head name
FULL_SIZE_HEADS = {"pi_v3": STARVLA_PI_V3, "gr00t": STARVLA_GR00T, "oft": STARVLA_OFT}


def with_heads(config: ModelConfig, names: str) -> ModelConfig:
    """``config`` with its action experts replaced by the full-size StarVLA heads ``names``
    (comma-separated, in frame order: ``pi_v3,gr00t,oft`` is E = 4); ValueError where they do
    not fit the backbone."""
    picked = [x.strip() for x in names.split(",") if x.strip()]
    unknown = [x for x in picked if x not in FULL_SIZE_HEADS]
    if not picked or unknown:
        raise ValueError(f"--heads takes a comma-separated list of {sorted(FULL_SIZE_HEADS)}, "
                         f"got {names!r}")
    try:
        out = config.replace(name=f"{config.name}[{'+'.join(picked)}]", family="starvla",
                             action_experts=tuple(FULL_SIZE_HEADS[x] for x in picked))
    except ValueError as err:  # the starvla family's rules: a Qwen3-VL backbone, the queries
        raise ValueError(f"StarVLA heads on {config.name!r}: {err}") from None
    count_params(out)  # builds the heads on meta: a head that does not fit the backbone says so
    return out




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
        if no_floor_reason(cfg):
            md.append(f"{preset}: no floor ({no_floor_reason(cfg)}).\n")
            continue
        table = floor_table(cfg, env["dtype"], bw, 1, 30, 10)
        measured = ratios(micro, cfg, env["dtype"], bw)
        results["floor"][preset] = {"table": table, "ratios": measured}
        md.append(markdown(table, measured))
    return "\n".join(md)
