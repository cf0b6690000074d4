"""Real-time chunking (RTC): the next action chunk continues the one the robot is executing.

While chunk t+1 is computed the robot keeps executing chunk t. An action request may carry an
`ActionPrior`: the steps of the previous chunk that will still be executed from the request's
observation on (model units: the normalised action space the model outputs) and the delay d
(steps executed before the new chunk can take over). The denoise loop then either

- ``guided`` (inference-time RTC, arXiv 2506.07339): at every Euler step the velocity is
  corrected toward the prior with prefix weights W and a guidance weight min(beta, c(t) r(t)^-2);
  the correction is the weighted error itself (``identity``) or its vector-Jacobian product
  through the action expert (``vjp``), or
- ``inpaint`` (checkpoints trained with training-time RTC, arXiv 2512.05964): the first d steps
  are set to the prior at every step (no gradient, no guidance).

Formulas in this engine's time convention (pi0.5: t = 1 is noise, t = 0 the clean chunk,
x <- x + dt v(x, t), dt = -1/S) and the sign checks are in docs/rtc.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np
import torch

from ..config import family_registry

if TYPE_CHECKING:
    from ..config.model_config import ModelConfig


@dataclass(frozen=True)
class ActionPrior:
    """The previous chunk's steps that will still be executed from this observation on.

    actions: float [n, dims], model units, n >= 1, dims <= action_dim (the robot's joints; the
    padded action dims are not executed and are not guided). Step 0 is the step executed at the
    observation's stamp. delay: steps executed before the new chunk takes over (counted by the
    control loop), clamped by the engine to the execution horizon."""

    actions: np.ndarray
    delay: int

    def validate(self, horizon: int, action_dim: int) -> None:
        a = self.actions
        if not isinstance(a, np.ndarray) or a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
            raise ValueError(f"action prior must be a [steps, dims] array, got "
                             f"{getattr(a, 'shape', type(a).__name__)}")
        if a.shape[1] > action_dim:
            raise ValueError(f"action prior has {a.shape[1]} dims; the model has {action_dim}")
        if a.shape[0] > 4 * horizon:  # cheap bound before touching the values
            raise ValueError(f"action prior has {a.shape[0]} steps; the chunk has {horizon}")
        if not np.all(np.isfinite(a)):
            raise ValueError("action prior has non-finite values")
        if isinstance(self.delay, bool) or not isinstance(self.delay, (int, np.integer)) \
                or self.delay < 0:
            raise ValueError(f"action prior delay must be an int >= 0, got {self.delay!r}")


def rtc_unsupported_reason(config: "ModelConfig") -> str | None:
    """Why a model cannot take an action prior (None: it can): its family declares
    capabilities.rtc (the guided and inpainted loops drive a flow-matching expert on the paged
    prefix: pi0.5's)."""
    family = family_registry.rules_of(config)
    if not family.capabilities.rtc:
        having = ", ".join(f.name for f in family_registry.all_rules() if f.capabilities.rtc)
        return (f"real-time chunking (an action prior) is not a capability of the "
                f"{family.name} family (families that have it: {having or 'none'}): use "
                "chunk_blend crossfade or none")
    return None


def prefix_weights(horizon: int, delay: int, execution_horizon: int) -> np.ndarray:
    """W over the chunk's steps i: 1 for i < d, a linear ramp from 1 to 0 exclusive at both ends
    for d <= i < H, 0 for i >= H (d clamped to H, H to the horizon)."""
    h = min(max(execution_horizon, 0), horizon)
    d = min(max(delay, 0), h)
    w = np.zeros(horizon, dtype=np.float32)
    w[:d] = 1.0
    n = h - d
    if n > 0:
        w[d:h] = np.linspace(1.0, 0.0, n + 2, dtype=np.float32)[1:-1]
    return w


def guidance_weight(t: float, max_guidance: float) -> float:
    """min(beta, c * inv_r2) at denoise time t (t = 1 noise); with tau = 1 - t (the paper's
    time, 0 noise): c = (1 - tau) / tau, inv_r2 = ((1 - tau)^2 + tau^2) / (1 - tau)^2; NaN or
    inf (tau = 0 or 1) -> beta."""
    tau = 1.0 - t
    if tau <= 0.0 or tau >= 1.0:
        return float(max_guidance)
    c = (1.0 - tau) / tau
    inv_r2 = ((1.0 - tau) ** 2 + tau ** 2) / (1.0 - tau) ** 2
    g = c * inv_r2
    if not math.isfinite(g):
        return float(max_guidance)
    return float(min(max_guidance, g))


@dataclass(frozen=True)
class Guide:
    """One frame's RTC inputs as tensors on the runner's device (built by `build_guide`)."""

    method: str  # guided | inpaint
    jacobian: str  # identity | vjp
    max_guidance: float
    target: torch.Tensor  # float32 [H, A]: the prior aligned to the chunk, zero elsewhere
    weights: torch.Tensor  # float32 [H, A]: W per step x the given dims (0 elsewhere)
    keep: torch.Tensor  # bool [H, A]: inpainted entries (steps < d of the given dims)
    delay: int  # d after clamping


def build_guide(prior: ActionPrior, horizon: int, action_dim: int, method: str, jacobian: str,
                max_guidance: float, execution_horizon: int, device: torch.device) -> Guide:
    """The prior padded to [horizon, action_dim]; the execution horizon is clamped to the
    prior's length (beyond it there is nothing to continue) and 0 means the whole prior."""
    a = np.asarray(prior.actions, dtype=np.float32)[:horizon]
    n, dims = a.shape
    h = min(execution_horizon or n, n)
    d = min(int(prior.delay), h)
    target = np.zeros((horizon, action_dim), dtype=np.float32)
    target[:n, :dims] = a
    dim_mask = np.zeros(action_dim, dtype=np.float32)
    dim_mask[:dims] = 1.0
    weights = prefix_weights(horizon, d, h)[:, None] * dim_mask[None, :]
    keep = np.zeros((horizon, action_dim), dtype=bool)
    keep[:d, :dims] = True
    as_t = lambda x: torch.from_numpy(x).to(device)  # noqa: E731
    return Guide(method, jacobian, float(max_guidance), as_t(target), as_t(weights), as_t(keep), d)


Velocity = Callable[[torch.Tensor, float], torch.Tensor]


def guided_euler_sample(velocity: Velocity, noise: torch.Tensor, num_steps: int, guide: Guide,
                        grad_velocity: Velocity | None = None) -> torch.Tensor:
    """euler_sample's schedule (x(1) = noise, dt = -1/S, t_k = 1 + k dt, x <- x + dt v) with RTC.

    guided: x1 = x - t v (one-step clean estimate), err = (Y - x1) * W,
    v <- v - min(beta, c r^-2) * correction, correction = err (identity) or
    (d x1 / d x)^T err (vjp: `grad_velocity` must be differentiable in x; the prefix K/V it reads
    are constants). dt < 0, so the step moves x toward Y. inpaint: x[keep] = Y[keep] before every
    velocity evaluation and on the result."""
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    dt = -1.0 / num_steps
    y, w = guide.target, guide.weights
    x = noise
    if guide.method == "inpaint":
        for k in range(num_steps):
            x = torch.where(guide.keep, y, x)
            x = x + dt * velocity(x, 1.0 + k * dt)
        return torch.where(guide.keep, y, x)
    vjp = guide.jacobian == "vjp"
    if vjp and grad_velocity is None:
        raise ValueError("rtc jacobian vjp needs a differentiable velocity")
    for k in range(num_steps):
        t = 1.0 + k * dt
        g = guidance_weight(t, guide.max_guidance)
        if vjp:
            with torch.enable_grad():
                xg = x.detach().requires_grad_(True)
                v = grad_velocity(xg, t)
                x1 = xg - t * v
                err = (y - x1.detach()) * w
                (correction,) = torch.autograd.grad(x1, xg, grad_outputs=err)
            v = v.detach()
        else:
            v = velocity(x, t)
            correction = (y - (x - t * v)) * w
        x = x + dt * (v - g * correction)
    return x
