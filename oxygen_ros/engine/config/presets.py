"""The model presets as data: one entry each, a derived preset as the overrides of its base.

An entry is (base, fields): ``fields`` are ModelConfig fields as plain data (nested dicts for
the experts, the vision tower and the qwen section; a nested dict is merged into its base's),
``base`` the preset it overrides (None: ModelConfig's defaults, which are pi0.5's). Where each
shape comes from: docs/presets.md. PRESETS holds the validated ModelConfigs.
"""
from __future__ import annotations

from typing import Any

from .model_config import ExpertConfig, ModelConfig, model_config_from_dict

Fields = dict[str, Any]


def interval_layer_types(depth: int, interval: int = 4) -> tuple[str, ...]:
    """transformers' default pattern: layer i is full attention iff (i + 1) % interval == 0."""
    return tuple("full_attention" if (i + 1) % interval == 0 else "linear_attention"
                 for i in range(depth))


# StarVLA's action heads on the Qwen3-VL backbone (docs/starvla.md), as ExpertConfig data: the
# tiny ones on the xr0-tiny backbone (id 2056 is their OFT placeholder), the full-size ones from
# StarVLA's framework defaults (docs/presets.md).
HEADS: dict[str, Fields] = {
    "tiny-pi_v3": dict(width=128, mlp_dim=512, num_layers=4, num_heads=2, kind="hidden-crossattn",
                       head=dict(source="layerwise", horizon=16, action_dim=7, mlp_hidden=128)),
    "tiny-gr00t": dict(width=96, mlp_dim=384, num_layers=4, num_heads=2, kind="hidden-crossattn",
                       head=dict(source="last", horizon=8, action_dim=7, state_dim=7,
                                 interleave_self_attention=True, output_dim=128, mlp_hidden=128)),
    "tiny-oft": dict(width=256, mlp_dim=512, num_layers=2, kind="regress",
                     head=dict(horizon=9, action_dim=7, query_token_id=2056)),
    "pi_v3": dict(width=1024, mlp_dim=4096, num_layers=36, num_heads=16, kind="hidden-crossattn",
                  head=dict(source="layerwise", horizon=16, action_dim=7, mlp_hidden=1024)),
    "gr00t": dict(width=768, mlp_dim=3072, num_layers=16, num_heads=12, kind="hidden-crossattn",
                  head=dict(source="last", horizon=8, action_dim=7, state_dim=7,
                            interleave_self_attention=True, output_dim=1024, mlp_hidden=1024)),
    "oft": dict(width=2560, mlp_dim=5120, num_layers=2, kind="regress",
                head=dict(horizon=9, action_dim=7, query_token_id=151669)),
}
STARVLA_TINY_PI_V3, STARVLA_TINY_GR00T, STARVLA_TINY_OFT, STARVLA_PI_V3, STARVLA_GR00T, \
    STARVLA_OFT = (ExpertConfig(**HEADS[n]) for n in
                   ("tiny-pi_v3", "tiny-gr00t", "tiny-oft", "pi_v3", "gr00t", "oft"))

_TINY_VISION = dict(image_size=32, patch_size=8, width=64, depth=1, num_heads=2, mlp_dim=128)
# what every tiny StarVLA preset changes on xr0-tiny: one vocabulary (+ the OFT placeholder), one
# prompt (its 9 action queries) for E = 2, 3, 4
_STARVLA_TINY: Fields = dict(family="starvla", vocab_size=2057, action_horizon=16, action_dim=7,
                             qwen=dict(action_query_ids=(2056,) * 9))
# Qwen3.5's 0.8B text and vision shapes and its 248k vocabulary's special ids (docs/presets.md:
# which values are verified); Qwen3-VL's chat template ids moved by the same offset as the
# vision ids (151652 -> 248053): not verified, the floor model reads only shapes
_QWEN35_08B: Fields = dict(
    name="qwen35-0.8b", family="qwen35", vocab_size=248320, depth=24, num_heads=8,
    num_kv_heads=2, head_dim=256, vlm=dict(width=1024, mlp_dim=3584),
    action_experts=({**HEADS["pi_v3"], "num_layers": 24},),
    vision=dict(image_size=224, patch_size=16, width=768, depth=12, num_heads=12, mlp_dim=3072),
    num_cameras=1, max_prompt_tokens=128, action_horizon=16, action_dim=7,
    rope_theta=10_000_000.0, eos_token_id=248046, pad_token_id=248044, bos_token_id=248044,
    qwen=dict(deepstack_visual_indexes=(), mrope_section=(11, 11, 10), image_token_id=248056,
              vision_start_token_id=248053, vision_end_token_id=248054,
              head_ids=(248045, 872, 198), tail_ids=(248046, 198, 248045, 77091, 198)),
    hybrid=dict(layer_types=interval_layer_types(24), linear_num_key_heads=16,
                linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
                linear_conv_kernel_dim=4, partial_rotary_factor=0.25))

