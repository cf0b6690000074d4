"""The C++ paged attention op reads the pool in place and matches the gather reference."""
import pytest
import torch

from oxygen_ros.engine.runner.attention import (load_cpp_op, paged_attention_cpp,
                                         paged_attention_reference)

pytestmark = pytest.mark.skipif(not load_cpp_op(), reason="C++ toolchain unavailable")


def _case(seed: int, t: int, hq: int, hkv: int, d: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    nb, bs = 64, 4
    kc = torch.randn(nb, bs, hkv, d, generator=g).to(dtype)
    vc = torch.randn(nb, bs, hkv, d, generator=g).to(dtype)
    tables = torch.stack([torch.randperm(nb, generator=g)[:6] for _ in range(3)]).int()
    q = torch.randn(t, hq, d, generator=g).to(dtype)
    rows = torch.randint(0, 3, (t,), generator=g, dtype=torch.int32)
    lens = torch.randint(1, 6 * bs + 1, (t,), generator=g, dtype=torch.int32)
    return q, kc, vc, tables, rows, lens


# the last three: Qwen3-VL / Xiaomi-Robotics-0 shapes (head dim 128, 8 KV heads, GQA groups 2-4)
@pytest.mark.parametrize("hq,hkv,d", [(4, 1, 32), (8, 2, 16), (2, 2, 8),
                                      (16, 8, 128), (24, 8, 128), (32, 8, 128)])
def test_matches_reference(hq, hkv, d):
    for seed in range(3):
        args = _case(seed, 7, hq, hkv, d)
        out = paged_attention_cpp(*args, d ** -0.5)
        ref = paged_attention_reference(*args, d ** -0.5)
        torch.testing.assert_close(out, ref, atol=2e-6, rtol=1e-5)


def test_explicit_softmax_against_block_walk():
    q, kc, vc, tables, rows, lens = _case(5, 3, 4, 1, 16)
    out = paged_attention_cpp(q, kc, vc, tables, rows, lens, 0.25)
    for t in range(3):
        pos = torch.arange(int(lens[t]))
        slots = tables[rows[t]].long()[pos // 4] * 4 + pos % 4
        k = kc.view(-1, 1, 16)[slots, 0]
        v = vc.view(-1, 1, 16)[slots, 0]
        w = torch.softmax(q[t] @ k.T * 0.25, dim=-1)
        torch.testing.assert_close(out[t], w @ v, atol=2e-6, rtol=1e-5)


def test_bfloat16_close_to_float32():
    args = _case(1, 5, 4, 1, 32)
    ref = paged_attention_cpp(*args, 32 ** -0.5)
    bf = [a.to(torch.bfloat16) if a.is_floating_point() else a for a in args]
    out = paged_attention_cpp(*bf, 32 ** -0.5)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)


def test_reads_pool_in_place_no_writes():
    q, kc, vc, tables, rows, lens = _case(2, 4, 4, 1, 16)
    k0, v0 = kc.clone(), vc.clone()
    ptr = kc.data_ptr()
    paged_attention_cpp(q, kc, vc, tables, rows, lens, 0.25)
    assert kc.data_ptr() == ptr and torch.equal(kc, k0) and torch.equal(vc, v0)


def test_rejects_bad_dtypes():
    q, kc, vc, tables, rows, lens = _case(3, 2, 4, 1, 16)
    with pytest.raises(RuntimeError, match="int32"):
        paged_attention_cpp(q, kc, vc, tables.long(), rows, lens, 0.25)


@pytest.mark.parametrize("threads", [1, 2])
def test_query_tiles_of_one_row_match_reference(threads):
    """Runs of queries on one row (denoise: shared q_len; suffix: causal q_len) are tiled together
    and read each key once; tile sizes follow the thread count. Same results either way."""
    g = torch.Generator().manual_seed(11)
    nb, bs, d = 40, 8, 32
    kc, vc = torch.randn(nb, bs, 1, d, generator=g), torch.randn(nb, bs, 1, d, generator=g)
    tables = torch.stack([torch.randperm(nb, generator=g)[:8] for _ in range(3)]).int()
    rows = torch.tensor([0] * 20 + [2] * 5 + [1] + [2] * 3, dtype=torch.int32)  # runs > 16 too
    lens = torch.tensor([60] * 20 + [40 + i for i in range(5)] + [7] + [0, 1, 64], dtype=torch.int32)
    q = torch.randn(len(rows), 8, d, generator=g)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = paged_attention_cpp(q, kc, vc, tables, rows, lens, d ** -0.5)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(out[26], torch.zeros_like(out[26]))  # q_len 0 -> zeros
    keep = lens > 0
    ref = paged_attention_reference(q, kc, vc, tables, rows, lens, d ** -0.5)
    torch.testing.assert_close(out[keep], ref[keep], atol=2e-6, rtol=1e-5)
