import math

import pytest
import torch

from oxygen_ros.engine.model import MASK_VALUE, LocalContext, euler_sample, masked_attention


def test_euler_constant_velocity():
    x0 = torch.randn(5, 3, dtype=torch.float64)
    c = torch.randn(5, 3, dtype=torch.float64)
    seen = []

    def v(x, t):
        seen.append(t)
        return c

    out = euler_sample(v, x0, 10)
    torch.testing.assert_close(out, x0 - c)  # integral of dt over [1, 0] is -1
    assert seen == pytest.approx([1.0 - k / 10 for k in range(10)])
    assert seen[0] == 1.0 and min(seen) > 0.0


def test_euler_linear_velocity_closed_form():
    x0 = torch.randn(4, 2, dtype=torch.float64)
    for steps in (1, 3, 10):
        out = euler_sample(lambda x, t: x, x0, steps)
        torch.testing.assert_close(out, x0 * (1 - 1 / steps) ** steps)
    with pytest.raises(ValueError):
        euler_sample(lambda x, t: x, x0, 0)


def test_gqa_attention_equals_explicit_repeat():
    g = torch.Generator().manual_seed(0)
    t, s, hq, hkv, d = 5, 9, 4, 2, 8
    q, k, v = (torch.randn(n, h, d, generator=g) for n, h in ((t, hq), (s, hkv), (s, hkv)))
    allowed = torch.rand(t, s, generator=g) > 0.3
    allowed[:, 0] = True
    out = masked_attention(q, k, v, allowed, d ** -0.5)
    kr, vr = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
    scores = torch.einsum("thd,shd->hts", q.double(), kr.double()) * d ** -0.5
    scores = scores.masked_fill(~allowed[None], -math.inf)
    ref = torch.einsum("hts,shd->thd", scores.softmax(-1), vr.double())
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


def test_mask_value_is_float32_min_like():
    assert MASK_VALUE == pytest.approx(-2.3819763e38)


def test_local_context_record_then_read_does_not_write():
    g = torch.Generator().manual_seed(0)
    ctx = LocalContext(2, 0.5, record=True)
    for layer in range(2):
        ctx.attend(layer, torch.randn(3, 2, 4, generator=g), torch.randn(3, 1, 4, generator=g),
                   torch.randn(3, 1, 4, generator=g))
    assert ctx.num_tokens == 3 and ctx.num_valid == 3
    before = [t.clone() for t in ctx.k]
    ro = ctx.frozen()
    ro.attend(0, torch.randn(2, 2, 4), torch.randn(2, 1, 4), torch.randn(2, 1, 4))
    assert ro.num_tokens == 3 and ctx.num_tokens == 3
    assert all(torch.equal(a, b) for a, b in zip(before, ctx.k))
    app = ctx.appending()
    app.attend(0, torch.randn(2, 2, 4), torch.randn(2, 1, 4), torch.randn(2, 1, 4))
    assert app.k[0].shape[0] == 5 and ctx.k[0].shape[0] == 3


def test_causal_mode_hides_later_new_tokens():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 2, 4, generator=g), torch.randn(3, 1, 4, generator=g), torch.randn(3, 1, 4, generator=g)
    a = LocalContext(1, 0.5, causal=True).attend(0, q, k, v)
    v2 = v.clone()
    v2[2] += 5.0
    b = LocalContext(1, 0.5, causal=True).attend(0, q, k, v2)
    assert torch.equal(a[:2], b[:2]) and not torch.allclose(a[2], b[2])
    c = LocalContext(1, 0.5, causal=False).attend(0, q, k, v2)
    assert not torch.allclose(a[0], c[0])
