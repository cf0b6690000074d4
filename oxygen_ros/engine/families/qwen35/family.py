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

from ..base import ParamCounts
from ..starvla.family import StarVLAFamily
from .config import Qwen35Rules

if TYPE_CHECKING:
    from ...config.model_config import ModelConfig


class Qwen35Family(Qwen35Rules, StarVLAFamily):
    """StarVLA's heads (its capabilities and action stage) on the Qwen3.5 backbone; its config
    rules (the hybrid layers' checks, the cache spec) in config.py."""

    # -- the model -------------------------------------------------------------------------------
    def init_model(self, config, seed, device, dtype):
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import init_qwen35

        return init_qwen35(config, seed, device, dtype)

    def count_params(self, config: "ModelConfig", expert: int = 1) -> ParamCounts:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import count_qwen35_params

        return count_qwen35_params(config, expert)

    # -- checkpoints -----------------------------------------------------------------------------
    def owns_folder(self, folder: Path) -> bool:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import is_qwen35_folder

        return is_qwen35_folder(folder)

    def open_folder(self, folder, device, dtype, tokenizer=None, asset_id=None, progress=None):
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import open_qwen35_folder

        return open_qwen35_folder(folder, device, dtype, tokenizer)

    def inspect_folder(self, folder, tokenizer=None, asset_id=None) -> dict[str, Any]:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import inspect_qwen35

        return inspect_qwen35(folder, tokenizer)

    def write_folder(self, model, folder) -> None:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import save_qwen35_folder

        save_qwen35_folder(model, folder)


FAMILY = Qwen35Family()
