"""pi0.5-class Mixture-of-Transformers on packed tokens (no batch dim, knows nothing about paging).

Expert 0 is the VLM (Gemma, RMSNorm); experts 1.. are action experts (Gemma with adaRMS in every
norm, gated residuals). All experts share depth / heads / head_dim, so per layer their K/V live in
the same space; *where* K/V go and what each query sees is the AttentionContext's business:

    ctx.attend(layer, q [T,Hq,D], k [T,Hkv,D], v [T,Hkv,D]) -> [T,Hq,D]

q and k are passed AFTER RoPE. The context applies the attention scale ``model.attn_scale``
(= head_dim ** -0.5) and a float32 softmax; the model applies no scaling of its own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

from ...config.engine_config import LINEAR_LAYOUTS
from ...config.model_config import ModelConfig
from ...model.layers import (AdaRMSNorm, GemmaMLP, RMSNorm, apply_rope, rope_cos_sin,
                             sinusoidal_time_embedding)
from .vision import VisionEncoder


@dataclass(frozen=True)
class AdaRMSModulations:
    """Every adaRMS norm's dense(cond) of one action expert at one time step: per layer
    (input norm, post norm), then the final norm. forward_tokens takes it in place of the
    conditioning vector, skipping the per-step dense layers (2 x depth + 1 of them)."""

    layers: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    final: torch.Tensor


class AttentionContext(Protocol):
    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor: ...


class DecoderLayer(nn.Module):
    """One expert's weights for one layer (attention projections, two norms, MLP)."""

    def __init__(self, config: ModelConfig, width: int, mlp_dim: int, adarms: bool) -> None:
        super().__init__()
        h, kv, d = config.num_heads, config.num_kv_heads, config.head_dim
        self.q_proj = nn.Linear(width, h * d, bias=False)
        self.k_proj = nn.Linear(width, kv * d, bias=False)
        self.v_proj = nn.Linear(width, kv * d, bias=False)
        self.o_proj = nn.Linear(h * d, width, bias=False)
        if adarms:
            self.input_norm = AdaRMSNorm(width, width, config.rms_eps)
            self.post_norm = AdaRMSNorm(width, width, config.rms_eps)
        else:
            self.input_norm = RMSNorm(width, config.rms_eps)
            self.post_norm = RMSNorm(width, config.rms_eps)
        self.mlp = GemmaMLP(width, mlp_dim)
        # Fused copies for inference (fuse_projections): one matmul for q/k/v and one for
        # gate/up instead of five; plain attributes, so checkpoints keep the original names.
        # Layout "transposed" stores them (and o/down) as [in, out] for `x @ w`: on some CPU
        # BLAS builds F.linear's [out, in] path at one token is several times slower.
        self.qkv_weight: torch.Tensor | None = None
        self.gate_up_weight: torch.Tensor | None = None
        self.o_weight_t: torch.Tensor | None = None
        self.down_weight_t: torch.Tensor | None = None
        self.transposed = False  # the fused weights are [in, out] (layout "transposed")

    def fuse(self, layout: str = "standard") -> None:
        """Build the fused weights, then rebind the original parameters as views into them: the
        state dict keeps its names and shapes (and load_state_dict writes through into the fused
        tensors), but no weight is held twice (the unfused copies are freed)."""
        if layout not in LINEAR_LAYOUTS:
            raise ValueError(f"linear layout must be one of {LINEAR_LAYOUTS}, got {layout!r}")
        qkv_mods = (self.q_proj, self.k_proj, self.v_proj)
        gate_up_mods = (self.mlp.gate_proj, self.mlp.up_proj)
        with torch.no_grad():
            qkv = torch.cat([m.weight for m in qkv_mods])
            gate_up = torch.cat([m.weight for m in gate_up_mods])
            self.transposed = layout == "transposed"
            if self.transposed:
                self.qkv_weight, self.gate_up_weight = qkv.t().contiguous(), gate_up.t().contiguous()
                del qkv, gate_up
                self.o_weight_t = self.o_proj.weight.t().contiguous()
                self.down_weight_t = self.mlp.down_proj.weight.t().contiguous()
                _rebind(self.o_proj, self.o_weight_t.t())
                _rebind(self.mlp.down_proj, self.down_weight_t.t())
                fused_rows = (self.qkv_weight.t(), self.gate_up_weight.t())  # [out, in] views
            else:
                self.qkv_weight, self.gate_up_weight = qkv, gate_up
                self.o_weight_t = self.down_weight_t = None
                fused_rows = (qkv, gate_up)
            for mods, rows in zip((qkv_mods, gate_up_mods), fused_rows):
                start = 0
                for m in mods:
                    n = m.weight.shape[0]
                    _rebind(m, rows[start:start + n])
                    start += n

    def qkv(self, x: torch.Tensor, config: ModelConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        t, h, kv, d = x.shape[0], config.num_heads, config.num_kv_heads, config.head_dim
        if self.qkv_weight is None:
            return (self.q_proj(x).view(t, h, d), self.k_proj(x).view(t, kv, d),
                    self.v_proj(x).view(t, kv, d))
        fused = x @ self.qkv_weight if self.transposed else \
            torch.nn.functional.linear(x, self.qkv_weight)
        q, k, v = fused.split([h * d, kv * d, kv * d], dim=-1)
        return q.view(t, h, d), k.view(t, kv, d), v.view(t, kv, d)

    def out_proj(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.o_weight_t if self.transposed else self.o_proj(x)

    def mlp_forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up_weight is None:
            return self.mlp(x)
        if self.transposed:
            gate, up = (x @ self.gate_up_weight).chunk(2, dim=-1)
            return (torch.nn.functional.gelu(gate, approximate="tanh") * up) @ self.down_weight_t
        gate, up = torch.nn.functional.linear(x, self.gate_up_weight).chunk(2, dim=-1)
        return self.mlp.down_proj(torch.nn.functional.gelu(gate, approximate="tanh") * up)


def _rebind(linear: nn.Linear, weight: torch.Tensor) -> None:
    """Replace linear.weight by a view (shares storage; the old tensor is freed if unused)."""
    linear.weight = nn.Parameter(weight, requires_grad=False)


class Expert(nn.Module):
    def __init__(self, config: ModelConfig, width: int, mlp_dim: int, adarms: bool) -> None:
        super().__init__()
        self.width = width
        self.adarms = adarms
        self.layers = nn.ModuleList(DecoderLayer(config, width, mlp_dim, adarms)
                                    for _ in range(config.depth))
        self.norm = AdaRMSNorm(width, width, config.rms_eps) if adarms else RMSNorm(width, config.rms_eps)


class ActionHead(nn.Module):
    """Per-action-expert projections: action_in_proj, action_out_proj, time MLP."""

    def __init__(self, action_dim: int, width: int) -> None:
        super().__init__()
        self.action_in_proj = nn.Linear(action_dim, width)
        self.action_out_proj = nn.Linear(width, action_dim)
        self.time_mlp_in = nn.Linear(width, width)
        self.time_mlp_out = nn.Linear(width, width)


def _residual(x: torch.Tensor, y: torch.Tensor, gate: torch.Tensor | None) -> torch.Tensor:
    return x + y if gate is None else x + y * gate


class MoTModel(nn.Module):
    family = "pi05"  # the backbone family (engine/families/qwen3vl/model.py is the other one)

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.attn_scale = config.head_dim ** -0.5
        self.vision = VisionEncoder(config)
        self.token_embedding = nn.Embedding(config.vocab_size, config.vlm.width)
        self.experts = nn.ModuleList([Expert(config, config.vlm.width, config.vlm.mlp_dim, False)])
        self.experts.extend(Expert(config, e.width, e.mlp_dim, True) for e in config.action_experts)
        self.action_heads = nn.ModuleList(ActionHead(config.action_dim, e.width)
                                          for e in config.action_experts)

    # ---- device / dtype helpers -------------------------------------------------------------
    @property
    def dtype(self) -> torch.dtype:
        return self.token_embedding.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.token_embedding.weight.device

    @property
    def pixel_dtype(self) -> torch.dtype:
        """The dtype the vision tower takes pixels in (float32 in a bf16 checkpoint: LeRobot
        keeps the patch embedding float32)."""
        return self.vision.tower.embeddings.patch_embedding.weight.dtype

    def expert_width(self, expert: int) -> int:
        return self.experts[expert].width

    def expert_kind(self, expert: int) -> str:
        """"lm" (expert 0) or "adarms" (a pi0.5 action expert on every layer)."""
        return "adarms" if expert else "lm"

    # ---- embeddings ---------------------------------------------------------------------------
    def embed_images(self, images: torch.Tensor) -> torch.Tensor:
        """[N, 3, H, W] float in [-1, 1] -> [N, tokens_per_image, W_vlm] (projector output, unscaled)."""
        return self.vision(images)

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """long [T] -> [T, W_vlm], multiplied by sqrt(W_vlm) cast to the weight dtype (Gemma)."""
        w = self.token_embedding.weight
        # sqrt(W) rounded to the weight dtype, as a Python float: no host-to-device copy per call
        # (which a CUDA graph capture of the decode step would refuse); same products
        scale = torch.tensor(math.sqrt(self.config.vlm.width), dtype=w.dtype).item()
        return self.token_embedding(ids.to(w.device)) * scale

    def prefill_prefix(self, images: torch.Tensor, prompt_ids, ctx: AttentionContext) -> torch.Tensor:
        """The observation prefix: every image's tokens, then the prompt, at positions 0..P-1,
        bidirectional (the context's business). images [N, 3, H, W] in [-1, 1]."""
        img = self.embed_images(images).reshape(-1, self.config.vlm.width)
        txt = self.embed_tokens(torch.as_tensor(list(prompt_ids), dtype=torch.long, device=img.device))
        hidden = torch.cat([img, txt.to(img.dtype)], dim=0)
        return self.forward_tokens(0, hidden, torch.arange(hidden.shape[0], device=img.device),
                                   ctx, None)

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[T, W_vlm] (final-normed) -> [T, vocab] with the tied embedding matrix."""
        return hidden.to(self.dtype) @ self.token_embedding.weight.t()

    # ---- action expert projections -------------------------------------------------------
    def _head(self, expert: int) -> ActionHead:
        if not 1 <= expert < self.config.num_experts:
            raise ValueError(f"expert {expert} is not an action expert (1..{self.config.num_experts - 1})")
        return self.action_heads[expert - 1]

    def action_in(self, expert: int, x: torch.Tensor) -> torch.Tensor:
        head = self._head(expert)
        return head.action_in_proj(x.to(head.action_in_proj.weight.dtype))

    def action_out(self, expert: int, h: torch.Tensor) -> torch.Tensor:
        head = self._head(expert)
        return head.action_out_proj(h.to(head.action_out_proj.weight.dtype))

    def time_cond(self, expert: int, t: float | torch.Tensor) -> torch.Tensor:
        """adaRMS conditioning: silu(time_mlp_out(silu(time_mlp_in(sinusoid(t))))) -> [W_e] ([B, W_e])."""
        head = self._head(expert)
        w = head.time_mlp_in.weight
        emb = sinusoidal_time_embedding(t, self.expert_width(expert), device=w.device).to(w.dtype)
        act = nn.functional.silu
        return act(head.time_mlp_out(act(head.time_mlp_in(emb))))


    def adarms_modulations(self, expert: int, cond: torch.Tensor) -> AdaRMSModulations:
        """Precompute the expert's adaRMS modulations for a conditioning vector (one time step)."""
        ex = self.experts[expert]
        if not ex.adarms:
            raise ValueError(f"expert {expert} has no adaRMS norms")
        return AdaRMSModulations(
            tuple((layer.input_norm.modulation(cond), layer.post_norm.modulation(cond))
                  for layer in ex.layers),
            ex.norm.modulation(cond))

    def fuse_projections(self, layout: str = "standard") -> "MoTModel":
        """Inference-time fused q/k/v and gate/up weights; call again after loading weights.
        layout "transposed": the decoder's projections as [in, out] copies (`x @ w`)."""
        for expert in self.experts:
            for layer in expert.layers:
                layer.fuse(layout)
        return self

    # ---- the transformer ------------------------------------------------------------------
    def forward_tokens(self, expert: int, hidden: torch.Tensor, positions: torch.Tensor,
                       ctx: AttentionContext,
                       adarms_cond: torch.Tensor | AdaRMSModulations | None = None) -> torch.Tensor:
        """Run all layers of ``expert`` on packed tokens; returns the expert's final-normed hidden.
        ``adarms_cond``: the conditioning vector, or its precomputed AdaRMSModulations."""
        if not 0 <= expert < self.config.num_experts:
            raise ValueError(f"expert must be in [0, {self.config.num_experts}), got {expert}")
        ex = self.experts[expert]
        if hidden.dim() != 2 or hidden.shape[1] != ex.width:
            raise ValueError(f"hidden for expert {expert} must be [T, {ex.width}], got {tuple(hidden.shape)}")
        if positions.shape != hidden.shape[:1]:
            raise ValueError(f"positions must be [T]={hidden.shape[0]}, got {tuple(positions.shape)}")
        if ex.adarms:
            if adarms_cond is None:
                raise ValueError(f"expert {expert} uses adaRMS: pass adarms_cond [T, {ex.width}]")
        else:
            adarms_cond = None
        mods = adarms_cond if isinstance(adarms_cond, AdaRMSModulations) else None
        if mods is not None:
            adarms_cond = None
        cfg = self.config
        t = hidden.shape[0]
        if ctx is None:
            raise ValueError("forward_tokens needs an AttentionContext")
        cos, sin = rope_cos_sin(positions.to(hidden.device), cfg.head_dim, cfg.rope_theta)
        h = hidden.to(ex.layers[0].q_proj.weight.dtype)
        for i, layer in enumerate(ex.layers):
            normed, gate = layer.input_norm(h, adarms_cond, None if mods is None else mods.layers[i][0])
            q, k, v = layer.qkv(normed, cfg)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            att = ctx.attend(i, q, k, v)
            h = _residual(h, layer.out_proj(att.reshape(t, -1).to(h.dtype)), gate)
            normed, gate = layer.post_norm(h, adarms_cond, None if mods is None else mods.layers[i][1])
            h = _residual(h, layer.mlp_forward(normed), gate)
        out, _ = ex.norm(h, adarms_cond, None if mods is None else mods.final)  # its gate is unused
        return out
