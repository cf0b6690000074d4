"""Qwen3.5's multimodal backbone (hybrid: Gated DeltaNet + gated full attention), standalone.

Built from a transformers ``Qwen3_5Config``; loads a ``Qwen3_5ForConditionalGeneration``
``save_pretrained`` folder (``load_qwen35_folder``). The engine serves it as family qwen35
(qwen35_vla.py adds the action heads; docs/qwen35.md). What it is:

- vision: transformers' ``Qwen3_5VisionModel`` (Qwen3-VL's tower without DeepStack) fed by
  qwen3vl.patchify; its merged tokens replace the ``<|image_pad|>`` embeddings;
- rotary positions as Qwen3-VL's (qwen3vl.image_text_positions), interleaved MRoPE over the first
  ``partial_rotary_factor`` of each head's dims (the rest pass through);
- layers per ``layer_types``: "full_attention" = output-gated attention (q_proj gives a query and
  a per-channel gate, sigmoid(gate) scales the attention output), q/k RMSNorm before rotary, GQA,
  K/V through the project's AttentionContext (``ctx.attend``, indexed by attention layer);
  "linear_attention" = Gated DeltaNet: a depthwise causal conv (kernel K) + activation over
  [q | k | v], L2-normalised q/k, the gated delta rule (gated_delta.py: chunked for runs of
  tokens, recurrent for one token), a gated RMSNorm with SiLU(z), out_proj;
- every other RMSNorm is zero-centred: x_norm * (1 + w), in float32.

The Gated DeltaNet state is the caller's: a ``LinearState`` holds, per linear-attention layer,
the conv state [conv_dim, K] (the last K inputs of the conv, zeros at the start) and the
recurrent state [Hv, dk, dv] (float32); forward_tokens writes the new values into those tensors
in place, so whoever owns them (a test, or the engine's state slots: engine/runner/state_pool.py)
decides where they live, and a ``clone`` is a fork.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from safetensors.torch import load_file
from transformers import Qwen3_5Config
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionModel

from . import gated_delta
from ...model.layers import apply_rope
from ..qwen3vl.model import QwenMLP, _activation, image_text_positions, mrope_cos_sin, patchify
# Qwen3.5 saves its backbone under Qwen3-VL's key layout (mtp.* and the like map to None)
from ..qwen3vl.checkpoint import backbone_key
from ..qwen3vl.config import check_activation
from ...model.sampler import LocalContext

LAYER_KINDS = ("linear_attention", "full_attention")


@dataclass
class LinearState:
    """One sequence's Gated DeltaNet state, per linear-attention layer (in layer order)."""

    conv: list[torch.Tensor]  # [conv_dim, K], the model's dtype
    recurrent: list[torch.Tensor]  # [Hv, dk, dv], float32

    def clone(self) -> "LinearState":
        """An independent copy (a fork: each continuation writes its own)."""
        return LinearState([c.clone() for c in self.conv], [r.clone() for r in self.recurrent])

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.conv, *self.recurrent))


class ZeroCenteredRMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * (1 + w), in float32, cast back (w starts at zero)."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * (1.0 + self.weight.float())).to(x.dtype)


class GatedRMSNorm(nn.Module):
    """Per head: rmsnorm(x) * w * silu(z) (a plain weight, starting at one)."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
        return (self.weight * normed * F.silu(z.float())).to(x.dtype)


def l2_normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(sum(x^2) + eps) over the last dim (the eps inside the root, as FLA's kernels)."""
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


