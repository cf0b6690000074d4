"""What a hybrid backbone (Qwen3.5: Gated DeltaNet + gated full attention, docs/qwen35.md) adds
to a ModelConfig: torch-free, so presets can hold it. ModelConfig.hybrid; the attention side
(heads, KV heads, head_dim) stays in ModelConfig's own fields, the vision tower's in `vision`
and `qwen` (the Qwen3-VL tower, without DeepStack).

Names as transformers' Qwen3_5TextConfig: ``layer_types`` per decoder layer, "linear_attention"
(a Gated DeltaNet layer: a short causal convolution over [q | k | v] of
``linear_conv_kernel_dim`` taps, then the gated delta rule with ``linear_num_value_heads``
value heads of ``linear_value_head_dim`` and ``linear_num_key_heads`` key heads of
``linear_key_head_dim``) or "full_attention" (output-gated attention whose first
``partial_rotary_factor`` of each head's dims are rotated).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...config.cache_spec import AttentionKV, CacheSpec, RecurrentState, StateTensor
from ..starvla.config import StarVLARules

if TYPE_CHECKING:
    from ...config.model_config import ModelConfig

LAYER_KINDS = ("linear_attention", "full_attention")


def _positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"hybrid.{name} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class HybridConfig:
    layer_types: tuple[str, ...] = ()  # per decoder layer, one of LAYER_KINDS
    linear_num_key_heads: int = 16
    linear_num_value_heads: int = 16
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_conv_kernel_dim: int = 4
    partial_rotary_factor: float = 0.25
    attention_bias: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "layer_types", tuple(self.layer_types))  # a JSON list
        bad = sorted(set(self.layer_types) - set(LAYER_KINDS))
        if bad or not self.layer_types:
            raise ValueError(f"hybrid.layer_types must be one of {LAYER_KINDS} per layer, got "
                             f"{list(self.layer_types)}")
        if "full_attention" not in self.layer_types:
            raise ValueError("hybrid.layer_types needs a full_attention layer (its K/V hold "
                             "the positions the linear layers do not)")
        for name in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_conv_kernel_dim"):
            _positive(name, getattr(self, name))
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError(f"hybrid.linear_num_value_heads {self.linear_num_value_heads} must "
                             f"be a multiple of linear_num_key_heads {self.linear_num_key_heads}")
        if not 0.0 < self.partial_rotary_factor <= 1.0:
            raise ValueError(f"hybrid.partial_rotary_factor must be in (0, 1], got "
                             f"{self.partial_rotary_factor}")

    @property
    def attention_layers(self) -> tuple[int, ...]:
        return tuple(i for i, k in enumerate(self.layer_types) if k == "full_attention")

    @property
    def linear_layers(self) -> tuple[int, ...]:
        return tuple(i for i, k in enumerate(self.layer_types) if k == "linear_attention")

    @property
    def conv_dim(self) -> int:
        """Channels of the short convolution: [q | k | v]."""
        return 2 * self.linear_num_key_heads * self.linear_key_head_dim \
            + self.linear_num_value_heads * self.linear_value_head_dim


class Qwen35Rules(StarVLARules):
    """StarVLA's heads on the hybrid backbone: the Qwen3.5 checks, no scratch tokens, K/V of the
    full-attention layers and a recurrent state per sequence for the Gated DeltaNet layers (both
    float32 whatever the engine's dtype: docs/qwen35.md)."""

    name = "qwen35"

    def validate(self, config: "ModelConfig") -> None:
        q, v, h = config.qwen, config.vision, config.hybrid
        if q is None or h is None:
            raise ValueError(f"family {self.name} needs the qwen fields (vision tower, chat "
                             f"template ids) and the hybrid fields (its layers)")
        if len(h.layer_types) != config.depth:
            raise ValueError(f"hybrid.layer_types has {len(h.layer_types)} entries for "
                             f"{config.depth} layers")
        if q.deepstack_visual_indexes:
            raise ValueError("Qwen3.5's vision tower has no DeepStack: qwen.deepstack_visual_"
                             "indexes must be empty")
        cell = v.patch_size * q.spatial_merge_size
        if v.image_size % cell:
            raise ValueError(f"vision.image_size {v.image_size} must be a multiple of "
                             f"patch_size x spatial_merge_size = {cell}")
        rotary = int(config.head_dim * h.partial_rotary_factor)
        if rotary % 2 or sum(q.mrope_section) != rotary // 2:
            raise ValueError(f"qwen.mrope_section {q.mrope_section} must sum to half the rotary "
                             f"dims (head_dim x partial_rotary_factor = {rotary})")
        for tok in (q.image_token_id, q.vision_start_token_id, q.vision_end_token_id,
                    *q.head_ids, *q.tail_ids, *q.action_query_ids):
            if not 0 <= tok < config.vocab_size:
                raise ValueError(f"qwen token id {tok} outside vocab of {config.vocab_size}")
        if not config.action_experts:
            raise ValueError(f"family {self.name} needs an action head")
        for e in config.action_experts:
            self._check_head(config, e)

    def action_tokens(self, config: "ModelConfig") -> int:
        """The heads read the kept hidden states: no scratch tokens after the prefix."""
        return 0

    def cache_spec(self, config: "ModelConfig") -> CacheSpec:
        h = config.hybrid
        conv = StateTensor("conv", (h.conv_dim, h.linear_conv_kernel_dim), "float32")
        rec = StateTensor("recurrent", (h.linear_num_value_heads, h.linear_key_head_dim,
                                        h.linear_value_head_dim), "float32")
        return CacheSpec(AttentionKV(h.attention_layers, config.num_kv_heads, config.head_dim),
                         RecurrentState(h.linear_layers, (conv, rec)))


RULES = Qwen35Rules()
