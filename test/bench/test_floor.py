"""Bandwidth floor (bench/floor.py): bytes per stage from the model's own parameter counts."""
from __future__ import annotations

import pytest

from oxygen_ros.bench.floor import (count_params, floor_table, known_bandwidth, markdown, ratios,
                                    report_section, stage_bytes)
from oxygen_ros.engine.config import PRESETS


def test_every_parameter_is_in_one_group():
    import torch

    from oxygen_ros.engine.model.mot import MoTModel

    for name in ("tiny", "small"):
        with torch.device("meta"):
            total = sum(p.numel() for p in MoTModel(PRESETS[name]).parameters())
        c = count_params(PRESETS[name])
        assert c.vision + c.vlm_layers + c.lm_head + c.action_step + c.adarms_once == total


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
