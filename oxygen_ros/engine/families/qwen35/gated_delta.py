"""The gated delta rule (Gated DeltaNet's token mixer) in two equal forms, for one sequence.

Per value head a state S [dk, dv] is carried along the tokens. Token t (log-decay g_t <= 0,
rate beta_t in (0, 1), unit-norm key k_t, query q_t, value v_t):

    S <- exp(g_t) S                     (gated decay)
    delta_t = beta_t (v_t - S^T k_t)    (what the state mispredicts for this key)
    S <- S + k_t delta_t^T              (the delta-rule write)
    o_t = S^T q_t

``recurrent`` runs exactly that, token by token (one-token decode). ``chunked`` computes the same
for a run of tokens in chunks (prefill): inside a chunk of C tokens starting from S0, with
G_t = g_1 + ... + g_t and gamma_t = exp(G_t), the writes solve the unit lower-triangular system

    (I + A) Delta = beta V - (beta gamma) K S0,   A[t, s] = beta_t exp(G_t - G_s) k_t.k_s  (s < t)

then O = gamma Q S0 + (exp(G_t - G_s) [s <= t] * Q K^T) Delta and
S_C = gamma_C S0 + (exp(G_C - G) K)^T Delta: a few matrix products per chunk instead of C steps.

Both are functional (the state passed in is not modified; the new one is returned) and compute in
float32 whatever the inputs' dtype, so a caller owning the state decides where it is written.
Shapes: q, k [T, H, dk] (already L2-normalised and scaled), v [T, H, dv], g and beta [T, H],
state [H, dk, dv].
"""
from __future__ import annotations

import torch


def recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
              beta: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Token by token: (outputs [T, H, dv] float32, final state [H, dk, dv] float32)."""
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    s = state.float()
    out = []
    for t in range(q.shape[0]):
        s = s * g[t].exp()[:, None, None]
        predicted = torch.einsum("hkv,hk->hv", s, k[t])
        delta = beta[t][:, None] * (v[t] - predicted)
        s = s + k[t][:, :, None] * delta[:, None, :]
        out.append(torch.einsum("hkv,hk->hv", s, q[t]))
    return torch.stack(out), s


def chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
            beta: torch.Tensor, state: torch.Tensor, chunk: int = 64
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunks of ``chunk`` tokens (the last may be shorter; nothing is padded): the same
    (outputs [T, H, dv] float32, final state [H, dk, dv] float32) as ``recurrent``."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    # heads first: [H, T, d] and [H, T]
    q, k, v = (x.float().transpose(0, 1) for x in (q, k, v))
    g, beta = g.float().t(), beta.float().t()
    s = state.float()
    outs = []
    for start in range(0, q.shape[1], chunk):
        sl = slice(start, start + chunk)
        o, s = _one_chunk(q[:, sl], k[:, sl], v[:, sl], g[:, sl], beta[:, sl], s)
        outs.append(o)
    return torch.cat(outs, dim=1).transpose(0, 1), s


def _one_chunk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
               beta: torch.Tensor, s0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    c = q.shape[1]
    cum = g.cumsum(dim=1)  # G_t [H, C]
    # exp(G_t - G_s) where s <= t; the upper triangle is masked before exp (it could overflow)
    diff = cum[:, :, None] - cum[:, None, :]
    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    decay = diff.masked_fill(~causal, float("-inf")).exp()  # [H, C, C]
    strict = causal.clone()
    strict.fill_diagonal_(False)
    a = (beta[:, :, None] * (k @ k.transpose(1, 2)) * decay).masked_fill(~strict, 0.0)
    eye = torch.eye(c, dtype=q.dtype, device=q.device)
    gamma = cum.exp()  # [H, C]
    rhs = beta[:, :, None] * v - (beta * gamma)[:, :, None] * (k @ s0)
    delta = torch.linalg.solve_triangular(eye + a, rhs, upper=False, unitriangular=True)
    out = gamma[:, :, None] * (q @ s0) + ((q @ k.transpose(1, 2)) * decay) @ delta
    tail = (cum[:, -1:] - cum).exp()  # exp(G_C - G_s) [H, C]
    s1 = gamma[:, -1, None, None] * s0 + (tail[:, :, None] * k).transpose(1, 2) @ delta
    return out, s1
