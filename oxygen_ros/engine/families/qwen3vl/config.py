"""What the Qwen families add to a ModelConfig, torch-free (presets and the node's parameter checks
hold it; ModelConfig's validation asks it, engine/config/family_registry.py): the `qwen` section
(ModelConfig.qwen, the node's `model.qwen.*` parameters; read by the families qwen3vl, starvla and
qwen35), the rules every Qwen3-VL family shares (QwenVLRules: the backbone's checks, the chat
template's prefix layout, 3-axis rotary positions) and family qwen3vl's own (Xr0Rules: DiT
experts reading the last layers' K/V with [state ; time ; chunk] tokens)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...config.family_rules import Capabilities, FamilyRules

if TYPE_CHECKING:
    from ...config.model_config import ModelConfig


def _positive(name: str, value: int | float) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


@dataclass(frozen=True)
class QwenVLConfig:
    """What the Qwen3-VL family adds: vision tower details, rotary sections, chat-template ids,
    the DiT expert's state tokens. The tower's width/depth/heads/mlp/patch live in `vision`."""

    temporal_patch_size: int = 2
    spatial_merge_size: int = 2
    num_position_embeddings: int = 2304
    deepstack_visual_indexes: tuple[int, ...] = (5, 11, 17)
    mrope_section: tuple[int, int, int] = (24, 20, 20)
    image_token_id: int = 151655
    vision_start_token_id: int = 151652
    vision_end_token_id: int = 151653
    # "<|im_start|>user\n" before the images; "<|im_end|>\n<|im_start|>assistant\n" after a
    # question (the frame's prefix ends inside the user turn: engine/core/intake.py)
    head_ids: tuple[int, ...] = (151644, 872, 198)
    tail_ids: tuple[int, ...] = (151645, 198, 151644, 77091, 198)
    tie_word_embeddings: bool = True
    # the text MLP's and the vision tower's activations (transformers' ACT2FN names; config.json's
    # text_config.hidden_act / vision_config.hidden_act)
    hidden_act: str = "silu"
    vision_hidden_act: str = "gelu_pytorch_tanh"
    state_tokens: int = 1  # DiT tokens carrying the proprioceptive state
    # put after the prompt's text, ending the prefix (and a question after them): OFT's placeholders
    # (docs/starvla.md); the StarVLA presets carry them whatever heads run, one prompt for E = 2..4
    action_query_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _positive("qwen.temporal_patch_size", self.temporal_patch_size)
        _positive("qwen.spatial_merge_size", self.spatial_merge_size)
        _positive("qwen.num_position_embeddings", self.num_position_embeddings)
        if math.isqrt(self.num_position_embeddings) ** 2 != self.num_position_embeddings:
            raise ValueError(f"qwen.num_position_embeddings must be a square, got "
                             f"{self.num_position_embeddings}")
        if len(self.mrope_section) != 3 or min(self.mrope_section) < 0:
            raise ValueError(f"qwen.mrope_section must be 3 non-negative ints, got {self.mrope_section}")
        if self.state_tokens < 0:
            raise ValueError(f"qwen.state_tokens must be >= 0, got {self.state_tokens}")
        check_activation("qwen.hidden_act", self.hidden_act)
        check_activation("qwen.vision_hidden_act", self.vision_hidden_act)


def check_activation(name: str, act: str) -> None:
    """ValueError unless ``act`` is one of transformers' parameter-free ACT2FN activations (what
    the Qwen MLPs apply; a parametric one, e.g. prelu, would carry weights no file maps)."""
    if act in ("silu", "gelu_pytorch_tanh"):  # the defaults: the presets import no transformers
        return
    # lazy: transformers, for a non-default activation only (torch-free config)
    from transformers.activations import ACT2FN

    if not isinstance(act, str) or act not in ACT2FN:
        raise ValueError(f"{name} {act!r} is not an activation transformers knows "
                         f"(ACT2FN: {', '.join(sorted(ACT2FN))})")
    if any(True for _ in ACT2FN[act].parameters()):
        raise ValueError(f"{name} {act!r} has learned parameters: not supported")


class QwenVLRules(FamilyRules):
    """What every Qwen3-VL family's config answers: the backbone's checks and the layout."""

    capabilities = Capabilities(rtc=False, cuda_graphs=False, causal_prefix=True, bos=False)

    def validate(self, config: "ModelConfig") -> None:
        q, v = config.qwen, config.vision
        if q is None:
            raise ValueError(f"family {self.name} needs the qwen fields (a Qwen3-VL backbone)")
        if config.hybrid is not None:
            raise ValueError(f"family {self.name} takes no hybrid fields (a hybrid Qwen3.5 "
                             f"backbone is family qwen35)")
        cell = v.patch_size * q.spatial_merge_size
        if v.image_size % cell:
            raise ValueError(f"vision.image_size {v.image_size} must be a multiple of "
                             f"patch_size x spatial_merge_size = {cell}")
        if sum(q.mrope_section) != config.head_dim // 2:
            raise ValueError(f"qwen.mrope_section {q.mrope_section} must sum to head_dim/2 "
                             f"= {config.head_dim // 2}")
        if any(not 0 <= i < v.depth for i in q.deepstack_visual_indexes):
            raise ValueError(f"qwen.deepstack_visual_indexes {q.deepstack_visual_indexes} "
                             f"outside the vision tower's {v.depth} layers")
        if len(q.deepstack_visual_indexes) > config.depth:
            raise ValueError("more DeepStack features than decoder layers")
        for tok in (q.image_token_id, q.vision_start_token_id, q.vision_end_token_id,
                    *q.head_ids, *q.tail_ids, *q.action_query_ids):
            if not 0 <= tok < config.vocab_size:
                raise ValueError(f"qwen token id {tok} outside vocab of {config.vocab_size}")

    def image_grid(self, config: "ModelConfig") -> tuple[int, int]:
        """(rows, cols) of one image's LM tokens after the patch merger."""
        side = (config.vision.image_size // config.vision.patch_size
                // config.qwen.spatial_merge_size)
        return side, side

    def image_tokens(self, config: "ModelConfig") -> int:
        """Merged patches between <|vision_start|> and <|vision_end|>."""
        return config.image_grid_tokens + 2

    def prefix_tokens(self, config: "ModelConfig", num_images: int, num_prompt: int) -> int:
        """The chat template's head, each image, the prompt."""
        return len(config.qwen.head_ids) + num_images * config.image_tokens + num_prompt

    def rope_offset(self, config: "ModelConfig", num_images: int) -> int:
        """Qwen3-VL's rope delta: an image of r x c tokens advances positions by max(r, c)."""
        rows, cols = config.image_grid
        return num_images * (max(rows, cols) - rows * cols)


class Xr0Rules(QwenVLRules):
    name = "qwen3vl"

    def validate(self, config: "ModelConfig") -> None:
        super().validate(config)
        for e in config.action_experts:
            if e.kind != "kv-layerwise":
                raise ValueError(f"family {self.name} runs kv-layerwise DiT experts, not {e.kind}: "
                                 f"StarVLA heads are family starvla; a frame runs one or the "
                                 f"other, not both (docs/starvla.md)")
            heads = e.num_heads or config.num_heads
            if heads % config.num_kv_heads:
                raise ValueError(f"expert heads {heads} not a multiple of num_kv_heads "
                                 f"{config.num_kv_heads}")

    def action_tokens(self, config: "ModelConfig") -> int:
        """State tokens + a time token + the chunk."""
        return config.qwen.state_tokens + 1 + config.action_horizon


RULES = Xr0Rules()
