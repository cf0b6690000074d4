"""Building blocks of the pi0.5-class MoT (Gemma conventions; docs/pi05-conventions.md).

All normalisation is computed in float32 and cast back to the input dtype.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def _rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    """Gemma RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), in float32, cast back to x.dtype."""

    def __init__(self, width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None,
                mod: torch.Tensor | None = None):
        out = _rms(x, self.eps) * (1.0 + self.weight.float())
        return out.to(x.dtype), None


class AdaRMSNorm(nn.Module):
    """pi0.5 adaptive RMSNorm: dense(cond) -> (scale, shift, gate) in that order.

    normed = rms(x) * (1 + scale) + shift; returns (normed, gate). The caller uses the gate for its
    residual (x + f(normed) * gate). No learned weight besides ``dense`` (checkpoint key ``*.dense``).
    """

    def __init__(self, width: int, cond_width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.dense = nn.Linear(cond_width, 3 * width, bias=True)

    def modulation(self, cond: torch.Tensor) -> torch.Tensor:
        """dense(cond) = (scale, shift, gate) concatenated: depends on the time step only, so a
        fixed Euler schedule can compute it once (MoTModel.adarms_modulations)."""
        return self.dense(cond.to(self.dense.weight.dtype))

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None,
                mod: torch.Tensor | None = None):
        if mod is None:
            if cond is None:
                raise ValueError("AdaRMSNorm needs adarms_cond (the action expert's time conditioning)")
            mod = self.modulation(cond)
        scale, shift, gate = mod.chunk(3, dim=-1)
        out = _rms(x, self.eps) * (1.0 + scale.float()) + shift.float()
        return out.to(x.dtype), gate.to(x.dtype)


class GemmaMLP(nn.Module):
    """down(gelu_tanh(gate(x)) * up(x)), no biases."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(width, hidden, bias=False)
        self.up_proj = nn.Linear(width, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables [T, head_dim/2] in float32 for integer positions [T]."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device,
                                             dtype=torch.float32) / head_dim))
    angles = positions.to(torch.float32)[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Split-halves rotation of x [T, H, D]: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin).

    As in transformers' Gemma, the tables are cast to x.dtype and the rotation runs in x.dtype.
    """
    half = x.shape[-1] // 2
    cos = cos.to(x.dtype)[:, None, :]
    sin = sin.to(x.dtype)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def sinusoidal_time_embedding(t: float | torch.Tensor, width: int, min_period: float = 4e-3,
                              max_period: float = 4.0, device: torch.device | str | None = None
                              ) -> torch.Tensor:
    """[sin, cos](2 pi t / period), period = min_period * (max/min) ** linspace(0, 1, width/2).

    t is cast to float32 first (pi0.5 convention); periods and products are float64, the result
    float32. Scalar t -> [width]; t of shape [B] -> [B, width].
    """
    if width % 2:
        raise ValueError(f"time embedding width must be even, got {width}")
    tt = torch.as_tensor(t, dtype=torch.float32, device=device)
    scalar = tt.dim() == 0
    tt = tt.reshape(-1)
    fraction = torch.linspace(0.0, 1.0, width // 2, dtype=torch.float64, device=tt.device)
    period = min_period * (max_period / min_period) ** fraction
    arg = (2.0 * math.pi / period)[None, :] * tt.to(torch.float64)[:, None]
    emb = torch.cat((arg.sin(), arg.cos()), dim=-1).to(torch.float32)
    return emb[0] if scalar else emb
