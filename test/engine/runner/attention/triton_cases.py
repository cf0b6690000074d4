"""The Triton paged attention kernel against the gathering reference and the C++ op: every shape
the engine produces, on small sizes. Run by test_triton_interpreted.py in a process of its own
under Triton's CPU interpreter (TRITON_INTERPRET=1 must be set before triton is imported and
while kernels launch), or on a GPU with OXYGEN_TRITON_DEVICE=cuda (benchmarks/gpu.sh)."""
from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from oxygen_ros.engine.runner.attention import (load_cpp_op, paged_attention_cpp,
                                         paged_attention_reference, select_backend)
from oxygen_ros.engine.runner.attention import triton_paged

DEVICE = torch.device(os.environ.get("OXYGEN_TRITON_DEVICE", "cpu"))
if DEVICE.type == "cpu" and not triton_paged.INTERPRETED:
    pytest.skip("Triton kernels on the CPU need TRITON_INTERPRET=1 (test_triton_interpreted.py)",
                allow_module_level=True)
HAVE_CPP = load_cpp_op()


def paged_attention_triton(*args, **kw):
    """The kernel on DEVICE, the result back on the CPU."""
    moved = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
    return triton_paged.paged_attention_triton(*moved, **kw).cpu()


def _pool(seed: int, nb: int, bs: int, hkv: int, d: int, dtype=torch.float32):
    """A pool of nb blocks plus the sink block (index nb), filled with NaN: nothing may read it."""
    g = torch.Generator().manual_seed(seed)
    kc = torch.randn(nb + 1, bs, hkv, d, generator=g)
    vc = torch.randn(nb + 1, bs, hkv, d, generator=g)
    kc[nb] = float("nan")
    vc[nb] = float("nan")
    return kc.to(dtype), vc.to(dtype), g


def _check(q, kc, vc, tables, rows, lens, scale=None, atol=2e-6, **kw):
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    out = paged_attention_triton(q, kc, vc, tables, rows, lens, scale, **kw)
    assert out.shape == q.shape and out.dtype == q.dtype and torch.isfinite(out).all()
    ref = paged_attention_reference(q, kc, vc, tables, rows, lens, scale)
    torch.testing.assert_close(out, ref, atol=atol, rtol=1e-5)
    if HAVE_CPP:
        torch.testing.assert_close(out, paged_attention_cpp(q, kc, vc, tables, rows, lens, scale),
                                   atol=atol, rtol=1e-5)
    return out


@pytest.mark.parametrize("hq,hkv,d,bs", [(8, 1, 16, 4), (8, 1, 64, 16), (8, 1, 256, 8),
                                         (4, 2, 64, 32), (4, 2, 16, 8),
                                         # Qwen3-VL / Xiaomi-Robotics-0: head dim 128, 8 KV heads
                                         (16, 8, 128, 16), (32, 8, 128, 16)])
def test_decode_batch_ragged_lengths(hq, hkv, d, bs):
    """One query per request, each on its own row and length (block tables padded with 0)."""
    nb, r = 24, 4
    kc, vc, g = _pool(1, nb, bs, hkv, d)
    perm = torch.randperm(nb, generator=g)
    tables = torch.zeros(r, 5, dtype=torch.int32)
    used = [5, 2, 3, 1]
    start = 0
    for i, n in enumerate(used):
        tables[i, :n] = perm[start:start + n]
        start += n
    lens = torch.tensor([5 * bs, bs + 1, 3 * bs - 1, 1], dtype=torch.int32)
    q = torch.randn(r, hq, d, generator=g)
    _check(q, kc, vc, tables, torch.arange(r, dtype=torch.int32), lens)