class GatedDeltaNet(nn.Module):
    """A linear-attention token mixer (names as transformers' Qwen3_5GatedDeltaNet)."""

    def __init__(self, width: int, key_heads: int, value_heads: int, key_dim: int,
                 value_dim: int, kernel: int, eps: float, act: str) -> None:
        super().__init__()
        if value_heads % key_heads:
            raise ValueError(f"linear_num_value_heads {value_heads} must be a multiple of "
                             f"linear_num_key_heads {key_heads}")
        self.hk, self.hv, self.dk, self.dv = key_heads, value_heads, key_dim, value_dim
        self.kernel = kernel
        self.conv_dim = 2 * key_heads * key_dim + value_heads * value_dim
        self.in_proj_qkv = nn.Linear(width, self.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(width, value_heads * value_dim, bias=False)
        self.in_proj_b = nn.Linear(width, value_heads, bias=False)
        self.in_proj_a = nn.Linear(width, value_heads, bias=False)
        # holds the depthwise kernel [conv_dim, 1, K]; applied by _conv over [state ; new]
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, kernel, groups=self.conv_dim,
                                bias=False)
        self.dt_bias = nn.Parameter(torch.ones(value_heads))
        self.A_log = nn.Parameter(torch.zeros(value_heads))
        self.norm = GatedRMSNorm(value_dim, eps)
        self.out_proj = nn.Linear(value_heads * value_dim, width, bias=False)
        self.act = F.silu if act == "silu" else _activation(act)

    def _conv(self, x: torch.Tensor, conv_state: torch.Tensor) -> torch.Tensor:
        """Causal depthwise conv of x [T, C] continuing from the last K inputs in conv_state
        [C, K]; the state gets the last K inputs."""
        window = torch.cat([conv_state.to(x.dtype), x.t()], dim=1)  # [C, K + T]
        # out[c, j] = sum_m w[c, m] * window[c, 1 + j + m]: as a product over sliding windows
        # (CPU's depthwise conv1d takes tens of ms for one token at these sizes)
        taps = window[:, 1:].unfold(1, self.kernel, 1)  # [C, T, K]
        out = (taps * self.conv1d.weight[:, None, 0, :].to(x.dtype)).sum(-1)
        conv_state.copy_(window[:, -self.kernel:])
        return self.act(out.t())  # [T, C]

    def forward(self, x: torch.Tensor, conv_state: torch.Tensor, state: torch.Tensor,
                recurrent: bool, chunk: int) -> torch.Tensor:
        t = x.shape[0]
        qkv = self._conv(self.in_proj_qkv(x), conv_state)
        kd = self.hk * self.dk
        q, k, v = qkv.split([kd, kd, self.hv * self.dv], dim=-1)
        group = self.hv // self.hk  # each q/k head serves `group` consecutive v heads
        q = l2_normalize(q.reshape(t, self.hk, self.dk).float()).repeat_interleave(group, 1)
        k = l2_normalize(k.reshape(t, self.hk, self.dk).float()).repeat_interleave(group, 1)
        q = q * self.dk ** -0.5
        v = v.reshape(t, self.hv, self.dv)
        beta = self.in_proj_b(x).float().sigmoid()
        g = -self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias.float())
        if recurrent:
            out, new = gated_delta.recurrent(q, k, v, g, beta, state)
        else:
            out, new = gated_delta.chunked(q, k, v, g, beta, state, chunk)
        state.copy_(new)
        z = self.in_proj_z(x).reshape(t, self.hv, self.dv)
        out = self.norm(out.to(x.dtype), z)
        return self.out_proj(out.reshape(t, -1))

    def step_rows(self, x: torch.Tensor, conv_states: torch.Tensor, states: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One token for each of B sequences at once (batched decode): x [B, W], their conv
        states [B, C, K] and recurrent states [B, Hv, dk, dv]. The recurrent form, row by row
        the same arithmetic as ``forward(..., recurrent=True)`` on one token. Returns (output
        [B, W], new conv states, new recurrent states (float32)); the caller writes them back."""
        b = x.shape[0]
        qkv = self.in_proj_qkv(x)
        window = torch.cat([conv_states.to(x.dtype), qkv[:, :, None]], dim=2)  # [B, C, K + 1]
        taps = window[:, :, 1:]
        qkv = self.act((taps * self.conv1d.weight[None, :, 0, :].to(x.dtype)).sum(-1))
        kd = self.hk * self.dk
        q, k, v = qkv.split([kd, kd, self.hv * self.dv], dim=-1)
        group = self.hv // self.hk
        q = l2_normalize(q.reshape(b, self.hk, self.dk).float()).repeat_interleave(group, 1)
        k = l2_normalize(k.reshape(b, self.hk, self.dk).float()).repeat_interleave(group, 1)
        q = q * self.dk ** -0.5
        v = v.reshape(b, self.hv, self.dv).float()
        beta = self.in_proj_b(x).float().sigmoid()
        g = -self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias.float())
        s = states.float() * g.exp()[:, :, None, None]
        predicted = (k[:, :, None, :] @ s)[:, :, 0]  # S^T k per row and head
        delta = beta[:, :, None] * (v - predicted)
        s = s + k[:, :, :, None] * delta[:, :, None, :]
        out = (q[:, :, None, :] @ s)[:, :, 0]
        z = self.in_proj_z(x).reshape(b, self.hv, self.dv)
        out = self.norm(out.to(x.dtype), z)
        return self.out_proj(out.reshape(b, -1)), taps, s


class GatedAttention(nn.Module):
    """Output-gated full attention (names as transformers' Qwen3_5Attention)."""

    def __init__(self, width: int, heads: int, kv_heads: int, head_dim: int, eps: float,
                 bias: bool) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(width, heads * head_dim * 2, bias=bias)  # [query | gate] per head
        self.k_proj = nn.Linear(width, kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(width, kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * head_dim, width, bias=bias)
        self.q_norm = ZeroCenteredRMSNorm(head_dim, eps)
        self.k_norm = ZeroCenteredRMSNorm(head_dim, eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, ctx, layer: int
                ) -> torch.Tensor:
        t, d = x.shape[0], self.head_dim
        q, gate = self.q_proj(x).view(t, self.heads, 2 * d).split(d, dim=-1)
        q = self.q_norm(q)
        k = self.k_norm(self.k_proj(x).view(t, self.kv_heads, d))
        v = self.v_proj(x).view(t, self.kv_heads, d)
        att = ctx.attend(layer, _partial_rope(q, cos, sin), _partial_rope(k, cos, sin), v)
        att = att.reshape(t, -1).to(x.dtype) * torch.sigmoid(gate.reshape(t, -1))
        return self.o_proj(att)


def _partial_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first 2 * cos.shape[-1] dims of each head (split halves); the rest pass."""
    rot = 2 * cos.shape[-1]
    return torch.cat([apply_rope(x[..., :rot], cos, sin), x[..., rot:]], dim=-1)


class HybridLayer(nn.Module):
    def __init__(self, kind: str, tc) -> None:
        super().__init__()
        self.kind = kind
        eps = tc.rms_norm_eps
        if kind == "linear_attention":
            self.linear_attn = GatedDeltaNet(
                tc.hidden_size, tc.linear_num_key_heads, tc.linear_num_value_heads,
                tc.linear_key_head_dim, tc.linear_value_head_dim, tc.linear_conv_kernel_dim,
                eps, tc.hidden_act)
        else:
            self.self_attn = GatedAttention(tc.hidden_size, tc.num_attention_heads,
                                            tc.num_key_value_heads, tc.head_dim, eps,
                                            tc.attention_bias)
        self.mlp = QwenMLP(tc.hidden_size, tc.intermediate_size, tc.hidden_act)
        self.input_layernorm = ZeroCenteredRMSNorm(tc.hidden_size, eps)
        self.post_attention_layernorm = ZeroCenteredRMSNorm(tc.hidden_size, eps)


class TextModel(nn.Module):
    """The language model (names as transformers', under ``language_model.``)."""

    def __init__(self, tc) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(tc.vocab_size, tc.hidden_size)
        self.layers = nn.ModuleList(HybridLayer(kind, tc) for kind in tc.layer_types)
        self.norm = ZeroCenteredRMSNorm(tc.hidden_size, tc.rms_norm_eps)


def check_config(config) -> None:
    """ValueError naming what this module does not implement in a Qwen3_5Config."""
    tc, rope = config.text_config, config.text_config.rope_parameters
    bad = sorted(set(tc.layer_types) - set(LAYER_KINDS))
    if bad or len(tc.layer_types) != tc.num_hidden_layers:
        raise ValueError(f"layer_types must be {tc.num_hidden_layers} of {LAYER_KINDS}, got "
                         f"{tc.layer_types}")
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"rope_type {rope.get('rope_type')!r} is not implemented (default only)")
    check_activation("text_config.hidden_act", tc.hidden_act)
    check_activation("vision_config.hidden_act", config.vision_config.hidden_act)
    rot = int(tc.head_dim * rope.get("partial_rotary_factor", 1.0))
    section = rope.get("mrope_section", [11, 11, 10])
    if rot % 2 or sum(section) != rot // 2:
        raise ValueError(f"mrope_section {section} must sum to half the rotary dims ({rot})")


class Qwen35Model(nn.Module):
    """The backbone: prefill (chunked) and decode (recurrent) of one sequence at a time, its
    attention K/V in an AttentionContext of ``num_attention_layers`` layers, its Gated DeltaNet
    state in a LinearState the caller owns."""

    def __init__(self, config) -> None:
        super().__init__()

        check_config(config)
        self.config = config
        tc = config.text_config
        self.layer_types = tuple(tc.layer_types)
        # the layer's index among its kind: attention layers in the context, linear ones in state
        self.slot = tuple(self.layer_types[:i].count(kind) for i, kind in enumerate(self.layer_types))
        self.num_attention_layers = self.layer_types.count("full_attention")
        self.num_linear_layers = self.layer_types.count("linear_attention")
        rope = tc.rope_parameters
        self.rope_theta = float(rope["rope_theta"])
        self.rotary_dims = int(tc.head_dim * rope.get("partial_rotary_factor", 1.0))
        self.mrope_section = tuple(rope.get("mrope_section", [11, 11, 10]))
        self.attn_scale = tc.head_dim ** -0.5
        vc = config.vision_config
        vc._attn_implementation = "sdpa"
        self.visual = Qwen3_5VisionModel(vc)
        self.language_model = TextModel(tc)
        self.lm_head = None if config.tie_word_embeddings else \
            nn.Linear(tc.hidden_size, tc.vocab_size, bias=False)

    @property
    def device(self) -> torch.device:
        return self.language_model.embed_tokens.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.language_model.embed_tokens.weight.dtype

    # ---- per-sequence state -------------------------------------------------------------------
    def state_shapes(self) -> tuple[tuple[int, int], tuple[int, int, int]]:
        """(conv [conv_dim, K], recurrent [Hv, dk, dv]) of one linear-attention layer."""
        tc = self.config.text_config
        conv_dim = 2 * tc.linear_num_key_heads * tc.linear_key_head_dim \
            + tc.linear_num_value_heads * tc.linear_value_head_dim
        return ((conv_dim, tc.linear_conv_kernel_dim),
                (tc.linear_num_value_heads, tc.linear_key_head_dim, tc.linear_value_head_dim))

    def new_state(self) -> LinearState:
        """A zero state (a sequence before its first token)."""
        conv, rec = self.state_shapes()
        n = self.num_linear_layers
        return LinearState([torch.zeros(conv, dtype=self.dtype, device=self.device) for _ in range(n)],
                           [torch.zeros(rec, dtype=torch.float32, device=self.device)
                            for _ in range(n)])

    def new_context(self):
        """An empty recording, causal AttentionContext for the attention layers' K/V."""
        return LocalContext(self.num_attention_layers, self.attn_scale, record=True, causal=True)

    # ---- inputs -------------------------------------------------------------------------------
    def image_grid(self, size: int) -> tuple[int, int]:
        """(rows, cols) of merged tokens of a size x size image."""
        vc = self.config.vision_config
        cell = vc.patch_size * vc.spatial_merge_size
        if size % cell:
            raise ValueError(f"image size {size} must be a multiple of {cell}")
        return size // cell, size // cell

    def image_ids(self, size: int) -> list[int]:
        """<|vision_start|>, <|image_pad|> x rows*cols, <|vision_end|> for one image."""
        c = self.config
        rows, cols = self.image_grid(size)
        return [c.vision_start_token_id] + [c.image_token_id] * rows * cols + [c.vision_end_token_id]

    def embed_images(self, images: torch.Tensor) -> torch.Tensor:
        """[N, 3, S, S] in [-1, 1] -> merged tokens [N * rows * cols, hidden]."""
        vc = self.config.vision_config
        if images.dim() != 4 or images.shape[1] != 3 or images.shape[2] != images.shape[3]:
            raise ValueError(f"images must be [N, 3, S, S], got {tuple(images.shape)}")
        self.image_grid(images.shape[-1])
        w = self.visual.patch_embed.proj.weight
        pix = patchify(images.to(device=w.device, dtype=w.dtype), vc.patch_size,
                       vc.temporal_patch_size, vc.spatial_merge_size)
        side = images.shape[-1] // vc.patch_size
        grid = torch.tensor([[1, side, side]] * images.shape[0], device=w.device)
        return self.visual(pix, grid_thw=grid, return_dict=True).pooler_output

    def positions(self, ids: list[int], image_size: int | None = None) -> tuple[torch.Tensor, int]:
        """([3, T] rotary positions of ``ids``, rope delta: decode position = index + delta)."""
        rows, cols = self.image_grid(image_size) if image_size else (1, 1)
        pos = image_text_positions(ids, self.config.image_token_id, rows, cols)
        return pos, int(pos.max()) + 1 - len(ids)

    # ---- the model ----------------------------------------------------------------------------
    def prefill(self, ids: list[int], images: torch.Tensor | None, ctx, state: LinearState,
                chunk: int = 64) -> tuple[torch.Tensor, int]:
        """``ids`` (with one image_ids block per image) and ``images`` through the backbone,
        chunked; K/V into ``ctx``, the linear layers' state into ``state``. Returns (final-normed
        hidden [T, W], rope delta)."""
        ids_t = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        hidden = self.language_model.embed_tokens(ids_t)
        mask = ids_t == self.config.image_token_id
        size = None
        if images is not None and images.shape[0]:
            feats = self.embed_images(images)
            if int(mask.sum()) != feats.shape[0]:
                raise ValueError(f"{int(mask.sum())} image tokens in ids, {feats.shape[0]} from "
                                 f"{images.shape[0]} image(s)")
            hidden = hidden.masked_scatter(mask[:, None], feats.to(hidden.dtype))
            size = images.shape[-1]
        elif bool(mask.any()):
            raise ValueError("ids hold image tokens but no images were given")
        positions, delta = self.positions(list(ids), size)
        return self.forward_tokens(hidden, positions.to(self.device), ctx, state, chunk=chunk), delta

    def decode(self, token: int, position: int, ctx, state: LinearState) -> torch.Tensor:
        """One token at rotary ``position`` (index + rope delta), recurrent form: logits [V]."""
        hidden = self.language_model.embed_tokens(torch.tensor([token], device=self.device))
        pos = torch.tensor([position], device=self.device)
        return self.lm_logits(self.forward_tokens(hidden, pos, ctx, state, recurrent=True))[0]

    def forward_tokens(self, hidden: torch.Tensor, positions: torch.Tensor, ctx,
                       state, recurrent: bool = False, chunk: int = 64,
                       keep: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
        """Packed tokens [T, W] at rotary positions [T] (all axes equal) or [3, T], continuing
        the sequence whose K/V ``ctx`` holds and whose linear state ``state`` holds (both
        updated). ``recurrent``: the gated delta rule token by token, else in chunks.
        ``state``: a LinearState (one sequence), or an object whose ``run(module, layer, x)``
        runs linear layer ``layer`` (index among the linear layers) over packed rows of many
        sequences (the engine's state pool: engine/runner/state_pool.py). ``keep``: layer i -> a
        buffer whose first T rows get layer i's output (the last layer's after the final norm),
        as transformers' ``output_hidden_states[i + 1]``."""
        t = hidden.shape[0]
        if positions.dim() == 1:
            positions = positions[None].expand(3, -1)
        if positions.shape != (3, t):
            raise ValueError(f"positions must be [T] or [3, T] with T={t}, got {tuple(positions.shape)}")
        one = isinstance(state, LinearState)
        if one and (len(state.conv) != self.num_linear_layers
                    or len(state.recurrent) != self.num_linear_layers):
            raise ValueError(f"state must hold {self.num_linear_layers} linear layers")
        cos, sin = mrope_cos_sin(positions, self.rotary_dims, self.rope_theta, self.mrope_section)
        keep = keep or {}
        last = len(self.layer_types) - 1
        h = hidden
        for i, (layer, kind, slot) in enumerate(zip(self.language_model.layers, self.layer_types,
                                                    self.slot)):
            x = layer.input_layernorm(h)
            if kind == "linear_attention" and one:
                x = layer.linear_attn(x, state.conv[slot], state.recurrent[slot], recurrent, chunk)
            elif kind == "linear_attention":
                x = state.run(layer.linear_attn, slot, x)
            else:
                x = layer.self_attn(x, cos, sin, ctx, slot)
            h = h + x
            h = h + layer.mlp(layer.post_attention_layernorm(h))
            if i in keep and i != last:
                keep[i][:t].copy_(h)
        out = self.language_model.norm(h)
        if last in keep:
            keep[last][:t].copy_(out)
        return out

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        w = self.language_model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return hidden.to(w.dtype) @ w.t()


def load_qwen35_folder(folder: str | Path, dtype: torch.dtype = torch.float32):
    """(transformers' Qwen3_5Config, Qwen35Model) from a save_pretrained folder; ValueError with
    the missing / unexpected / mis-shaped tensors when the weights do not fit the config (the
    multi-token-prediction head ``mtp.*`` is skipped, as transformers does)."""

    folder = Path(folder)
    config = Qwen3_5Config.from_pretrained(folder)
    if config.model_type != "qwen3_5":
        raise ValueError(f"{folder}: not a Qwen3.5 config (model_type {config.model_type!r})")
    model = Qwen35Model(config)
    files = sorted(folder.glob("model*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder}: no model*.safetensors")
    ours = {}
    for f in files:
        for key, value in load_file(str(f)).items():
            mapped = backbone_key(key)
            if mapped is not None and not (mapped.startswith("lm_head.") and model.lm_head is None):
                ours[mapped] = value
    load_weights(model, ours, folder)
    return config, model.to(dtype).eval().requires_grad_(False)


def load_weights(model: nn.Module, weights: dict[str, torch.Tensor], folder: Path) -> None:
    """``weights`` into ``model``, every tensor and no other: ValueError naming the missing,
    unexpected or mis-shaped ones (the folder's weights do not fit its config)."""
    try:
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except RuntimeError as err:
        raise ValueError(f"{folder}: weights do not fit its Qwen3.5 config: {err}") from None
    if missing or unexpected:
        raise ValueError(f"{folder}: weights do not fit its Qwen3.5 config: missing "
                         f"{sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}")
