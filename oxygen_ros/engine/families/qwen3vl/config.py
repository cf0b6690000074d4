"""What the Qwen families add to a ModelConfig: its `qwen` section (ModelConfig.qwen; the node's
`model.qwen.*` parameters), torch-free, so presets and the node's parameter checks can hold it.
Read by the families qwen3vl, starvla and qwen35 (engine/families/)."""
from __future__ import annotations

import math
from dataclasses import dataclass


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