@pytest.mark.parametrize("bs", [4, 8, 16, 32])
def test_causal_suffix_after_long_prefix(bs):
    """Prompt-suffix prefill: query i sees prefix + i + 1 positions of one row (~200 keys)."""
    prefix, n = 190, 6
    nb = -(-(prefix + n) // bs)
    kc, vc, g = _pool(2, nb + 3, bs, 1, 32)
    tables = torch.randperm(nb + 3, generator=g)[:nb].int()[None]
    q = torch.randn(n, 8, 32, generator=g)
    lens = torch.tensor([prefix + i + 1 for i in range(n)], dtype=torch.int32)
    _check(q, kc, vc, tables, torch.zeros(n, dtype=torch.int32), lens)


def test_action_tokens_share_one_row_bidirectionally():
    """Denoise: every action token sees the prefix and all action tokens (same q_len)."""
    prefix, h, bs = 70, 10, 16
    nb = -(-(prefix + h) // bs)
    kc, vc, g = _pool(3, nb, bs, 1, 64)
    tables = torch.arange(nb, dtype=torch.int32)[None]
    q = torch.randn(h, 8, 64, generator=g).transpose(0, 1).contiguous().transpose(0, 1)  # strided q
    _check(q, kc, vc, tables, torch.zeros(h, dtype=torch.int32),
           torch.full((h,), prefix + h, dtype=torch.int32))


def test_shared_prefix_blocks_and_copy_on_write():
    """Two sequences share two full prefix blocks; the partial third was copied on write and then
    diverged. Queries that see only the shared part agree exactly; later ones differ."""
    bs, hkv, d = 8, 2, 16
    kc, vc, g = _pool(4, 10, bs, hkv, d)
    kc[5, :3], vc[5, :3] = kc[2, :3], vc[2, :3]  # CoW of 3 filled slots of block 2 into block 5
    tables = torch.tensor([[0, 1, 2], [0, 1, 5]], dtype=torch.int32)
    q = torch.randn(1, 4, d, generator=g).expand(4, 4, d).contiguous()
    rows = torch.tensor([0, 1, 0, 1], dtype=torch.int32)
    lens = torch.tensor([2 * bs + 3, 2 * bs + 3, 3 * bs, 3 * bs], dtype=torch.int32)
    out = _check(q, kc, vc, tables, rows, lens)
    torch.testing.assert_close(out[0], out[1], atol=0, rtol=0)
    assert not torch.allclose(out[2], out[3])


def test_zero_length_gives_zeros_like_the_cpp_op():
    kc, vc, g = _pool(5, 4, 4, 1, 16)
    q = torch.randn(2, 8, 16, generator=g)
    tables = torch.tensor([[0, 1]], dtype=torch.int32)
    rows = torch.zeros(2, dtype=torch.int32)
    out = paged_attention_triton(q, kc, vc, tables, rows, torch.tensor([0, 3], dtype=torch.int32), 0.25)
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    if HAVE_CPP:
        torch.testing.assert_close(out, paged_attention_cpp(q, kc, vc, tables, rows,
                                                            torch.tensor([0, 3], dtype=torch.int32), 0.25))


def test_sink_and_stale_slots_are_never_read():
    """Slots past q_len in a partly filled block hold garbage (NaN), as does the sink: the result
    stays finite and equal to the C++ op, which also reads only [0, q_len)."""
    bs = 8
    kc, vc, g = _pool(6, 6, bs, 1, 16)
    kc[3, 5:], vc[3, 5:] = float("nan"), float("nan")
    tables = torch.tensor([[1, 3, 6]], dtype=torch.int32)  # 6 = the sink block, never reached
    q = torch.randn(3, 8, 16, generator=g)
    lens = torch.tensor([bs + 5, bs + 1, 4], dtype=torch.int32)
    out = paged_attention_triton(q, kc, vc, tables, torch.zeros(3, dtype=torch.int32), lens, 0.25)
    assert torch.isfinite(out).all()
    if HAVE_CPP:
        torch.testing.assert_close(out, paged_attention_cpp(q, kc, vc, tables, torch.zeros(3, dtype=torch.int32),
                                                            lens, 0.25), atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("splits", [2, 3, 7])
def test_split_kv_equals_single_pass(splits):
    bs, nb = 16, 14
    kc, vc, g = _pool(7, nb, bs, 1, 64)
    tables = torch.stack([torch.randperm(nb, generator=g)[:7] for _ in range(2)]).int()
    q = torch.randn(3, 8, 64, generator=g)
    rows = torch.tensor([0, 1, 1], dtype=torch.int32)
    lens = torch.tensor([7 * bs, 40, 1], dtype=torch.int32)  # the short ones leave splits empty
    one = paged_attention_triton(q, kc, vc, tables, rows, lens, 0.125, num_splits=1, block_n=16)
    many = _check(q, kc, vc, tables, rows, lens, scale=0.125, num_splits=splits, block_n=16)
    torch.testing.assert_close(many, one, atol=1e-6, rtol=1e-6)


def test_bfloat16_inputs_close_to_float32():
    kc, vc, g = _pool(8, 8, 8, 1, 32)
    tables = torch.arange(8, dtype=torch.int32)[None]
    q = torch.randn(4, 8, 32, generator=g)
    rows, lens = torch.zeros(4, dtype=torch.int32), torch.tensor([64, 30, 9, 1], dtype=torch.int32)
    ref = paged_attention_reference(q, kc, vc, tables, rows, lens, 32 ** -0.5)
    bf = [x.bfloat16() for x in (q, kc, vc)]
    out = paged_attention_triton(bf[0], bf[1], bf[2], tables, rows, lens, 32 ** -0.5, num_splits=2)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), bs=st.sampled_from([4, 8, 16, 32]),
       heads=st.sampled_from([(8, 1), (4, 2), (2, 2)]), t=st.integers(1, 5),
       splits=st.integers(1, 3))
def test_property_matches_reference(seed, bs, heads, t, splits):
    hq, hkv = heads
    nb = 12
    kc, vc, g = _pool(seed, nb, bs, hkv, 16)
    tables = torch.stack([torch.randperm(nb, generator=g)[:4] for _ in range(3)]).int()
    q = torch.randn(t, hq, 16, generator=g)
    rows = torch.randint(0, 3, (t,), generator=g, dtype=torch.int32)
    lens = torch.randint(1, 4 * bs + 1, (t,), generator=g, dtype=torch.int32)
    _check(q, kc, vc, tables, rows, lens, num_splits=splits)


def test_rejects_bad_inputs():
    kc, vc, g = _pool(9, 4, 4, 1, 16)
    q = torch.randn(1, 8, 16, generator=g)
    tables = torch.tensor([[0]], dtype=torch.int32)
    one = torch.ones(1, dtype=torch.int32)
    with pytest.raises(ValueError, match="int32"):
        paged_attention_triton(q, kc, vc, tables.long(), one - 1, one, 0.25)
    with pytest.raises(ValueError, match="share a dtype"):
        paged_attention_triton(q.double(), kc, vc, tables, one - 1, one, 0.25)
    with pytest.raises(ValueError, match="multiple"):
        paged_attention_triton(torch.randn(1, 3, 16), kc.expand(5, 4, 2, 16).contiguous(),
                               vc.expand(5, 4, 2, 16).contiguous(), tables, one - 1, one, 0.25)


def test_backend_selection():
    assert select_backend("triton", DEVICE) == "triton"  # interpreter mode on the CPU
    assert select_backend("auto", "cpu") in ("cpp", "reference")  # the C++ op stays CPU default
    if DEVICE.type == "cuda":
        assert select_backend("auto", DEVICE) == "triton"
