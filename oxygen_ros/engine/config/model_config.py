"""The model schema: ModelConfig (frozen) and its parts, validated on construction, and
model_config_from_dict (plain data -> ModelConfig). What a field means for the prefix layout,
the action stage and the cache is the family's (engine/families/, ModelConfig.family)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from . import family_registry
from .head_config import CrossAttnHeadConfig, RegressHeadConfig, check_expert_shape, head_from

DTYPES = ("float32", "bfloat16", "float16")


def _positive(name: str, value: int | float) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


@dataclass(frozen=True)
class ExpertConfig:
    """One transformer expert of the MoT: its own width and MLP, the shared depth and heads."""

    width: int
    mlp_dim: int
    # 0: one layer per backbone layer (pi0.5). L > 0: L layers, layer i reading the prefix K/V
    # of backbone layer depth - L + i (the Xiaomi-Robotics-0 DiT).
    num_layers: int = 0
    num_heads: int = 0  # query heads; 0: the backbone's
    # What it shares with the prefill (engine/config/head_config.py, docs/starvla.md): kv-layerwise
    # (the prefix K/V), hidden-crossattn or regress (the prefill's hidden states, with `head`).
    kind: str = "kv-layerwise"
    head: CrossAttnHeadConfig | RegressHeadConfig | None = None

    def __post_init__(self) -> None:
        _positive("expert width", self.width)
        _positive("expert mlp_dim", self.mlp_dim)
        if self.num_layers < 0 or self.num_heads < 0:
            raise ValueError(f"expert num_layers/num_heads must be >= 0 (0: the backbone's), "
                             f"got {self.num_layers}/{self.num_heads}")
        object.__setattr__(self, "head", head_from(self.kind, self.head))  # dicts from JSON
        check_expert_shape(self.kind, self.width, self.num_layers, self.num_heads)


@dataclass(frozen=True)
class VisionConfig:
    """SigLIP vision tower shape."""

    image_size: int = 224
    patch_size: int = 14
    width: int = 1152
    depth: int = 27
    num_heads: int = 16
    mlp_dim: int = 4304

    def __post_init__(self) -> None:
        for name in ("image_size", "patch_size", "width", "depth", "num_heads", "mlp_dim"):
            _positive(f"vision.{name}", getattr(self, name))
        if self.image_size % self.patch_size:
            raise ValueError(
                f"vision.image_size {self.image_size} is not a multiple of patch_size {self.patch_size}"
            )
        if self.width % self.num_heads:
            raise ValueError(f"vision.width {self.width} not divisible by num_heads {self.num_heads}")

    @property
    def tokens_per_image(self) -> int:
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class ModelConfig:
    """A pi0.5-class Mixture-of-Transformers VLA.

    Expert 0 is the VLM (prefix + language); experts 1.. are action experts (pi0.5 has one).
    All experts share depth, heads and head_dim so their K/V can be attended to jointly.
    """

    name: str = "custom"
    vocab_size: int = 257152
    depth: int = 18
    num_heads: int = 8
    num_kv_heads: int = 1
    head_dim: int = 256
    vlm: ExpertConfig = ExpertConfig(2048, 16384)
    action_experts: tuple[ExpertConfig, ...] = (ExpertConfig(1024, 4096),)
    vision: VisionConfig = VisionConfig()
    num_cameras: int = 3
    max_prompt_tokens: int = 200
    action_horizon: int = 50
    action_dim: int = 32
    state_bins: int = 256
    # pi0.5 input conventions of the LeRobot version that trained it (engine/model/conventions.py):
    # the prompt's state zero-padded to this many values (LeRobot v0.4.x: 32; 0 = unpadded) and
    # the resize-with-pad bars in model space (v0.4.x: -3, else -1)
    state_prompt_pad: int = 0
    image_pad_value: float = -1.0
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    eos_token_id: int = 1
    pad_token_id: int = 0
    bos_token_id: int = 2
    family: str = "pi05"
    # The families' own sections (family_registry.SECTIONS: which family module defines each;
    # the node's `model.qwen.*` / `model.hybrid.*` parameters): the Qwen families' vision tower
    # and chat template ids (engine/families/qwen3vl/config.py: QwenVLConfig) and a hybrid
    # backbone's layers (engine/families/qwen35/config.py: HybridConfig, family qwen35). Typed
    # Any here: the configuration never imports a family; the family validates its section.
    qwen: Any = None
    hybrid: Any = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "depth", "num_heads", "num_kv_heads", "head_dim", "num_cameras",
                     "max_prompt_tokens", "action_horizon", "action_dim", "state_bins"):
            _positive(name, getattr(self, name))
        if self.state_prompt_pad < 0:
            raise ValueError(f"state_prompt_pad must be >= 0 (0 = no padding), got {self.state_prompt_pad}")
        if not math.isfinite(self.image_pad_value):
            raise ValueError(f"image_pad_value must be finite, got {self.image_pad_value}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads {self.num_heads} must be a multiple of num_kv_heads {self.num_kv_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if not self.action_experts:
            raise ValueError("a MoT VLA needs at least one action expert (E >= 2)")
        for tok in ("eos_token_id", "pad_token_id", "bos_token_id"):
            if not 0 <= getattr(self, tok) < self.vocab_size:
                raise ValueError(f"{tok} {getattr(self, tok)} outside vocab of {self.vocab_size}")
        if self.family not in family_registry.names():
            raise ValueError(f"family must be one of {family_registry.names()}, got {self.family!r}")
        for e in self.action_experts:
            if e.num_layers > self.depth:
                raise ValueError(f"an action expert of {e.num_layers} layers cannot read the last "
                                 f"layers of a {self.depth}-layer backbone")
        # what only the family knows: its sections, its experts' kinds, its token ids
        family_registry.rules_of(self).validate(self)

    @property
    def num_experts(self) -> int:
        return 1 + len(self.action_experts)

    # The prefix layout is the family's (engine/families/): what one image costs in tokens,
    # where the rotary positions run, how many scratch tokens one action pass queries.
    @property
    def image_tokens(self) -> int:
        """Prefix tokens per camera image."""
        return family_registry.rules_of(self).image_tokens(self)

    @property
    def image_grid(self) -> tuple[int, int]:
        """(rows, cols) of one image's LM tokens."""
        return family_registry.rules_of(self).image_grid(self)

    @property
    def image_grid_tokens(self) -> int:
        rows, cols = self.image_grid
        return rows * cols

    def prefix_tokens(self, num_images: int, num_prompt: int) -> int:
        """Tokens of an observation prefix of ``num_images`` images and ``num_prompt`` prompt
        tokens (the family's layout: a chat template's head, the images, the prompt)."""
        return family_registry.rules_of(self).prefix_tokens(self, num_images, num_prompt)

    def rope_offset(self, num_images: int) -> int:
        """Rotary position minus sequence index for every token after the images."""
        return family_registry.rules_of(self).rope_offset(self, num_images)

    @property
    def action_tokens(self) -> int:
        """Tokens one action pass queries (its scratch slots after the prefix)."""
        return family_registry.rules_of(self).action_tokens(self)

    @property
    def max_prefix_tokens(self) -> int:
        return self.prefix_tokens(self.num_cameras, self.max_prompt_tokens)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **overrides: Any) -> "ModelConfig":
        return model_config_from_dict({**self.to_dict(), **overrides})


def model_config_from_dict(d: dict[str, Any]) -> ModelConfig:
    """Build a ModelConfig from plain data (JSON/YAML), nested dicts for experts and vision."""
    d = dict(d)
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = set(d) - known
    if unknown:
        raise ValueError(f"unknown model config fields: {sorted(unknown)}; known: {sorted(known)}")
    if isinstance(d.get("vlm"), dict):
        d["vlm"] = ExpertConfig(**d["vlm"])
    if "action_experts" in d:
        d["action_experts"] = tuple(
            e if isinstance(e, ExpertConfig) else ExpertConfig(**e) for e in d["action_experts"]
        )
    if isinstance(d.get("vision"), dict):
        d["vision"] = VisionConfig(**d["vision"])
    for section in family_registry.SECTIONS:  # a family's own section, by its dataclass
        if isinstance(d.get(section), dict):
            d[section] = family_registry.section_type(section)(
                **{k: tuple(v) if isinstance(v, list) else v for k, v in d[section].items()})
    return ModelConfig(**d)
