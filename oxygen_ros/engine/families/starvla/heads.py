"""StarVLA's action heads on the Qwen3-VL prefill's hidden states (docs/starvla.md).

Built from github starVLA/starVLA's description and shapes (no code copied):

- ``hidden-crossattn`` (CrossAttnHead): a flow-matching DiT over [state token ; future tokens ;
  action chunk]. Each block: adaLN (LayerNorm without gains, then x (1 + scale) + shift from the
  timestep embedding), attention, residual; LayerNorm without gains, GELU(tanh) FF, residual.
  Source ``layerwise`` (QwenPI_v3): block i cross-attends to backbone layer depth - L + i, each
  layer through its own LayerNorm + Linear to the DiT width. Source ``last`` (GR00T): every cross
  block reads the last hidden state at the backbone's width; odd blocks may self-attend instead
  (interleave_self_attention), and an adaLN output norm + projection may precede the decoder.
- ``regress`` (RegressHead, OpenVLA-OFT): the last-layer hidden states of the prompt's
  action-query placeholder tokens through an MLP-ResNet: the chunk in one shot.

Time: StarVLA integrates tau from 0 (noise) to 1 (data), x_tau = (1 - tau) noise + tau action,
the network predicting u = dx/dtau = action - noise, and embeds the bucket floor(tau * 1000).
The project's sampler (sampler.euler_sample) integrates t = 1 - tau from 1 (noise) to 0, so
crossattn_velocity returns v = dx/dt = -u at tau = 1 - t: the same Euler steps.

The per-frame part (the projections and every cross block's K/V) runs once in
crossattn_memory; each denoising step runs only the DiT's own tokens (crossattn_velocity).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ...config.model_config import ExpertConfig, ModelConfig
from ...model.sampler import euler_sample

ADA_EPS = 1e-5  # the blocks' LayerNorms (diffusers' BasicTransformerBlock default)
OUT_EPS = 1e-6  # the DiT's output norm
MLP_EPS = 1e-5  # the OFT regressor's LayerNorms (torch's default)


class CrossAttnBlock(nn.Module):
    """One DiT block; ``kv_width`` None: self-attention over the DiT's tokens."""

    def __init__(self, width: int, heads: int, mlp_dim: int, kv_width: int | None) -> None:
        super().__init__()
        self.heads = heads
        self.cross = kv_width is not None
        kv = kv_width if kv_width is not None else width
        self.ada = nn.Linear(width, 2 * width)  # (scale, shift) from silu(temb)
        self.to_q = nn.Linear(width, width)
        self.to_k = nn.Linear(kv, width)
        self.to_v = nn.Linear(kv, width)
        self.to_out = nn.Linear(width, width)
        self.ff_in = nn.Linear(width, mlp_dim)
        self.ff_out = nn.Linear(mlp_dim, width)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, W] -> [B, heads, T, W / heads]."""
        b, t, w = x.shape
        return x.view(b, t, self.heads, w // self.heads).transpose(1, 2)

    def forward(self, h: torch.Tensor, temb: torch.Tensor, k: torch.Tensor | None,
                v: torch.Tensor | None, key_mask: torch.Tensor | None) -> torch.Tensor:
        scale, shift = self.ada(F.silu(temb)).chunk(2, dim=-1)
        x = F.layer_norm(h, h.shape[-1:], eps=ADA_EPS) * (1 + scale[:, None]) + shift[:, None]
        if not self.cross:  # the DiT's own tokens, all visible
            k, v, key_mask = self.split(self.to_k(x)), self.split(self.to_v(x)), None
        att = F.scaled_dot_product_attention(self.split(self.to_q(x)), k, v, attn_mask=key_mask)
        h = h + self.to_out(att.transpose(1, 2).reshape(h.shape))
        x = F.layer_norm(h, h.shape[-1:], eps=ADA_EPS)
        return h + self.ff_out(F.gelu(self.ff_in(x), approximate="tanh"))


class CrossAttnHead(nn.Module):
    """The DiT of a ``hidden-crossattn`` expert (QwenPI_v3's layer-wise head, GR00T's head)."""

    def __init__(self, expert: ExpertConfig, vlm_width: int) -> None:
        super().__init__()
        if expert.kind != "hidden-crossattn":
            raise ValueError(f"CrossAttnHead needs a hidden-crossattn expert, got {expert.kind}")
        h, w = expert.head, expert.width
        self.config, self.width, self.vlm_width = h, w, vlm_width
        self.num_layers = expert.num_layers
        layerwise = h.source == "layerwise"
        cross = [not (h.interleave_self_attention and i % 2 == 1) for i in range(self.num_layers)]
        self.cross_blocks = tuple(i for i, c in enumerate(cross) if c)
        # one LayerNorm + Linear per cross block's backbone layer (QwenPI_v3's project_layers)
        self.projections = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(vlm_width), nn.Linear(vlm_width, w))
            for _ in (self.cross_blocks if layerwise else ()))
        kv = w if layerwise else vlm_width
        self.time_in = nn.Linear(h.time_channels, w)
        self.time_out = nn.Linear(w, w)
        self.blocks = nn.ModuleList(CrossAttnBlock(w, expert.num_heads, expert.mlp_dim,
                                                   kv if c else None) for c in cross)
        self.action_in = nn.Linear(h.action_dim, w)
        self.action_mix = nn.Linear(2 * w, w)  # [action ; sinusoid(bucket)] -> width
        self.action_out = nn.Linear(w, w)
        self.positions = nn.Parameter(torch.zeros(h.max_positions, w))
        self.future = nn.Parameter(torch.zeros(h.future_tokens, w))
        self.state_in = self.state_out = None
        if h.state_dim:
            self.state_in = nn.Linear(h.state_dim, h.mlp_hidden)
            self.state_out = nn.Linear(h.mlp_hidden, w)
        self.out_ada = self.out_proj = None
        if h.output_dim:
            self.out_ada = nn.Linear(w, 2 * w)  # (shift, scale) from silu(temb)
            self.out_proj = nn.Linear(w, h.output_dim)
        self.decoder_in = nn.Linear(h.output_dim or w, h.mlp_hidden)
        self.decoder_out = nn.Linear(h.mlp_hidden, h.action_dim)

    @property
    def tokens(self) -> int:
        """DiT tokens per chunk: [state] + future tokens + the chunk."""
        c = self.config
        return (1 if c.state_dim else 0) + c.future_tokens + c.horizon


class RegressHead(nn.Module):
    """The MLP-ResNet of a ``regress`` expert (OFT): LayerNorm, Linear, ReLU, residual blocks
    x + ReLU(Linear(LayerNorm(x))), LayerNorm, Linear; per action-query token."""

    def __init__(self, expert: ExpertConfig, vlm_width: int) -> None:
        super().__init__()
        if expert.kind != "regress":
            raise ValueError(f"RegressHead needs a regress expert, got {expert.kind}")
        if expert.width != vlm_width:
            raise ValueError(f"a regress head reads width {vlm_width}, its config says {expert.width}")
        self.config, self.vlm_width, hidden = expert.head, vlm_width, expert.mlp_dim
        self.norm_in = nn.LayerNorm(vlm_width)
        self.fc_in = nn.Linear(vlm_width, hidden)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, hidden))
                                    for _ in range(expert.num_layers))
        self.norm_out = nn.LayerNorm(hidden)
        self.fc_out = nn.Linear(hidden, expert.head.action_dim)


def build_head(expert: ExpertConfig, vlm_width: int) -> CrossAttnHead | RegressHead:
    if expert.kind == "hidden-crossattn":
        return CrossAttnHead(expert, vlm_width)
    if expert.kind == "regress":
        return RegressHead(expert, vlm_width)
    raise ValueError(f"no StarVLA head for expert kind {expert.kind!r}")


def init_head(head: nn.Module, seed: int = 0) -> nn.Module:
    """Deterministic random weights (no StarVLA checkpoint here): matrices ~ N(0, 1/fan_in),
    biases ~ N(0, 0.1), LayerNorm gains 1 + N(0, 0.1), learned tokens / positions ~ N(0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in head.named_parameters():
            z = torch.randn(p.shape, generator=gen)
            if name in ("positions", "future"):
                value = z
            elif p.dim() == 2:
                value = z / math.sqrt(p.shape[1])
            elif isinstance(head.get_submodule(name.rpartition(".")[0] or ""), nn.LayerNorm) \
                    and name.endswith("weight"):
                value = 1 + 0.1 * z
            else:
                value = 0.1 * z
            p.copy_(value.to(p.dtype))
    return head.eval().requires_grad_(False)


# ---- the DiT heads --------------------------------------------------------------------------
@dataclass
class CrossAttnMemory:
    """What a DiT head reads from one prefill, for a batch of B frames: each cross block's K/V
    [B, heads, P, W / heads] and the key mask [B, 1, 1, P] (True: a frame's own prefix token)."""

    keys: dict[int, torch.Tensor]
    values: dict[int, torch.Tensor]
    key_mask: torch.Tensor

    @property
    def batch(self) -> int:
        return self.key_mask.shape[0]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys.values(), *self.values.values()))


