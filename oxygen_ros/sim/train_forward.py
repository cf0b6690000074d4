"""The training forward of the pi0.5 MoT (engine/families/pi05/model.py), batched, with the losses.

The engine serves packed tokens through an AttentionContext; training uses the very same model
code (MoTModel.embed_images / embed_tokens / forward_tokens / action_in / time_cond / action_out /
lm_logits) with BatchContext, an AttentionContext over B samples of one layout packed as
[B * L] tokens. Nothing in the model changes, so a trained model means the same when served
(test/sim/test_train_forward.py checks the velocity and the language logits against the
engine's ModelRunner).

Per sample, expert 0 runs [image tokens | prompt (padded) | memory prompt + caption (padded)]:
the prefix (images and prompt) attends bidirectionally to its valid tokens; the language tokens
see the valid prefix and the language tokens before them (a memory request's suffix and greedy
decoding in the engine); positions count valid tokens only. Expert 1 runs the noisy chunk at
positions P .. P + H - 1 (P = valid prefix tokens), seeing the valid prefix keys of every layer
and the whole chunk; the prefix never sees actions or language.

Losses (pi0.5 / openpi): t ~ Beta(1.5, 1) * 0.999 + 0.001, noise ~ N(0, I),
x_t = t * noise + (1 - t) * actions, u = noise - actions, MSE(v(x_t, t), u); the engine
integrates the same v from t = 1 (noise) to t = 0 (actions). The caption: cross-entropy of the
next token over the caption and its EOS, after the memory prompt.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..engine import MASK_VALUE, MoTModel

IGNORE = -100  # cross-entropy's ignored target


class BatchContext:
    """AttentionContext for B same-layout samples packed as [B * L] tokens.

    allowed [B, L, S] (bool): which keys each query sees, S = prefix keys + L new ones.
    record=True keeps each layer's first `keep` new keys/values (after RoPE): the prefix K/V the
    action expert attends to (reading=that context)."""

    def __init__(self, batch: int, allowed: torch.Tensor, scale: float, record: bool = False,
                 keep: int = 0, prefix: "BatchContext | None" = None) -> None:
        self.batch = batch
        self.bias = torch.zeros(allowed.shape, dtype=torch.float32, device=allowed.device)
        self.bias.masked_fill_(~allowed, MASK_VALUE)
        self.bias = self.bias[:, None]  # [B, 1, L, S]: one mask for every head
        self.scale = scale
        self.record = record
        self.keep = keep
        self.prefix = prefix
        self.k: dict[int, torch.Tensor] = {}
        self.v: dict[int, torch.Tensor] = {}

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        b = self.batch
        t, hq, d = q.shape
        qb = q.view(b, t // b, hq, d).transpose(1, 2)
        kb = k.view(b, t // b, k.shape[1], d).transpose(1, 2)
        vb = v.view(b, t // b, v.shape[1], d).transpose(1, 2)
        if self.record:
            self.k[layer], self.v[layer] = kb[:, :, :self.keep], vb[:, :, :self.keep]
        if self.prefix is not None:
            kb = torch.cat((self.prefix.k[layer].to(kb.dtype), kb), dim=2)
            vb = torch.cat((self.prefix.v[layer].to(vb.dtype), vb), dim=2)
        out = F.scaled_dot_product_attention(qb.float(), kb.float(), vb.float(),
                                             attn_mask=self.bias, scale=self.scale, enable_gqa=True)
        return out.transpose(1, 2).reshape(t, hq, d).to(q.dtype)


@dataclass
class Batch:
    """One training batch (model units: images in [-1, 1], actions normalised).

    images [B, 3, S, S] (or [B, C, 3, S, S] with C cameras); prompt [B, Lp] (padded), prompt_len [B]; lang [B, Lc] = memory prompt +
    caption (padded), lang_len [B], lang_target [B, Lc] (the next token, IGNORE where none);
    actions [B, H, A]; action_mask [B] bool (None: all): the samples whose chunk is trained (a
    caption-only frame's targets are not)."""

    images: torch.Tensor
    prompt: torch.Tensor
    prompt_len: torch.Tensor
    lang: torch.Tensor
    lang_len: torch.Tensor
    lang_target: torch.Tensor
    actions: torch.Tensor
    action_mask: torch.Tensor | None = None

    @property
    def size(self) -> int:
        return self.images.shape[0]


@dataclass
class Prefix:
    """Expert 0's pass: the prefix K/V context, valid prefix lengths, language hidden states."""

    ctx: BatchContext
    prefix_len: torch.Tensor  # [B] valid prefix tokens (images + prompt)
    prefix_valid: torch.Tensor  # [B, P] (padded layout)
    lang_hidden: torch.Tensor  # [B, Lc, W_vlm], final-normed


def run_prefix(model: MoTModel, batch: Batch) -> Prefix:
    """Images + prompt + language suffix through expert 0 (see the module docstring)."""
    b, dev = batch.size, model.device
    w = model.config.vlm.width
    images = batch.images.to(dev)
    if images.dim() == 5:  # [B, C, 3, S, S]: every camera's tokens in camera order, as prefill_prefix
        img = model.embed_images(images.flatten(0, 1)).reshape(b, -1, w)
    else:
        img = model.embed_images(images)  # [B, N, W]
    n = img.shape[1]
    lp, lc = batch.prompt.shape[1], batch.lang.shape[1]
    txt = model.embed_tokens(batch.prompt.reshape(-1)).view(b, lp, w).to(img.dtype)
    lang = model.embed_tokens(batch.lang.reshape(-1)).view(b, lc, w).to(img.dtype)
    hidden = torch.cat((img, txt, lang), dim=1)
    p, length = n + lp, n + lp + lc
    ar_p, ar_c = torch.arange(lp, device=dev), torch.arange(lc, device=dev)
    prompt_valid = ar_p[None] < batch.prompt_len.to(dev)[:, None]
    lang_valid = ar_c[None] < batch.lang_len.to(dev)[:, None]
    prefix_valid = torch.cat((torch.ones(b, n, dtype=torch.bool, device=dev), prompt_valid), 1)
    prefix_len = prefix_valid.sum(1)
    positions = torch.cat((prefix_valid.long().cumsum(1) - 1, prefix_len[:, None] + ar_c[None]), 1)
    key_valid = torch.cat((prefix_valid, lang_valid), 1)  # [B, L]
    idx = torch.arange(length, device=dev)
    is_prefix_key = idx[None, :] < p  # [1, L]
    causal = idx[None, :] <= idx[:, None]  # [L, L]
    query_is_lang = idx[:, None] >= p
    sees = is_prefix_key | (query_is_lang & causal)  # [L, L]
    allowed = (sees[None] & key_valid[:, None, :]) | torch.eye(length, dtype=torch.bool, device=dev)
    ctx = BatchContext(b, allowed, model.attn_scale, record=True, keep=p)
    out = model.forward_tokens(0, hidden.reshape(b * length, w), positions.reshape(-1), ctx, None)
    return Prefix(ctx, prefix_len, prefix_valid, out.view(b, length, w)[:, p:])


def velocity(model: MoTModel, prefix: Prefix, x_t: torch.Tensor, t: torch.Tensor,
             expert: int = 1) -> torch.Tensor:
    """The action expert's v(x_t, t) [B, H, A] over each sample's prefix (t: [B])."""
    b, h, a = x_t.shape
    dev = model.device
    tokens = model.action_in(expert, x_t.reshape(b * h, a).to(dev))
    cond = model.time_cond(expert, t.to(dev)).repeat_interleave(h, dim=0)  # [B * H, W_e]
    positions = prefix.prefix_len[:, None] + torch.arange(h, device=dev)[None]
    allowed = torch.cat((prefix.prefix_valid[:, None, :].expand(b, h, -1),
                         torch.ones(b, h, h, dtype=torch.bool, device=dev)), dim=2)
    ctx = BatchContext(b, allowed, model.attn_scale, prefix=prefix.ctx)
    out = model.forward_tokens(expert, tokens, positions.reshape(-1), ctx, cond)
    return model.action_out(expert, out).float().view(b, h, a)


def sample_time(batch: int, gen: torch.Generator) -> torch.Tensor:
    """openpi's t ~ Beta(1.5, 1) * 0.999 + 0.001 (Beta(a, 1) = U ** (1 / a))."""
    u = torch.rand(batch, generator=gen)
    return u.pow(1.0 / 1.5) * 0.999 + 0.001


@dataclass
class Losses:
    total: torch.Tensor
    flow: torch.Tensor
    caption: torch.Tensor


def losses(model: MoTModel, batch: Batch, gen: torch.Generator,
           caption_weight: float = 0.25) -> Losses:
    """Flow-matching MSE on the chunk plus caption cross-entropy (weighted)."""
    prefix = run_prefix(model, batch)
    actions = batch.actions.float()
    noise = torch.randn(actions.shape, generator=gen)
    t = sample_time(batch.size, gen)
    tt = t[:, None, None]
    x_t = tt * noise + (1.0 - tt) * actions
    u = noise - actions
    v = velocity(model, prefix, x_t, t)
    if batch.action_mask is None or bool(batch.action_mask.all()):
        flow = F.mse_loss(v, u.to(v.device))
    else:  # the mean over the samples whose chunk is trained (0 when none is)
        per = ((v - u.to(v.device)) ** 2).mean(dim=(1, 2))
        mask = batch.action_mask.to(per.device, torch.float32)
        flow = (per * mask).sum() / mask.sum().clamp(min=1.0)
    logits = model.lm_logits(prefix.lang_hidden.reshape(-1, prefix.lang_hidden.shape[-1])).float()
    caption = F.cross_entropy(logits, batch.lang_target.reshape(-1).to(logits.device),
                              ignore_index=IGNORE)
    return Losses(flow + caption_weight * caption, flow, caption)


def language_logits(model: MoTModel, batch: Batch) -> torch.Tensor:
    """[B, Lc, vocab]: each language position's next-token logits (tests, evaluation)."""
    lang = run_prefix(model, batch).lang_hidden
    return model.lm_logits(lang.reshape(-1, lang.shape[-1])).float().view(*lang.shape[:2], -1)
