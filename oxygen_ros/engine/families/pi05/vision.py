"""SigLIP vision tower (transformers' SiglipVisionModel, no pooling head) + PaliGemma projector."""
from __future__ import annotations

import torch
from torch import nn
from transformers import SiglipVisionConfig, SiglipVisionModel

from ...config.model_config import ModelConfig


def siglip_config(config: ModelConfig) -> SiglipVisionConfig:
    v = config.vision
    sc = SiglipVisionConfig(
        hidden_size=v.width, intermediate_size=v.mlp_dim, num_hidden_layers=v.depth,
        num_attention_heads=v.num_heads, image_size=v.image_size, patch_size=v.patch_size,
        num_channels=3, hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, attention_dropout=0.0,
        vision_use_head=False,
    )
    sc._attn_implementation = "sdpa"
    return sc


class VisionEncoder(nn.Module):
    """images [N, 3, H, W] in [-1, 1] -> [N, tokens_per_image, W_vlm].

    ``tower`` is a SiglipVisionModel whose state-dict keys (transformers 5.2x) are
    ``embeddings.*``, ``encoder.layers.N.*``, ``post_layernorm.*``; pi0.5 uses last_hidden_state
    (post_layernorm applied) and a linear projector with bias, no 1/sqrt(width) scaling.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.image_size = config.vision.image_size
        self.tower = SiglipVisionModel(siglip_config(config))
        self.projector = nn.Linear(config.vision.width, config.vlm.width, bias=True)
        # in a bf16 model whose patch / position embeddings stay float32 (openpi, LeRobot v0.4.x)
        # the embeddings' float32 output enters the bf16 encoder in its dtype
        self.tower.embeddings.register_forward_hook(self._to_encoder_dtype)

    def _to_encoder_dtype(self, module: nn.Module, args, out: torch.Tensor) -> torch.Tensor:
        return out.to(self.tower.post_layernorm.weight.dtype)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.dim() != 4 or images.shape[1] != 3:
            raise ValueError(f"images must be [N, 3, H, W], got {tuple(images.shape)}")
        if images.shape[-1] != self.image_size or images.shape[-2] != self.image_size:
            raise ValueError(
                f"images must be {self.image_size}x{self.image_size}, got {tuple(images.shape[-2:])}"
            )
        # pixels in the patch embedding's dtype (float32 there in a bf16 model, as LeRobot keeps
        # it), the tower's output in the projector's
        pe = self.tower.embeddings.patch_embedding.weight
        feats = self.tower(pixel_values=images.to(device=pe.device, dtype=pe.dtype)).last_hidden_state
        return self.projector(feats.to(self.projector.weight.dtype))
