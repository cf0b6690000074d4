import math

import pytest
import torch

from oxygen_ros.engine.model import (AdaRMSNorm, GemmaMLP, RMSNorm, apply_rope, rope_cos_sin,
                                     sinusoidal_time_embedding)


def test_rmsnorm_hand_computed():
    norm = RMSNorm(2, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([0.5, -1.0]))
    x = torch.tensor([[3.0, 4.0]])
    out, gate = norm(x)
    r = 1.0 / math.sqrt((9 + 16) / 2 + 1e-6)
    assert gate is None
    torch.testing.assert_close(out, torch.tensor([[3 * r * 1.5, 4 * r * 0.0]]))


def test_rmsnorm_bf16_computed_in_float32_then_cast():
    norm = RMSNorm(4)
    with torch.no_grad():
        norm.weight.normal_(0, 0.3)
    x = (torch.randn(5, 4, generator=torch.Generator().manual_seed(2)) * 3).to(torch.bfloat16)
    out, _ = norm.to(torch.bfloat16)(x)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * (1 + norm.weight.float())
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, ref.to(torch.bfloat16))


def test_adarms_order_is_scale_shift_gate():
    norm = AdaRMSNorm(2, 1, eps=1e-6)
    with torch.no_grad():
        norm.dense.weight.zero_()
        # dense output = bias: scale = (1, 2), shift = (10, 20), gate = (-3, 4)
        norm.dense.bias.copy_(torch.tensor([1.0, 2.0, 10.0, 20.0, -3.0, 4.0]))
    x = torch.tensor([[3.0, 4.0]])
    out, gate = norm(x, torch.zeros(1, 1))
    r = 1.0 / math.sqrt(12.5 + 1e-6)
    torch.testing.assert_close(out, torch.tensor([[3 * r * 2 + 10, 4 * r * 3 + 20]]))
    torch.testing.assert_close(gate, torch.tensor([[-3.0, 4.0]]))
    with pytest.raises(ValueError):
        norm(x, None)


def test_gemma_mlp():
    mlp = GemmaMLP(3, 5)
    x = torch.randn(4, 3)
    ref = mlp.down_proj(torch.nn.functional.gelu(mlp.gate_proj(x), approximate="tanh") * mlp.up_proj(x))
    torch.testing.assert_close(mlp(x), ref)
    # tanh approximation, not erf
    y = torch.tensor([1.0])
    assert abs(torch.nn.functional.gelu(y, approximate="tanh") - torch.nn.functional.gelu(y)) > 1e-5


def _rope_complex(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    d = x.shape[-1]
    xd = x.double()
    z = torch.complex(xd[..., : d // 2], xd[..., d // 2:])
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones(len(pos), d // 2, dtype=torch.float64), pos.double()[:, None] * freqs)
    zr = z * rot[:, None, :]
    return torch.cat((zr.real, zr.imag), dim=-1)


def test_rope_split_halves_matches_complex_rotation():
    x = torch.randn(7, 3, 16, generator=torch.Generator().manual_seed(0))
    pos = torch.tensor([0, 1, 2, 5, 17, 300, 1000])
    cos, sin = rope_cos_sin(pos, 16, 10000.0)
    out = apply_rope(x, cos, sin)
    # float32 angles at position 1000 carry ~1e-4 rad of rounding; a wrong layout is off by O(1)
    torch.testing.assert_close(out.double(), _rope_complex(x, pos, 10000.0), atol=5e-4, rtol=1e-4)
    torch.testing.assert_close(out[:4].double(), _rope_complex(x[:4], pos[:4], 10000.0), atol=1e-5, rtol=1e-5)
    assert torch.equal(out[0], x[0])  # position 0 is the identity


def test_rope_scores_depend_only_on_relative_position():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 1, 32, generator=g), torch.randn(1, 1, 32, generator=g)

    def score(pq, pk):
        cq, sq = rope_cos_sin(torch.tensor([pq]), 32, 10000.0)
        ck, sk = rope_cos_sin(torch.tensor([pk]), 32, 10000.0)
        return (apply_rope(q, cq, sq) * apply_rope(k, ck, sk)).sum()

    a, b, c = score(10, 3), score(57, 50), score(10, 4)
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert abs(a - c) > 1e-3


def test_time_embedding_formula_with_float32_cast():
    w = 64
    t = 0.123456789012345  # not representable in float32: the cast must happen first
    emb = sinusoidal_time_embedding(t, w)
    t32 = float(torch.tensor(t, dtype=torch.float32))
    frac = [i / (w // 2 - 1) for i in range(w // 2)]
    period = [4e-3 * 1000.0 ** f for f in frac]
    ref = [math.sin(2 * math.pi * t32 / p) for p in period] + [math.cos(2 * math.pi * t32 / p) for p in period]
    assert emb.dtype == torch.float32 and emb.shape == (w,)
    torch.testing.assert_close(emb, torch.tensor(ref, dtype=torch.float32), atol=1e-6, rtol=0)
    # using t in float64 instead differs measurably at the highest frequency (~1571 rad / unit t)
    ref64 = math.sin(2 * math.pi * t / period[0])
    assert abs(ref64 - ref[0]) > 1e-6
    batched = sinusoidal_time_embedding(torch.tensor([t, 1.0]), w)
    assert batched.shape == (2, w)
    torch.testing.assert_close(batched[0], emb)
    with pytest.raises(ValueError):
        sinusoidal_time_embedding(0.5, 7)