def crossattn_memory(head: CrossAttnHead, hidden: torch.Tensor | Sequence[torch.Tensor],
                     valid: torch.Tensor | None = None) -> CrossAttnMemory:
    """Per frame batch, once: the cross blocks' K/V. ``hidden``: layerwise, the hidden states of
    the backbone's last L layers in order (L tensors or one [L, B, P, W_vlm]; layer depth - 1's
    is the final-normed one); last, the final hidden state [B, P, W_vlm]. ``valid`` [B, P] marks
    each frame's prefix tokens (frames of different lengths padded); None: all."""
    w = head.projections[0][1].weight if len(head.projections) else head.blocks[0].to_k.weight
    if head.config.source == "layerwise":
        layers = list(hidden.unbind(0) if isinstance(hidden, torch.Tensor) else hidden)
        if len(layers) != head.num_layers:
            raise ValueError(f"a layerwise head of {head.num_layers} blocks needs the hidden "
                             f"states of the last {head.num_layers} layers, got {len(layers)}")
    else:
        if not isinstance(hidden, torch.Tensor):
            raise ValueError("a last-layer head takes the final hidden state [B, P, W], not a list")
        layers = [hidden] * head.num_layers
    shape = layers[0].shape
    for x in layers:
        if x.dim() != 3 or x.shape != shape or x.shape[-1] != head.vlm_width:
            raise ValueError(f"hidden states must be [B, P, {head.vlm_width}] alike, got "
                             f"{tuple(x.shape)} beside {tuple(shape)}")
    b, p = shape[0], shape[1]
    if valid is None:
        valid = torch.ones(b, p, dtype=torch.bool, device=w.device)
    if valid.shape != (b, p) or valid.dtype != torch.bool:
        raise ValueError(f"valid must be bool [{b}, {p}], got {valid.dtype} {tuple(valid.shape)}")
    if not bool(valid.any(dim=1).all()):
        raise ValueError("every frame needs at least one valid prefix token")
    keys, values = {}, {}
    for j, i in enumerate(head.cross_blocks):
        x = layers[i].to(device=w.device, dtype=w.dtype)
        if len(head.projections):
            x = head.projections[j](x)
        block = head.blocks[i]
        keys[i], values[i] = block.split(block.to_k(x)), block.split(block.to_v(x))
    return CrossAttnMemory(keys, values, valid.to(w.device)[:, None, None, :])


