"""Bandwidth floor (bench/floor.py): bytes per stage from the model's own parameter counts."""
from __future__ import annotations

import pytest

from oxygen_ros.bench.floor import (count_params, floor_table, known_bandwidth, markdown, ratios,
                                    report_section, stage_bytes)
from oxygen_ros.engine.config import PRESETS


def test_every_parameter_is_in_one_group():
    import torch

    from oxygen_ros.engine.families.pi05.model import MoTModel

    for name in ("tiny", "small"):
        with torch.device("meta"):
            total = sum(p.numel() for p in MoTModel(PRESETS[name]).parameters())
        c = count_params(PRESETS[name])
        assert c.vision + c.vlm_layers + c.lm_head + c.action_step + c.adarms_once == total
    # the Qwen3-VL family on its own model: the DiT's 2 layers, not one per backbone layer
    from oxygen_ros.engine.families.qwen3vl.model import Qwen3VLModel

    cfg = PRESETS["xr0-tiny"]
    with torch.device("meta"):
        model = Qwen3VLModel(cfg)
    c = count_params(cfg)
    assert c.total == sum(p.numel() for p in model.parameters()) and c.unread == 0
    assert c.action_step + c.adarms_once == sum(p.numel() for p in model.experts[0].parameters())
    assert c.vlm_layers == sum(p.numel() for p in model.language_model.parameters()) - c.lm_head


def test_pi05_on_thor():
    """pi0.5 bf16 at 273 GB/s, k=1 N=30 S=10: ~17.6 ms prefill, ~2.35 ms per denoise step,
    ~20 ms per batch-30 decode step: about 16 Hz, far from 100 Hz."""
    t = floor_table(PRESETS["pi05"], "bfloat16", known_bandwidth("NVIDIA Jetson AGX Thor"), 1, 30, 10)
    ms = t["floor_ms"]
    assert ms["prefill"] == pytest.approx(17.6, rel=0.02)
    assert ms["denoise_step"] == pytest.approx(2.35, rel=0.02)
    assert ms["decode_step"] == pytest.approx(20.4, rel=0.02)
    assert 15 < t["action_hz_ceiling"] < 17 and 450 < t["tokens_per_s_ceiling"] < 510
    assert t["bytes"]["decode_step"] > 2 * 257152 * 2048  # the LM head alone is 1.05 GB
    # the H200's bandwidth, same bytes
    h = floor_table(PRESETS["pi05"], "bfloat16", known_bandwidth("NVIDIA H200"), 1, 30, 10)
    assert h["frame_floor_ms"] == pytest.approx(t["frame_floor_ms"] * 273 / 4800)


def test_kv_bytes_grow_with_batch_and_context():
    a = stage_bytes(PRESETS["tiny"], "float32", 1, 100)["decode_step"]
    b = stage_bytes(PRESETS["tiny"], "float32", 2, 100)["decode_step"]
    c = stage_bytes(PRESETS["tiny"], "float32", 2, 200)["decode_step"]
    kv = stage_bytes(PRESETS["tiny"], "float32", 1, 100)["kv_bytes_per_token"]
    assert kv == 2 * 2 * 1 * 32 * 4 and b - a == 101 * kv and c - b == 2 * 100 * kv


def test_ratios_and_report_section():
    micro = {"context_tokens": 40, "prefill_ms": 2.0, "denoise_ms": {"10": 5.0},
             "ms_per_step": {"1": 1.0, "4": 1.5}}
    r = ratios(micro, PRESETS["tiny"], "float32", 10.0)
    assert [x["stage"] for x in r] == ["prefill", "denoise S=10", "decode step batch 1", "decode step batch 4"]
    assert all(x["ratio"] == pytest.approx(x["measured_ms"] / x["floor_ms"]) for x in r)
    results = {"env": {"cpu": "some cpu", "dtype": "float32"}, "decode_micro": {"tiny": micro}}
    assert "pass --bandwidth-gbs" in report_section(results, None)
    text = report_section(results, 10.0)
    assert "measured / floor" in text and results["floor"]["tiny"]["ratios"] == r
    assert "| decode_step |" in markdown(results["floor"]["tiny"]["table"])
    assert known_bandwidth("GeForce RTX 4090") == 1008 and known_bandwidth("some cpu") is None


def test_attention_bytes_beside_weight_bytes():
    """Each stage's bytes split into weights and attention K/V (reads of the pool and the new
    tokens' writes), so a GPU run's measured / floor shows which of the two a stage is bound by."""
    cfg = PRESETS["pi05"]
    b = stage_bytes(cfg, "bfloat16", 30, 998)
    kv = b["kv_bytes_per_token"]
    assert kv == 18 * 2 * 1 * 256 * 2
    for stage in ("prefill", "denoise_step", "adarms_once", "decode_step"):
        assert b[stage] == b["weights"][stage] + b["attention"][stage]
    p, h = cfg.max_prefix_tokens, cfg.action_horizon
    assert b["attention"]["denoise_step"] == (p + 2 * h) * kv  # prefix + actions read, actions written
    assert b["attention"]["decode_step"] == 30 * 999 * kv
    assert b["attention"]["adarms_once"] == 0 and b["weights"]["prefill"] > 4.7e9
    t = floor_table(cfg, "bfloat16", 273.0, 1, 30, 10)
    text = markdown(t)
    assert "| weights GB | attention K/V GB |" in text
    assert "| decode_step | 5.569 | 5.017 | 0.5524 | 20.40 | 2.023 |" in text


