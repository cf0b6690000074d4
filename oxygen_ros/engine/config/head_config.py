"""What the StarVLA-style action heads add to an ExpertConfig (docs/starvla.md): torch-free, so
engine/config.py can hold them in its presets.

An action expert's ``kind`` says what it shares with the prefill:
- ``kv-layerwise``: the prefix K/V of the backbone's layers (pi0.5, the Xiaomi-Robotics-0 DiT);
- ``hidden-crossattn``: the prefill's hidden states, read by a DiT's cross-attention
  (StarVLA's QwenPI_v3: block i reads backbone layer depth - L + i; GR00T: every block reads
  the last hidden state); its ExpertConfig gives the DiT's width, FF width (mlp_dim), blocks
  (num_layers) and heads (num_heads), a CrossAttnHeadConfig the rest;
- ``regress``: the last-layer hidden states of action-query placeholder tokens at the end of the
  prompt, through an MLP regressor (OpenVLA-OFT); its ExpertConfig gives the input width (the
  backbone's), the regressor's hidden width (mlp_dim) and residual blocks (num_layers), a
  RegressHeadConfig the rest.
"""
from __future__ import annotations

from dataclasses import dataclass

EXPERT_KINDS = ("kv-layerwise", "hidden-crossattn", "regress")
# layerwise: DiT block i cross-attends to backbone layer depth - L + i, each through its own
# LayerNorm + Linear to the DiT width (QwenPI_v3); last: every cross block reads the final
# hidden state at the backbone's width (GR00T)
HEAD_SOURCES = ("layerwise", "last")


def _at_least(name: str, value: int, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class CrossAttnHeadConfig:
    """A flow-matching DiT over [state token ; future tokens ; action chunk] whose blocks
    cross-attend to the prefill's hidden states (StarVLA's layer-wise / GR00T heads)."""

    source: str = "layerwise"  # HEAD_SOURCES
    horizon: int = 16  # actions per chunk
    action_dim: int = 7
    state_dim: int = 0  # > 0: one state token through an MLP; 0: state in the prompt only
    future_tokens: int = 32  # learned query tokens between the state and the chunk
    mlp_hidden: int = 1024  # hidden width of the state encoder and the action decoder MLPs
    # odd blocks self-attend over the DiT's tokens instead of cross-attending (GR00T)
    interleave_self_attention: bool = False
    # > 0: the last block goes through the adaLN output norm and a projection to output_dim
    # before the action decoder (GR00T); 0: the decoder reads the last block (QwenPI_v3)
    output_dim: int = 0
    time_buckets: int = 1000  # the DiT embeds floor(tau * time_buckets)
    max_positions: int = 1024  # learned positions added to the action tokens
    time_channels: int = 256  # sinusoidal channels before the timestep MLP

    def __post_init__(self) -> None:
        if self.source not in HEAD_SOURCES:
            raise ValueError(f"head source must be one of {HEAD_SOURCES}, got {self.source!r}")
        for name, low in (("horizon", 1), ("action_dim", 1), ("state_dim", 0),
                          ("future_tokens", 0), ("mlp_hidden", 1), ("output_dim", 0),
                          ("time_buckets", 1), ("max_positions", 1), ("time_channels", 2)):
            _at_least(f"head {name}", getattr(self, name), low)
        if self.time_channels % 2:
            raise ValueError(f"head time_channels must be even, got {self.time_channels}")
        if self.horizon > self.max_positions:
            raise ValueError(f"head horizon {self.horizon} exceeds its {self.max_positions} "
                             f"learned positions (max_positions)")
        if not isinstance(self.interleave_self_attention, bool):
            raise ValueError(f"head interleave_self_attention must be true or false, got "
                             f"{self.interleave_self_attention!r}")


@dataclass(frozen=True)
class RegressHeadConfig:
    """Action queries: ``horizon`` placeholder tokens (``query_token_id``) at the end of the
    prompt; their last-layer hidden states through an MLP-ResNet give the chunk in one shot."""

    horizon: int = 9
    action_dim: int = 7
    query_token_id: int = 0

    def __post_init__(self) -> None:
        for name, low in (("horizon", 1), ("action_dim", 1), ("query_token_id", 0)):
            _at_least(f"head {name}", getattr(self, name), low)


HEAD_CONFIGS = {"hidden-crossattn": CrossAttnHeadConfig, "regress": RegressHeadConfig}


def head_from(kind: str, head):
    """The head config an ExpertConfig of ``kind`` carries, built from plain data (a dict from
    JSON / YAML / ModelConfig.to_dict) when needed; ValueError when it does not fit the kind."""
    if kind not in EXPERT_KINDS:
        raise ValueError(f"expert kind must be one of {EXPERT_KINDS}, got {kind!r}")
    cls = HEAD_CONFIGS.get(kind)
    if cls is None:
        if head is not None:
            raise ValueError(f"a {kind} expert takes no head config, got {head!r}")
        return None
    if isinstance(head, dict):
        head = cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in head.items()})
    if not isinstance(head, cls):
        raise ValueError(f"a {kind} expert needs a {cls.__name__}, got {type(head).__name__}")
    return head


def check_expert_shape(kind: str, width: int, num_layers: int, num_heads: int) -> None:
    """What an expert of ``kind`` needs of its shape (ExpertConfig's own fields)."""
    if kind == "hidden-crossattn":
        if num_layers < 1 or num_heads < 1 or width % num_heads:
            raise ValueError(f"a hidden-crossattn expert needs num_layers >= 1 and num_heads "
                             f">= 1 dividing its width {width}, got {num_layers}/{num_heads}")
        if (width // num_heads) % 2:
            raise ValueError(f"hidden-crossattn head dim {width // num_heads} must be even")