def time_bucket(t: float, buckets: int) -> int:
    """StarVLA's timestep floor(tau * buckets) at tau = 1 - t; rounded to 1e-6 first, so that
    1 - 0.8 lands in bucket 200 as StarVLA's k / S = 0.2 does."""
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"flow time t must be in [0, 1], got {t}")
    return math.floor(round((1.0 - t) * buckets, 6))


def timestep_features(bucket: int, channels: int, device=None) -> torch.Tensor:
    """The DiT's timestep features [channels]: [cos, sin](bucket * 10000^(-j / (half - 1)))."""
    half = channels // 2
    freq = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=device)
                     / (half - 1))
    arg = bucket * freq
    return torch.cat((arg.cos(), arg.sin()))


def action_time_features(bucket: int, width: int, device=None) -> torch.Tensor:
    """The action encoder's time features [width]: [sin, cos](bucket * 10000^(-j / half))."""
    half = width // 2
    freq = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=device)
                     / half)
    arg = bucket * freq
    return torch.cat((arg.sin(), arg.cos()))


def crossattn_velocity(head: CrossAttnHead, memory: CrossAttnMemory, x: torch.Tensor, t: float,
                       state: torch.Tensor | None = None) -> torch.Tensor:
    """v(x, t) [B, H, action_dim] (float32) in the project's convention (t = 1 noise): minus
    StarVLA's prediction at tau = 1 - t. ``state`` [B, state_dim] for a head with a state token."""
    c, w = head.config, head.action_in.weight
    if x.dim() != 3 or x.shape[1:] != (c.horizon, c.action_dim) or x.shape[0] != memory.batch:
        raise ValueError(f"x must be [{memory.batch}, {c.horizon}, {c.action_dim}], got "
                         f"{tuple(x.shape)}")
    b = x.shape[0]
    bucket = time_bucket(t, c.time_buckets)
    temb = head.time_out(F.silu(head.time_in(
        timestep_features(bucket, c.time_channels, w.device).to(w.dtype))))[None].expand(b, -1)
    a = head.action_in(x.to(device=w.device, dtype=w.dtype))
    tau = action_time_features(bucket, head.width, w.device).to(w.dtype).expand_as(a)
    a = head.action_out(F.silu(head.action_mix(torch.cat((a, tau), dim=-1))))
    parts = [head.future[None].expand(b, -1, -1), a + head.positions[: c.horizon]]
    if c.state_dim:
        if state is None or state.shape != (b, c.state_dim):
            raise ValueError(f"this head takes a state [{b}, {c.state_dim}], got "
                             f"{None if state is None else tuple(state.shape)}")
        s = head.state_out(F.relu(head.state_in(state.to(device=w.device, dtype=w.dtype))))
        parts.insert(0, s[:, None])
    elif state is not None:
        raise ValueError("this head has no state token (its state is in the prompt)")
    h = torch.cat(parts, dim=1)
    for i, block in enumerate(head.blocks):
        h = block(h, temb, memory.keys.get(i), memory.values.get(i), memory.key_mask)
    if head.out_ada is not None:
        shift, scale = head.out_ada(F.silu(temb)).chunk(2, dim=-1)
        h = F.layer_norm(h, h.shape[-1:], eps=OUT_EPS) * (1 + scale[:, None]) + shift[:, None]
        h = head.out_proj(h)
    u = head.decoder_out(F.relu(head.decoder_in(h[:, -c.horizon:])))
    return -u.float()