PRESET_DATA: dict[str, tuple[str | None, Fields]] = {
    "tiny": (None, dict(
        name="tiny", vocab_size=512, depth=2, num_heads=4, num_kv_heads=1, head_dim=32,
        vlm=dict(width=128, mlp_dim=256), action_experts=(dict(width=64, mlp_dim=128),),
        vision=_TINY_VISION, num_cameras=2, max_prompt_tokens=48, action_horizon=10,
        action_dim=8)),
    "small": (None, dict(
        name="small", vocab_size=2048, depth=8, num_heads=8, num_kv_heads=1, head_dim=64,
        vlm=dict(width=512, mlp_dim=4096), action_experts=(dict(width=256, mlp_dim=1024),),
        vision=dict(image_size=112, patch_size=14, width=256, depth=4, num_heads=4, mlp_dim=1024),
        num_cameras=2, max_prompt_tokens=128, action_horizon=50, action_dim=32)),
    "balanced": ("small", dict(
        name="balanced", action_experts=(dict(width=128, mlp_dim=512),),
        vision=dict(image_size=56, width=128, depth=2, num_heads=2, mlp_dim=512),
        num_cameras=1, action_horizon=10)),
    "pi05": (None, dict(name="pi05")),
    "xr0-tiny": (None, dict(
        name="xr0-tiny", family="qwen3vl", vocab_size=2056, depth=4, num_heads=4, num_kv_heads=2,
        head_dim=128, vlm=dict(width=256, mlp_dim=768),
        action_experts=(dict(width=128, mlp_dim=256, num_layers=2, num_heads=2),),
        vision=dict(image_size=64, patch_size=16, width=64, depth=2, num_heads=2, mlp_dim=128),
        num_cameras=2, max_prompt_tokens=128, action_horizon=30, action_dim=32,
        rope_theta=5_000_000.0, eos_token_id=2049, pad_token_id=0, bos_token_id=2048,
        qwen=dict(num_position_embeddings=16, deepstack_visual_indexes=(0,), image_token_id=2055,
                  vision_start_token_id=2053, vision_end_token_id=2054,
                  head_ids=(2048, 2050, 2052), tail_ids=(2049, 2052, 2048, 2051, 2052)))),
    "xr0": (None, dict(
        name="xr0", family="qwen3vl", vocab_size=151936, depth=36, num_heads=32, num_kv_heads=8,
        head_dim=128, vlm=dict(width=2560, mlp_dim=9728),
        action_experts=(dict(width=1024, mlp_dim=4096, num_layers=16, num_heads=8),),
        vision=dict(image_size=224, patch_size=16, width=1024, depth=24, num_heads=16,
                    mlp_dim=4096),
        num_cameras=2, max_prompt_tokens=128, action_horizon=30, action_dim=32,
        rope_theta=5_000_000.0, eos_token_id=151645, pad_token_id=151643, bos_token_id=151643,
        qwen=dict())),
    "starvla-tiny": ("xr0-tiny", dict(
        name="starvla-tiny", action_experts=(HEADS["tiny-pi_v3"],), **_STARVLA_TINY)),
    "starvla-tiny-e3": ("xr0-tiny", dict(
        name="starvla-tiny-e3", action_experts=(HEADS["tiny-pi_v3"], HEADS["tiny-gr00t"]),
        **_STARVLA_TINY)),
    "starvla-tiny-e4": ("xr0-tiny", dict(
        name="starvla-tiny-e4",
        action_experts=(HEADS["tiny-pi_v3"], HEADS["tiny-gr00t"], HEADS["tiny-oft"]),
        **_STARVLA_TINY)),
    # Qwen3.5 with a PI_v3 head (docs/qwen35.md): tiny random on the xr0-tiny vocabulary and
    # tower, [L, L, L, F] layers; the 0.8B and 2B shapes for the floor model
    "qwen35-tiny": ("xr0-tiny", dict(
        name="qwen35-tiny", family="qwen35", depth=4, head_dim=64,
        vlm=dict(width=256, mlp_dim=768), action_experts=(HEADS["tiny-pi_v3"],),
        action_horizon=16, action_dim=7, rope_theta=10_000_000.0,
        qwen=dict(deepstack_visual_indexes=(), mrope_section=(3, 3, 2)),
        hybrid=dict(layer_types=interval_layer_types(4), linear_num_key_heads=2,
                    linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
                    linear_conv_kernel_dim=4, partial_rotary_factor=0.25))),
    "qwen35-0.8b": (None, _QWEN35_08B),
    "qwen35-2b": ("qwen35-0.8b", dict(name="qwen35-2b", vlm=dict(width=2048, mlp_dim=6144))),
    "starvla": ("xr0", dict(
        name="starvla", family="starvla", action_experts=(HEADS["pi_v3"],), action_horizon=16,
        action_dim=7, qwen=dict(action_query_ids=(151669,) * 9))),
}


def merged(base: Fields, overrides: Fields) -> Fields:
    """``base`` with ``overrides``; a nested dict merged into the base's nested dict."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _build(data: dict[str, tuple[str | None, Fields]]) -> dict[str, ModelConfig]:
    built: dict[str, ModelConfig] = {}
    for name, (base, fields) in data.items():
        start = ModelConfig().to_dict() if base is None else built[base].to_dict()
        if base is None and "qwen" in fields:  # a section the defaults do not have
            start["qwen"] = {}
        built[name] = model_config_from_dict(merged(start, fields))
    return built


PRESETS: dict[str, ModelConfig] = _build(PRESET_DATA)
