"""The cache spec types: attention K/V per layer (every family today) and the per-sequence
recurrent state a hybrid family (Qwen3.5's Gated DeltaNet layers) would declare beside it."""
from __future__ import annotations

import pytest

from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.config.cache_spec import AttentionKV, CacheSpec, RecurrentState, StateTensor
from oxygen_ros.engine.config.family_registry import family_of
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.runner.model_runner import ModelRunner


def test_builtin_families_declare_kv_of_every_layer_and_the_pool_follows():
    for name in ("tiny", "xr0-tiny", "starvla-tiny"):
        mc = PRESETS[name]
        spec = family_of(mc).cache_spec(mc)
        assert spec == CacheSpec(AttentionKV(tuple(range(mc.depth)), mc.num_kv_heads,
                                             mc.head_dim))
    mc = PRESETS["tiny"]
    runner = ModelRunner(init_model(mc), mc, 4, 16)
    assert runner.pool.shape == (mc.depth, 2, 5, 16, mc.num_kv_heads, mc.head_dim)
    assert runner.bytes_per_block == 16 * 2 * mc.depth * mc.num_kv_heads * mc.head_dim * 4


def test_a_hybrid_spec_states_qwen35_sizes_and_the_pool_holds_it(monkeypatch):
    """Qwen3.5-0.8B as its config gives it: 6 full-attention layers (2 KV heads of 256) and 18
    Gated DeltaNet layers, each a conv window [6144, 4] in bf16 and a [16, 128, 128] float32
    matrix: 18.8 MiB per sequence, 12 KiB of K/V per token in bf16. The pool holds K/V blocks
    of the 6 attention layers and, in state slots sized when it is built, the 18 layers'
    states (refused without slots)."""
    full = tuple(range(3, 24, 4))
    spec = CacheSpec(AttentionKV(full, 2, 256), RecurrentState(
        tuple(i for i in range(24) if i not in full),
        (StateTensor("conv", (6144, 4), "bfloat16"),
         StateTensor("recurrent", (16, 128, 128), "float32"))))
    assert spec.attention.bytes_per_token(2) == 12 * 1024
    assert spec.recurrent.bytes_per_sequence() / 2**20 == pytest.approx(18.84, abs=0.01)
    mc = PRESETS["tiny"]
    family = family_of(mc)
    monkeypatch.setattr(type(family), "cache_spec", lambda self, config: spec)
    with pytest.raises(ValueError, match="needs state slots"):
        ModelRunner(init_model(mc), mc, 4, 16)
    runner = ModelRunner(init_model(mc), mc, 4, 16, state_slots=2)
    assert runner.pool.shape == (6, 2, 5, 16, 2, 256)
    assert runner.bytes_per_slot == spec.recurrent.bytes_per_sequence()
    conv, rec = runner.states.tensors["conv"], runner.states.tensors["recurrent"]
    assert len(conv) == len(rec) == 18
    assert conv[0].shape == (2, 6144, 4) and rec[0].shape == (2, 16, 128, 128)
    assert runner.states.nbytes == 2 * runner.bytes_per_slot