def crossattn_sample(head: CrossAttnHead, memory: CrossAttnMemory, noise: torch.Tensor,
                     num_steps: int, state: torch.Tensor | None = None) -> torch.Tensor:
    """The chunk [B, H, action_dim] from ``noise`` by euler_sample's S steps (t = 1 -> 0)."""
    return euler_sample(lambda x, t: crossattn_velocity(head, memory, x, t, state),
                        noise.float(), num_steps)


# ---- the OFT head ---------------------------------------------------------------------------
def query_positions(ids: torch.Tensor, token_id: int, horizon: int) -> torch.Tensor:
    """[B, horizon] positions of the last ``horizon`` placeholder tokens in each row of ``ids``
    [B, P] (StarVLA's action queries), in order; ValueError where a row has fewer."""
    if ids.dim() != 2:
        raise ValueError(f"ids must be [B, P], got {tuple(ids.shape)}")
    hits = ids == token_id
    counts = hits.sum(dim=1)
    if bool((counts < horizon).any()):
        raise ValueError(f"every prompt needs {horizon} action-query tokens ({token_id}), got "
                         f"{counts.tolist()}")
    index = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
    last = torch.where(hits, index, -1).topk(horizon, dim=1).values
    return last.sort(dim=1).values


def regress_chunk(head: RegressHead, hidden: torch.Tensor, positions: torch.Tensor
                  ) -> torch.Tensor:
    """The chunk [B, H, action_dim] (float32) from the final hidden state [B, P, W_vlm] at the
    action-query positions [B, H] (query_positions)."""
    c, w = head.config, head.fc_in.weight
    if hidden.dim() != 3 or hidden.shape[-1] != head.vlm_width:
        raise ValueError(f"hidden must be [B, P, {head.vlm_width}], got {tuple(hidden.shape)}")
    b, p = hidden.shape[:2]
    if positions.shape != (b, c.horizon):
        raise ValueError(f"positions must be [{b}, {c.horizon}], got {tuple(positions.shape)}")
    if bool(((positions < 0) | (positions >= p)).any()):
        raise ValueError(f"action-query positions must be in [0, {p}), got {positions.tolist()}")
    q = hidden.gather(1, positions.to(hidden.device)[..., None].expand(-1, -1, hidden.shape[-1]))
    x = F.relu(head.fc_in(head.norm_in(q.to(device=w.device, dtype=w.dtype))))
    for block in head.blocks:
        x = x + F.relu(block(x))
    return head.fc_out(head.norm_out(x)).float()


# ---- what the prefill keeps -----------------------------------------------------------------
def kept_layers(config: ModelConfig) -> tuple[int, ...]:
    """Backbone layers whose hidden states over the whole prefix the heads read (layer
    depth - 1: the final-normed output); the regress head needs only the query rows of it."""
    layers: set[int] = set()
    for e in config.action_experts:
        if e.kind == "hidden-crossattn":
            last = e.head.source == "last"
            layers.update([config.depth - 1] if last else range(config.depth - e.num_layers,
                                                                config.depth))
    return tuple(sorted(layers))


def kept_hidden_bytes(config: ModelConfig, prefix_tokens: int, element_bytes: int) -> int:
    """Bytes per frame of the hidden states the prefill keeps for the heads (kept_layers over
    the prefix, plus the regress heads' query rows), before any projection."""
    rows = len(kept_layers(config)) * prefix_tokens
    rows += sum(e.head.horizon for e in config.action_experts if e.kind == "regress")
    return rows * config.vlm.width * element_bytes


def crossattn_memory_bytes(expert: ExpertConfig, prefix_tokens: int, element_bytes: int) -> int:
    """Bytes per frame of a DiT head's CrossAttnMemory (its cross blocks' K/V over the prefix)."""
    c = expert.head
    cross = expert.num_layers - (expert.num_layers // 2 if c.interleave_self_attention else 0)
    return 2 * cross * prefix_tokens * expert.width * element_bytes