def test_denoise_kv_loads_per_kernel():
    """pi0.5's 50 action queries over a ~1 MB-per-layer prefix: the per-query kernel loads the
    K/V 50 times per step (~0.94 GB, the cost the query-tiled kernel removes), the tiled one once
    per tile of BLOCK_M (4 in bf16: 13 tiles), the floor once."""
    from oxygen_ros.bench.floor import denoise_kv_loads

    kv = denoise_kv_loads(PRESETS["pi05"], "bfloat16")
    assert kv["one_pass"] == 18 * 2 * 256 * 2 * (968 + 50)
    assert kv["per_query"] == 50 * kv["one_pass"] and kv["per_query"] == pytest.approx(0.938e9, rel=1e-3)
    assert kv["block_m"] == 4 and kv["tiles"] == 13 and kv["tiled"] == 13 * kv["one_pass"]
    assert "query-tiled (BLOCK_M 4, 13 tiles) 0.244 GB" in markdown(
        floor_table(PRESETS["pi05"], "bfloat16", 273.0, 1, 30, 10))


# ---- StarVLA heads (docs/starvla.md) ----------------------------------------------------------
def _linear(i: int, o: int) -> int:
    return i * o + o


def _tiny_head_groups(cfg, e) -> tuple[int, int, int]:
    """(per frame, per step, unread) parameters of a tiny head from its config's shapes alone:
    once a frame the projections, the cross blocks' K/V, the timestep MLP, the adaLNs and the
    state encoder; the learned positions past the chunk never; every step the rest."""
    w, v, h = e.width, cfg.vlm.width, e.head
    if e.kind == "regress":
        hid = e.mlp_dim
        once = 2 * v + _linear(v, hid) + e.num_layers * (2 * hid + _linear(hid, hid)) + 2 * hid \
            + _linear(hid, h.action_dim)
        return once, 0, 0
    cross = [i for i in range(e.num_layers) if not (h.interleave_self_attention and i % 2)]
    kv = w if h.source == "layerwise" else v
    once = len(cross) * 2 * _linear(kv, w) + e.num_layers * _linear(w, 2 * w) \
        + _linear(h.time_channels, w) + _linear(w, w)
    if h.source == "layerwise":
        once += len(cross) * (2 * v + _linear(v, w))
    if h.output_dim:
        once += _linear(w, 2 * w)
    if h.state_dim:
        once += _linear(h.state_dim, h.mlp_hidden) + _linear(h.mlp_hidden, w)
    selfs = e.num_layers - len(cross)
    step = e.num_layers * (2 * _linear(w, w) + _linear(w, e.mlp_dim) + _linear(e.mlp_dim, w)) \
        + selfs * 2 * _linear(w, w) + _linear(h.action_dim, w) + _linear(2 * w, w) + _linear(w, w) \
        + h.horizon * w + h.future_tokens * w + _linear(h.output_dim or w, h.mlp_hidden) \
        + _linear(h.mlp_hidden, h.action_dim)
    if h.output_dim:
        step += _linear(w, h.output_dim)
    return once, step, (h.max_positions - h.horizon) * w


def test_starvla_heads_counted_by_what_reads_them():
    """Each tiny head's parameters split into per frame / per step / unread as its shapes say,
    and with the backbone they add up to the Qwen3-VL model's parameters (meta device)."""
    import torch

    from oxygen_ros.engine.families.qwen3vl.model import Qwen3VLModel

    cfg = PRESETS["starvla-tiny-e4"]
    c = count_params(cfg)
    assert [h.name for h in c.heads] == ["pi_v3", "gr00t", "oft"]
    for hp, e in zip(c.heads, cfg.action_experts):
        assert (hp.per_frame, hp.per_step, hp.unread) == _tiny_head_groups(cfg, e), hp.name
    with torch.device("meta"):
        total = sum(p.numel() for p in Qwen3VLModel(cfg).parameters())
    assert c.total == total and c.action_step == c.adarms_once == 0
    # the backbone is the same whatever heads run
    c2 = count_params(PRESETS["starvla-tiny"])
    assert (c2.vision, c2.vlm_layers, c2.lm_head) == (c.vision, c.vlm_layers, c.lm_head)


