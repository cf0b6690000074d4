"""Qwen3.5 (hybrid: Gated DeltaNet + gated full attention) with a PI_v3-style head on its
prefill's hidden states, as the OxyGen paper's Table 5 runner (docs/qwen35.md).
ModelConfig.family "qwen35".

- Layout, prompt and question: the Qwen3-VL family's (a chat template's user turn left open
  after the images and the instruction; a question continues that turn, then the template's
  tail opens the assistant's turn). Qwen3.5's tower is Qwen3-VL's without DeepStack.
- Action stage: StarVLA's heads (engine/families/starvla/heads.py; PI_v3: DiT block i
  cross-attends to backbone layer depth - L + i) on the hidden states the prefill keeps. The
  heads read no K/V and write no scratch tokens (action_tokens 0), so a frame's prefix
  state is only read by the requests that fork it.
- Cache: K/V of the full-attention layers in the pool's blocks; per sequence the Gated DeltaNet
  layers' conv window and recurrent matrix in a state slot (CacheSpec.recurrent), both kept in
  float32 whatever the engine's dtype (the recurrent one is float32 in transformers too; the
  conv window is small).
- Checkpoints: a transformers ``Qwen3_5ForConditionalGeneration.save_pretrained`` folder
  (+ our heads' files; without them a random head): engine/families/qwen35/checkpoint.py.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...config.cache_spec import AttentionKV, CacheSpec, RecurrentState, StateTensor
from ..base import ParamCounts
from ..starvla.family import StarVLAFamily

if TYPE_CHECKING:
    from ...config.model_config import ModelConfig


class Qwen35Family(StarVLAFamily):
    """StarVLA's heads (its capabilities and action stage) on the Qwen3.5 backbone."""

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

    # -- the model -------------------------------------------------------------------------------
    def init_model(self, config, seed, device, dtype):
        # lazy: loads transformers; config validation resolves the family
        from .checkpoint import init_qwen35

        return init_qwen35(config, seed, device, dtype)

    def count_params(self, config: "ModelConfig", expert: int = 1) -> ParamCounts:
        # lazy: loads transformers; config validation resolves the family
        from .checkpoint import count_qwen35_params

        return count_qwen35_params(config, expert)

    # -- checkpoints -----------------------------------------------------------------------------
    def owns_folder(self, folder: Path) -> bool:
        # lazy: loads transformers; config validation resolves the family
        from .checkpoint import is_qwen35_folder

        return is_qwen35_folder(folder)

    def open_folder(self, folder, device, dtype, tokenizer=None, asset_id=None, progress=None):
        # lazy: loads transformers; config validation resolves the family
        from .checkpoint import open_qwen35_folder

        return open_qwen35_folder(folder, device, dtype, tokenizer)

    def inspect_folder(self, folder, tokenizer=None, asset_id=None) -> dict[str, Any]:
        # lazy: loads transformers; config validation resolves the family
        from .checkpoint import inspect_qwen35

        return inspect_qwen35(folder, tokenizer)

    def write_folder(self, model, folder) -> None:
        # lazy: loads transformers; config validation resolves the family
        from .checkpoint import save_qwen35_folder

        save_qwen35_folder(model, folder)


FAMILY = Qwen35Family()
