"""Qwen3-VL backbone + a Xiaomi-Robotics-0-style DiT action expert, on packed tokens.

The same contract as MoTModel (docs/architecture.md): ``forward_tokens(expert, hidden, positions,
ctx)`` with an AttentionContext that owns where K/V go, ``embed_tokens``, ``lm_logits``,
``prefill_prefix`` (images + prompt into the context). What differs from pi0.5:

- text decoder: Qwen3 layers (RMSNorm ``w * x``, per-head q_norm / k_norm before rotary, GQA,
  SwiGLU), a causal prefix, an LM head (tied or not);
- rotary positions have three axes (t, h, w): image tokens get their grid coordinates, text tokens
  one value on all axes that continues after the largest position so far; the frequency channels
  take h and w in an interleaved pattern (t h w t h w ...) up to ``mrope_section``. After the
  images every token's position is its sequence index + ``ModelConfig.rope_offset`` (1-D
  ``positions`` given to forward_tokens are already rotary positions: the runner adds the offset);
- vision: transformers' Qwen3VLVisionModel (patch embed over temporal x spatial patches, 2-D
  rotary, interpolated learned position embeddings, the patch merger, DeepStack mergers), fed by
  our own patch flattening of the [-1, 1] images (Qwen2VLImageProcessor's layout, mean = std =
  0.5); DeepStack features are added at the image positions after the first decoder layers;
- the action expert (DiT): L layers, layer i attending over its own tokens and the prefix K/V of
  backbone layer depth - L + i; its tokens are [state tokens, a time token, the action chunk],
  causal among themselves, the whole prefix visible; flow matching with Euler steps.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Qwen3VLVisionConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel
from transformers.activations import ACT2FN

from ...config.model_config import ModelConfig
from ...model.layers import GemmaMLP, apply_rope, rope_cos_sin, sinusoidal_time_embedding
from ..starvla.heads import CrossAttnHead, RegressHead, build_head, kept_layers


class QwenRMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) in float32, cast back to x.dtype, then times the weight."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


class QwenAttention(nn.Module):
    def __init__(self, width: int, heads: int, kv_heads: int, head_dim: int, eps: float) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(width, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(width, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(width, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, width, bias=False)
        self.q_norm = QwenRMSNorm(head_dim, eps)  # per head, before rotary
        self.k_norm = QwenRMSNorm(head_dim, eps)


class QwenMLP(GemmaMLP):
    """The same projections as Gemma's MLP: down(act(gate(x)) * up(x)), act SiLU unless the
    config says otherwise (transformers' ACT2FN, as its Qwen3-VL text MLP)."""

    def __init__(self, width: int, mlp_dim: int, act: str = "silu") -> None:
        super().__init__(width, mlp_dim)
        self.act = F.silu if act == "silu" else _activation(act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


def _activation(name: str):
    """transformers' parameter-free activation ``name`` (config.check_activation refused the
    rest), kept out of the module tree so the state dict stays transformers'."""
    return ACT2FN[name].forward


class QwenLayer(nn.Module):
    """One pre-norm decoder layer (the backbone's and the DiT's)."""

    def __init__(self, width: int, mlp_dim: int, heads: int, kv_heads: int, head_dim: int,
                 eps: float, act: str = "silu") -> None:
        super().__init__()
        self.self_attn = QwenAttention(width, heads, kv_heads, head_dim, eps)
        self.mlp = QwenMLP(width, mlp_dim, act)
        self.input_layernorm = QwenRMSNorm(width, eps)
        self.post_attention_layernorm = QwenRMSNorm(width, eps)

    def forward(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, ctx, layer: int
                ) -> torch.Tensor:
        a, t = self.self_attn, h.shape[0]
        x = self.input_layernorm(h)
        q = a.q_norm(a.q_proj(x).view(t, a.heads, a.head_dim))
        k = a.k_norm(a.k_proj(x).view(t, a.kv_heads, a.head_dim))
        v = a.v_proj(x).view(t, a.kv_heads, a.head_dim)
        att = ctx.attend(layer, apply_rope(q, cos, sin), apply_rope(k, cos, sin), v)
        h = h + a.o_proj(att.reshape(t, -1).to(h.dtype))
        return h + self.mlp(self.post_attention_layernorm(h))


class TextModel(nn.Module):
    """Qwen3-VL's language model (names as in transformers' state dict, so a
    ``model.language_model.*`` tensor loads as ``language_model.*``)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = config
        self.embed_tokens = nn.Embedding(c.vocab_size, c.vlm.width)
        self.layers = nn.ModuleList(
            QwenLayer(c.vlm.width, c.vlm.mlp_dim, c.num_heads, c.num_kv_heads, c.head_dim, c.rms_eps,
                      c.qwen.hidden_act)
            for _ in range(c.depth))
        self.norm = QwenRMSNorm(c.vlm.width, c.rms_eps)


class DiTExpert(nn.Module):
    """The flow-matching action expert on the backbone's last ``num_layers`` layers."""

    def __init__(self, config: ModelConfig, index: int) -> None:
        super().__init__()
        e = config.action_experts[index]
        self.width = e.width
        self.num_layers = e.num_layers or config.depth
        self.first_layer = config.depth - self.num_layers  # backbone layer DiT layer 0 reads
        self.state_tokens = config.qwen.state_tokens
        heads = e.num_heads or config.num_heads
        self.layers = nn.ModuleList(
            QwenLayer(e.width, e.mlp_dim, heads, config.num_kv_heads, config.head_dim, config.rms_eps)
            for _ in range(self.num_layers))
        self.norm = QwenRMSNorm(e.width, config.rms_eps)
        self.state_proj = nn.Linear(config.action_dim, max(1, self.state_tokens) * e.width)
        self.action_in_proj = nn.Linear(config.action_dim, e.width)
        self.action_out_proj = nn.Linear(e.width, config.action_dim)
        self.time_mlp_in = nn.Linear(e.width, e.width)
        self.time_mlp_out = nn.Linear(e.width, e.width)


def mrope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float,
                  section: tuple[int, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """3-axis positions [3, T] -> cos/sin [T, head_dim/2] (float32): frequency channel j takes
    the h axis where j % 3 == 1 and j < 3 * section[1], the w axis where j % 3 == 2 and
    j < 3 * section[2], else the t axis (Qwen3-VL's interleaved layout)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device,
                                             dtype=torch.float32) / head_dim))
    freqs = positions.to(torch.float32)[..., None] * inv_freq  # [3, T, D/2]
    j = torch.arange(head_dim // 2, device=positions.device)
    axis = torch.zeros_like(j)
    axis[(j % 3 == 1) & (j < 3 * section[1])] = 1
    axis[(j % 3 == 2) & (j < 3 * section[2])] = 2
    angles = freqs.gather(0, axis.view(1, 1, -1).expand(1, freqs.shape[1], -1))[0]
    return angles.cos(), angles.sin()


def image_text_positions(ids: list[int], image_token_id: int, rows: int, cols: int
                         ) -> torch.Tensor:
    """[3, T] (t, h, w) rotary positions of ``ids`` whose images are runs of rows * cols
    ``image_token_id``: an image starting at position s gets (s, s + row, s + col) and advances
    positions by max(rows, cols); a text token gets its position on all axes (transformers'
    get_rope_index for still images, Qwen3-VL and Qwen3.5)."""
    out, i, pos = [], 0, 0
    while i < len(ids):
        if ids[i] == image_token_id:
            r = torch.arange(rows).repeat_interleave(cols)
            cc = torch.arange(cols).repeat(rows)
            out.append(torch.stack([torch.zeros_like(r), r, cc]) + pos)
            pos += max(rows, cols)
            i += rows * cols
        else:
            out.append(torch.full((3, 1), pos))
            pos += 1
            i += 1
    return torch.cat(out, dim=1)


def patchify(images: torch.Tensor, patch: int, temporal: int, merge: int) -> torch.Tensor:
    """[N, 3, H, W] -> pixel rows [N * gh * gw, 3 * temporal * patch^2] in the order the
    Qwen2-VL image processor emits them (merge-block major; a still image repeated over the
    temporal patch)."""
    n, c, hgt, wid = images.shape
    gh, gw = hgt // patch, wid // patch
    x = images[:, None].expand(n, temporal, c, hgt, wid)
    x = x.reshape(n, temporal, c, gh // merge, merge, patch, gw // merge, merge, patch)
    x = x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return x.reshape(n * gh * gw, c * temporal * patch * patch)


def vision_config(config: ModelConfig) -> Qwen3VLVisionConfig:
    v, q = config.vision, config.qwen
    vc = Qwen3VLVisionConfig(
        depth=v.depth, hidden_size=v.width, hidden_act=q.vision_hidden_act,
        intermediate_size=v.mlp_dim, num_heads=v.num_heads, in_channels=3,
        patch_size=v.patch_size, spatial_merge_size=q.spatial_merge_size,
        temporal_patch_size=q.temporal_patch_size, out_hidden_size=config.vlm.width,
        num_position_embeddings=q.num_position_embeddings,
        deepstack_visual_indexes=list(q.deepstack_visual_indexes))
    vc._attn_implementation = "sdpa"
    return vc


def prefill_kept_layers(config: ModelConfig) -> tuple[int, ...]:
    """Backbone layers whose hidden states the prefill keeps for the StarVLA heads: the DiT
    heads' (starvla_heads.kept_layers) and, for an OFT head, the last (its query rows)."""
    layers = set(kept_layers(config))
    if any(e.kind == "regress" for e in config.action_experts):
        layers.add(config.depth - 1)
    return tuple(sorted(layers))


class Qwen3VLModel(nn.Module):
    """Expert 0: the Qwen3-VL text decoder; experts 1..: DiT action experts (kind kv-layerwise)
    or StarVLA heads on the prefill's hidden states (hidden-crossattn, regress)."""

    family = "qwen3vl"

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.qwen is None:
            raise ValueError("Qwen3VLModel needs a qwen3vl ModelConfig")
        self.config = config
        self.attn_scale = config.head_dim ** -0.5
        self.visual = Qwen3VLVisionModel(vision_config(config))
        self.language_model = TextModel(config)
        self.lm_head = None if config.qwen.tie_word_embeddings else \
            nn.Linear(config.vlm.width, config.vocab_size, bias=False)
        self.experts = nn.ModuleList(
            DiTExpert(config, i) if e.kind == "kv-layerwise" else build_head(e, config.vlm.width)
            for i, e in enumerate(config.action_experts))
        # layer -> hidden states [T, W] the prefill writes for the heads (prefill_kept_layers)
        self.kept_layers = prefill_kept_layers(config)

    @property
    def dtype(self) -> torch.dtype:
        return self.language_model.embed_tokens.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.language_model.embed_tokens.weight.device

    def expert_width(self, expert: int) -> int:
        if expert == 0:
            return self.config.vlm.width
        return self._dit(expert).width if self.expert_kind(expert) == "dit" \
            else self.head(expert).vlm_width

    def expert_kind(self, expert: int) -> str:
        """lm (the backbone), dit (a kv-layerwise DiT), or a StarVLA head's kind."""
        if expert == 0:
            return "lm"
        if not 1 <= expert <= len(self.experts):
            raise ValueError(f"expert {expert} is not an action expert (1..{len(self.experts)})")
        kind = self.config.action_experts[expert - 1].kind
        return "dit" if kind == "kv-layerwise" else kind

    def head(self, expert: int) -> CrossAttnHead | RegressHead:
        """A StarVLA head (an expert that reads the prefill's hidden states)."""
        if self.expert_kind(expert) in ("lm", "dit"):
            raise ValueError(f"expert {expert} is not a StarVLA head")
        return self.experts[expert - 1]

    def _dit(self, expert: int) -> DiTExpert:
        if self.expert_kind(expert) != "dit":
            raise ValueError(f"expert {expert} is not a kv-layerwise DiT expert")
        return self.experts[expert - 1]

    # ---- embeddings ---------------------------------------------------------------------------
    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        emb = self.language_model.embed_tokens
        return emb(ids.to(emb.weight.device))

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        w = self.language_model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return hidden.to(w.dtype) @ w.t()

    def embed_images(self, images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """[N, 3, H, W] in [-1, 1] -> (merged tokens [N * rows * cols, W_vlm], DeepStack
        features, one [N * rows * cols, W_vlm] per decoder layer they are added after)."""
        c, q = self.config, self.config.qwen
        size = c.vision.image_size
        if images.dim() != 4 or images.shape[1] != 3 or tuple(images.shape[-2:]) != (size, size):
            raise ValueError(f"images must be [N, 3, {size}, {size}], got {tuple(images.shape)}")
        w = self.visual.patch_embed.proj.weight
        pix = patchify(images.to(device=w.device, dtype=w.dtype), c.vision.patch_size,
                       q.temporal_patch_size, q.spatial_merge_size)
        side = size // c.vision.patch_size
        grid = torch.tensor([[1, side, side]] * images.shape[0], device=w.device)
        out = self.visual(pix, grid_thw=grid, return_dict=True)
        return out.pooler_output, list(out.deepstack_features)

    # ---- the prefix layout (chat template + image placeholders) -------------------------------
    def prefix_ids(self, num_images: int, prompt_ids: list[int] | tuple[int, ...]) -> list[int]:
        """head + num_images x [<|vision_start|>, <|image_pad|> x rows*cols, <|vision_end|>] +
        prompt: the token ids the Qwen3-VL processor and chat template give the start of a user
        turn with images first, then its text. The engine's prefix ends there, inside the user
        turn; a question (Intake.encode_suffix) or the tests' prompts add the template's tail."""
        q = self.config.qwen
        image = [q.vision_start_token_id] + [q.image_token_id] * self.config.image_grid_tokens \
            + [q.vision_end_token_id]
        return list(q.head_ids) + image * num_images + list(prompt_ids)

    def prefix_positions(self, ids: list[int]) -> torch.Tensor:
        """[3, T] rotary positions of a prefix (transformers' get_rope_index for still images)."""
        rows, cols = self.config.image_grid
        return image_text_positions(ids, self.config.qwen.image_token_id, rows, cols)

    def prefill_prefix(self, images: torch.Tensor, prompt_ids: list[int], ctx,
                       keep: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
        """The observation prefix (images [N, 3, H, W] in [-1, 1] + prompt ids) through the
        backbone, causal, K/V into ``ctx``. Returns the final-normed hidden [P, W_vlm].
        ``keep``: layer -> a buffer [>= P, W_vlm] that gets that layer's hidden states
        (forward_tokens)."""
        ids = self.prefix_ids(images.shape[0], prompt_ids)
        ids_t = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        hidden = self.embed_tokens(ids_t)
        mask = ids_t == self.config.qwen.image_token_id
        feats, deep = self.embed_images(images)
        hidden = hidden.masked_scatter(mask[:, None], feats.to(hidden.dtype))
        positions = self.prefix_positions(ids).to(self.device)
        return self.forward_tokens(0, hidden, positions, ctx, deepstack=(mask, deep), keep=keep)

    # ---- the transformer ----------------------------------------------------------------------
    def _rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.config
        if positions.dim() == 2:
            return mrope_cos_sin(positions, c.head_dim, c.rope_theta, c.qwen.mrope_section)
        return rope_cos_sin(positions, c.head_dim, c.rope_theta)  # one value on all three axes

    def forward_tokens(self, expert: int, hidden: torch.Tensor, positions: torch.Tensor, ctx,
                       adarms_cond=None, deepstack=None,
                       keep: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
        """Run ``expert`` on packed tokens; positions [T] (rotary positions, all axes equal) or
        [3, T]. The DiT's layer i attends through ctx layer ``first_layer + i``. ``deepstack``:
        (image mask [T], features per layer) for a prefix. ``keep`` (the backbone only):
        layer i -> a preallocated buffer whose first T rows get layer i's output, as
        transformers' ``output_hidden_states[i + 1]`` (the last layer's: after the final norm),
        what StarVLA's heads read."""
        if ctx is None:
            raise ValueError("forward_tokens needs an AttentionContext")
        t = hidden.shape[0]
        if positions.shape[-1] != t or positions.dim() not in (1, 2):
            raise ValueError(f"positions must be [T] or [3, T] with T={t}, got {tuple(positions.shape)}")
        if expert == 0:
            layers, norm, first = self.language_model.layers, self.language_model.norm, 0
        else:
            dit = self._dit(expert)
            layers, norm, first = dit.layers, dit.norm, dit.first_layer
        width = self.expert_width(expert)
        if hidden.dim() != 2 or hidden.shape[1] != width:
            raise ValueError(f"hidden for expert {expert} must be [T, {width}], got {tuple(hidden.shape)}")
        cos, sin = self._rotary(positions.to(hidden.device))
        h = hidden.to(layers[0].input_layernorm.weight.dtype)
        keep = keep or {}
        if keep and expert != 0:
            raise ValueError("only the backbone keeps hidden states")
        last = len(layers) - 1
        for i, layer in enumerate(layers):
            h = layer(h, cos, sin, ctx, first + i)
            if i in keep and i != last:  # before DeepStack's addition, as transformers records
                keep[i][:t].copy_(h)
            if deepstack is not None and i < len(deepstack[1]):
                mask, feats = deepstack
                h = h.clone()
                h[mask] = h[mask] + feats[i].to(h.dtype)
        out = norm(h)
        if last in keep:
            keep[last][:t].copy_(out)
        return out

    # ---- the DiT ------------------------------------------------------------------------------
    def dit_tokens(self, expert: int, x: torch.Tensor, t: float, state: torch.Tensor) -> torch.Tensor:
        """[state tokens ; time token ; action tokens] of one chunk x [H, action_dim]."""
        dit = self._dit(expert)
        w = dit.action_in_proj.weight
        parts = []
        if dit.state_tokens:
            parts.append(dit.state_proj(state.to(device=w.device, dtype=w.dtype)).view(
                dit.state_tokens, dit.width))
        emb = sinusoidal_time_embedding(t, dit.width, device=w.device).to(w.dtype)
        parts.append(dit.time_mlp_out(F.silu(dit.time_mlp_in(emb)))[None])
        parts.append(dit.action_in_proj(x.to(w.dtype)))
        return torch.cat(parts)

    def dit_velocity(self, expert: int, x: torch.Tensor, t: float, state: torch.Tensor,
                     positions: torch.Tensor, ctx) -> torch.Tensor:
        """v(x, t) [H, action_dim] (float32); ``ctx`` makes the DiT tokens causal among
        themselves and shows them the whole prefix."""
        dit = self._dit(expert)
        out = self.forward_tokens(expert, self.dit_tokens(expert, x, t, state), positions, ctx)
        return dit.action_out_proj(out[-x.shape[0]:]).float()