def test_starvla_stage_bytes_from_shapes():
    """starvla-tiny-e4 in float32: the prefill writes the pool K/V and the kept hidden states (the
    last 4 layers over the prefix + OFT's 9 query rows); a DiT head reads its per-frame weights
    and the kept hidden states once, writes its cross K/V; every step reads its step weights and
    that K/V; OFT reads its MLP once; the frame is prefill + heads (S steps each) + k decodes."""
    cfg = PRESETS["starvla-tiny-e4"]
    p, v, f = cfg.max_prefix_tokens, cfg.vlm.width, 4
    b = stage_bytes(cfg, "float32", 30, p + 30)
    assert b["stages"] == ("prefill", "head pi_v3 (per frame)", "head pi_v3 step",
                           "head gr00t (per frame)", "head gr00t step", "head oft", "decode_step")
    assert b["hidden"]["prefill"] == (4 * p + 9) * v * f
    pi, gr, oft = cfg.action_experts
    for e, name, layers, cross in ((pi, "pi_v3", 4, 4), (gr, "gr00t", 1, 2)):
        once, step, _ = _tiny_head_groups(cfg, e)
        kv = 2 * cross * p * e.width * f
        assert b["weights"][f"head {name} (per frame)"] == once * f
        assert b["attention"][f"head {name} (per frame)"] == kv
        assert b["hidden"][f"head {name} (per frame)"] == layers * p * v * f
        assert b[f"head {name} step"] == step * f + kv
    assert b["head oft"] == _tiny_head_groups(cfg, oft)[0] * f + 9 * v * f
    t = floor_table(cfg, "float32", 10.0, 2, 30, 4)
    frame = b["prefill"] + b["head pi_v3 (per frame)"] + 4 * b["head pi_v3 step"] \
        + b["head gr00t (per frame)"] + 4 * b["head gr00t step"] + b["head oft"] \
        + 2 * stage_bytes(cfg, "float32", 15, p + 30)["decode_step"]
    assert t["frame_floor_ms"] == pytest.approx(frame / 10e9 * 1e3)
    assert t["denoise_kv_loads"] is None


def test_each_starvla_head_adds_to_the_frame():
    """E = 2 < 3 < 4 in frame and action-stage bytes; the head rows in the table; the same
    prefill weights and decode step."""
    tables = [floor_table(PRESETS[n], "bfloat16", 273.0, 1, 30, 4)
              for n in ("starvla-tiny", "starvla-tiny-e3", "starvla-tiny-e4")]
    frames = [t["frame_floor_ms"] for t in tables]
    actions = [t["action_floor_ms"] for t in tables]
    assert frames[0] < frames[1] < frames[2] and actions[0] < actions[1] < actions[2]
    assert len({t["floor_ms"]["decode_step"] for t in tables}) == 1
    text = markdown(tables[2])
    e2 = markdown(tables[0])
    for row in ("| head pi_v3 (per frame) |", "| head pi_v3 step |"):
        assert row in text and row in e2
    for row in ("| head gr00t (per frame) |", "| head gr00t step |", "| head oft |"):
        assert row in text and row not in e2
    assert "| x S = 4 |" in text and "| x k = 1 |" in text


def test_starvla_floor_no_longer_refused_mixed_still_is(capsys):
    """The floor covers the StarVLA presets (it refused them before); a model with a
    kv-layerwise expert beside StarVLA heads is refused with the reason (since StarVLA is a
    named family: when the config is made, before the floor or the engine see it); --heads
    refuses what does not fit."""
    from oxygen_ros.bench.floor import no_floor_reason, with_heads
    from oxygen_ros.bench.suite.floor import main
    from oxygen_ros.engine.config import STARVLA_TINY_PI_V3

    for name in ("starvla-tiny", "starvla-tiny-e3", "starvla-tiny-e4", "starvla"):
        assert no_floor_reason(PRESETS[name]) is None
    assert main(["--preset", "starvla-tiny-e3", "--S", "4"]) == 0
    assert "| head gr00t step |" in capsys.readouterr().out
    for family in ("qwen3vl", "starvla"):
        with pytest.raises(ValueError, match="not both"):
            PRESETS["starvla-tiny"].replace(
                family=family, action_experts=(PRESETS["xr0-tiny"].action_experts[0],
                                               STARVLA_TINY_PI_V3))
    for preset, heads, words in (("starvla", "pi_v3,bogus", "comma-separated"),
                                 ("pi05", "oft", "Qwen3-VL backbone")):
        with pytest.raises(ValueError, match=words):
            with_heads(PRESETS[preset], heads)


def test_starvla_ratios_and_report_section():
    """oxygen-bench's micro-benchmark of a StarVLA preset: its action stage (every head in turn)
    against the heads' floor at that S; prefill and decode as for pi0.5."""
    from oxygen_ros.bench.floor import action_bytes

    cfg = PRESETS["starvla-tiny-e4"]
    micro = {"context_tokens": 40, "prefill_ms": 2.0, "denoise_ms": {"4": 5.0},
             "ms_per_step": {"1": 1.0}}
    r = ratios(micro, cfg, "float32", 10.0)
    assert [x["stage"] for x in r] == ["prefill", "heads S=4", "decode step batch 1"]
    assert r[1]["floor_ms"] == pytest.approx(
        action_bytes(stage_bytes(cfg, "float32", 1, 40), 4) / 10e9 * 1e3)
    results = {"env": {"cpu": "some cpu", "dtype": "float32"},
               "decode_micro": {"starvla-tiny-e4": micro}}
    assert "| heads S=4 |" in report_section(results, 10.0)
