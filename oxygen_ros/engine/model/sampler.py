"""A contiguous reference AttentionContext and the pi0.5 Euler flow sampler.

LocalContext is for tests and reference runs (the paged contexts: engine/runner/paging.py). Masking
follows pi0.5: additive mask -2.3819763e38, softmax in float32 (q/k/v are upcast to float32 here),
K/V heads are grouped with SDPA's enable_gqa (never repeated).
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

MASK_VALUE = -2.3819763e38


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
                     scale: float) -> torch.Tensor:
    """q [T,Hq,D], k/v [S,Hkv,D], allowed bool [T,S] -> [T,Hq,D] (float32 math, q.dtype out)."""
    bias = torch.zeros(allowed.shape, dtype=torch.float32, device=q.device)
    bias.masked_fill_(~allowed, MASK_VALUE)
    out = F.scaled_dot_product_attention(
        q.float().transpose(0, 1)[None], k.float().transpose(0, 1)[None],
        v.float().transpose(0, 1)[None], attn_mask=bias, scale=scale, enable_gqa=True)
    return out[0].transpose(0, 1).to(q.dtype)


class LocalContext:
    """Per-layer contiguous K/V of an already-computed prefix plus attention over [prefix ; new].

    - ``record=False`` (read): new tokens see every valid prefix key and the new tokens (all of them,
      or j <= i when ``causal``); nothing is stored, so the prefix K/V never change.
    - ``record=True``: same visibility, and the new K/V are appended to the prefix of each layer
      (prefix prefill when the prefix is empty: bidirectional among the given tokens).
    ``valid`` marks prefix keys (None: all valid); ``new_valid`` marks the new tokens as keys (e.g. a
    masked camera). Invalid keys get the additive mask, so they change nothing.
    """

    def __init__(self, depth: int, scale: float, *, k: list[torch.Tensor] | None = None,
                 v: list[torch.Tensor] | None = None, valid: torch.Tensor | None = None,
                 record: bool = False, causal: bool = False,
                 new_valid: torch.Tensor | None = None) -> None:
        self.depth = depth
        self.scale = scale
        self.k: list[torch.Tensor | None] = list(k) if k is not None else [None] * depth
        self.v: list[torch.Tensor | None] = list(v) if v is not None else [None] * depth
        if len(self.k) != depth or len(self.v) != depth:
            raise ValueError(f"need K/V for {depth} layers, got {len(self.k)}/{len(self.v)}")
        n = 0 if self.k[0] is None else self.k[0].shape[0]
        if valid is None and n:
            valid = torch.ones(n, dtype=torch.bool, device=self.k[0].device)
        self.valid: list[torch.Tensor | None] = [valid] * depth
        self.record = record
        self.causal = causal
        self.new_valid = new_valid

    @classmethod
    def prefill(cls, model, new_valid: torch.Tensor | None = None) -> "LocalContext":
        """An empty recording context for ``model`` (prefix prefill)."""
        return cls(model.config.depth, model.attn_scale, record=True, new_valid=new_valid)

    def frozen(self, causal: bool = False) -> "LocalContext":
        """A read-only view of the recorded prefix (e.g. for the action expert's denoise steps)."""
        return LocalContext(self.depth, self.scale, k=self.k, v=self.v, valid=self.valid[0],
                            causal=causal)

    def appending(self, causal: bool = True) -> "LocalContext":
        """A context that appends new tokens to this prefix (language decoding / suffix prefill)."""
        return LocalContext(self.depth, self.scale, k=self.k, v=self.v, valid=self.valid[0],
                            record=True, causal=causal)

    @property
    def num_tokens(self) -> int:
        return 0 if self.k[0] is None else self.k[0].shape[0]

    @property
    def num_valid(self) -> int:
        return 0 if self.valid[0] is None else int(self.valid[0].sum())

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t = q.shape[0]
        new_valid = self.new_valid
        if new_valid is None:
            new_valid = torch.ones(t, dtype=torch.bool, device=q.device)
        new_valid = new_valid.to(q.device)
        if new_valid.shape != (t,):
            raise ValueError(f"new_valid must be [{t}], got {tuple(new_valid.shape)}")
        new_allowed = new_valid[None, :].expand(t, t)
        if self.causal:
            new_allowed = new_allowed & torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
        # an invalid query still sees itself, so its (ignored) output never becomes NaN
        new_allowed = new_allowed | torch.eye(t, dtype=torch.bool, device=q.device)
        pk, pv, pvalid = self.k[layer], self.v[layer], self.valid[layer]
        if pk is None:
            keys, values, allowed = k, v, new_allowed
        else:
            keys, values = torch.cat((pk, k.to(pk.dtype))), torch.cat((pv, v.to(pv.dtype)))
            allowed = torch.cat((pvalid[None, :].expand(t, -1), new_allowed), dim=1)
        out = masked_attention(q, keys, values, allowed, self.scale)
        if self.record:
            self.k[layer], self.v[layer] = keys, values
            self.valid[layer] = new_valid if pvalid is None else torch.cat((pvalid, new_valid))
        return out


Velocity = Callable[[torch.Tensor, float], torch.Tensor]


def euler_sample(velocity: Velocity, noise: torch.Tensor, num_steps: int) -> torch.Tensor:
    """pi0.5 flow sampling: x(1) = noise, dt = -1/S, t_k = 1 + k*dt, x <- x + dt * v(x, t_k)."""
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    dt = -1.0 / num_steps
    x = noise
    for k in range(num_steps):
        x = x + dt * velocity(x, 1.0 + k * dt)
    return x


def model_velocity(model, expert: int, ctx_factory: Callable[[], object],
                   positions: torch.Tensor) -> Velocity:
    """v(x, t) for one action chunk x [H, action_dim] with action positions [H] (which continue
    from the number of VALID prefix tokens); ``ctx_factory()`` gives a context that reads the
    prefix and lets the action tokens see each other (e.g. ``prefix_ctx.frozen``)."""

    def v(x: torch.Tensor, t: float) -> torch.Tensor:
        h = model.action_in(expert, x)
        cond = model.time_cond(expert, t).expand(h.shape[0], -1)
        out = model.forward_tokens(expert, h, positions, ctx_factory(), cond)
        return model.action_out(expert, out).to(x.dtype)

    return v


def sample_actions(model, expert: int, ctx_factory: Callable[[], object], noise: torch.Tensor,
                   num_steps: int, positions: torch.Tensor) -> torch.Tensor:
    """euler_sample with the model's velocity: ``noise`` [H, action_dim] -> actions (normalised)."""
    return euler_sample(model_velocity(model, expert, ctx_factory, positions), noise, num_steps)
