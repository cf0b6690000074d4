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
