"""Qwen3.5 as the engine serves it (family qwen35, docs/qwen35.md): the hybrid backbone
(qwen35.Qwen35Model: Gated DeltaNet + gated attention) with StarVLA-style heads on its
prefill's hidden states (starvla_heads: a PI_v3 DiT, as the OxyGen paper's Table 5 runner).

What the runner calls (engine/runner/model_runner.py): ``prefill_prefix`` (the chat template's head, the
images, the prompt; K/V of the attention layers into the context's pool blocks, the Gated
DeltaNet state into the context's state slot, the kept hidden states into ``keep``),
``forward_tokens`` (packed rows of many sequences: each row's state slot from ``ctx.states``),
``embed_tokens``, ``lm_logits``; the family's action stage calls ``head`` and ``prefix_ids``.
"""
from __future__ import annotations

import torch
from torch import nn

from ...config.model_config import ModelConfig
from .model import Qwen35Model
from ..starvla.heads import build_head


class Qwen35VLA(nn.Module):
    def __init__(self, config: ModelConfig, hf_config) -> None:
        super().__init__()
        self.config = config
        self.backbone = Qwen35Model(hf_config)
        self.experts = nn.ModuleList(build_head(e, config.vlm.width)
                                     for e in config.action_experts)

    @property
    def dtype(self) -> torch.dtype:
        return self.backbone.dtype

    @property
    def device(self) -> torch.device:
        return self.backbone.device

    def head(self, expert: int) -> nn.Module:
        """Action head ``expert`` (1-based, as the StarVLA family numbers them)."""
        if not 1 <= expert <= len(self.experts):
            raise ValueError(f"expert {expert} is not an action head (1..{len(self.experts)})")
        return self.experts[expert - 1]

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        emb = self.backbone.language_model.embed_tokens
        return emb(ids.to(emb.weight.device))

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.backbone.lm_logits(hidden)

    def prefix_ids(self, num_images: int, prompt_ids) -> list[int]:
        """The chat template's head ("<|im_start|>user\\n"), one vision block per image, the
        prompt: the user turn stays open (a question continues it)."""
        image = self.backbone.image_ids(self.config.vision.image_size)
        return list(self.config.qwen.head_ids) + image * num_images + list(prompt_ids)

    def prefill_prefix(self, images: torch.Tensor, prompt_ids, ctx,
                       keep: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
        """The observation prefix through the backbone in the chunked form; returns the
        final-normed hidden [P, W]."""
        b = self.backbone
        ids = self.prefix_ids(images.shape[0], prompt_ids)
        ids_t = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        hidden = self.embed_tokens(ids_t)
        mask = ids_t == b.config.image_token_id
        if images.shape[0]:
            feats = b.embed_images(images)
            hidden = hidden.masked_scatter(mask[:, None], feats.to(hidden.dtype))
        positions, _ = b.positions(ids, self.config.vision.image_size)
        return b.forward_tokens(hidden, positions.to(self.device), ctx, ctx.states, keep=keep)

    def forward_tokens(self, expert: int, hidden: torch.Tensor, positions: torch.Tensor, ctx,
                       cond=None, keep: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
        """Packed rows of many sequences (the backbone only: the heads read hidden states)."""
        if expert != 0:
            raise ValueError("the Qwen3.5 heads read hidden states: only the backbone runs tokens")
        return self.backbone.forward_tokens(hidden.to(self.dtype), positions, ctx, ctx.states,
                                            keep=keep)
