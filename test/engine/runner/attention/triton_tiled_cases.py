"""The query-tiled Triton kernel (several queries of one sequence per program, all query heads of
their KV head) against the gathering reference and the per-query kernel: ragged sequence lengths,
causal suffixes, GQA groups 1-8, head dim 128 with 8 KV heads (the Qwen3-VL family) and 256 with
one (pi0.5). Run by test_triton_interpreted.py under TRITON_INTERPRET=1 in a process of its own,
or on a GPU with OXYGEN_TRITON_DEVICE=cuda."""
from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from oxygen_ros.engine.runner.attention import paged_attention_reference
from oxygen_ros.engine.runner.attention import triton_paged

DEVICE = torch.device(os.environ.get("OXYGEN_TRITON_DEVICE", "cpu"))
if DEVICE.type == "cpu" and not triton_paged.INTERPRETED:
    pytest.skip("Triton kernels on the CPU need TRITON_INTERPRET=1 (test_triton_interpreted.py)",
                allow_module_level=True)


def _run(*args, **kw):
    moved = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
    kw = {k: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    return triton_paged.paged_attention_triton(*moved, **kw).cpu()


def _sequences(seed: int, lengths: list[int], prefixes: list[int], hq: int, hkv: int, d: int,
               bs: int, causal: bool, dtype=torch.float32):
    """One block-table row per sequence (scattered blocks; one NaN block no table reaches): the
    queries of sequence s are consecutive, q_len = prefix + i + 1 (causal) or prefix + n."""
    g = torch.Generator().manual_seed(seed)
    width = max(-(-(p + n) // bs) for p, n in zip(prefixes, lengths))
    nb = len(lengths) * width
    kc = torch.randn(nb + 1, bs, hkv, d, generator=g)
    vc = torch.randn(nb + 1, bs, hkv, d, generator=g)
    kc[nb], vc[nb] = float("nan"), float("nan")
    tables = torch.randperm(nb, generator=g).view(len(lengths), width).int()
    rows, lens, starts = [], [], [0]
    for s, (n, p) in enumerate(zip(lengths, prefixes)):
        rows += [s] * n
        lens += [p + i + 1 for i in range(n)] if causal else [p + n] * n
        starts.append(starts[-1] + n)
    q = torch.randn(len(rows), hq, d, generator=g)
    i32 = lambda v: torch.tensor(v, dtype=torch.int32)  # noqa: E731
    return (q.to(dtype), kc.to(dtype), vc.to(dtype), tables, i32(rows), i32(lens)), i32(starts)


def _check(args, starts, atol=2e-6, per_query=True, **kw):
    scale = args[0].shape[-1] ** -0.5
    out = _run(*args, scale, seq_start=starts, **kw)
    assert out.shape == args[0].shape and torch.isfinite(out).all()
    ref = paged_attention_reference(*args, scale)
    torch.testing.assert_close(out, ref, atol=atol, rtol=1e-5)
    if per_query:  # the decode kernel, one program per query
        torch.testing.assert_close(out, _run(*args, scale), atol=atol, rtol=1e-5)
    return out


@pytest.mark.parametrize("hq,hkv,d,bs", [(8, 1, 256, 16), (32, 8, 128, 16), (16, 8, 128, 8),
                                         (4, 1, 32, 4), (3, 1, 16, 8)])
def test_denoise_queries_of_one_row(hq, hkv, d, bs):
    """A denoise step: 10 action queries that all see prefix + horizon (one block-table row);
    BLOCK_M 4 leaves a ragged last tile of 2."""
    args, starts = _sequences(1, [10], [37], hq, hkv, d, bs, causal=False)
    _check(args, starts, block_m=4)


@pytest.mark.parametrize("block_m", [1, 2, 4, 16])
def test_packed_suffixes_ragged_and_causal(block_m):
    """Prompt suffixes of four requests packed into one call, lengths 1..9 (one shorter than a
    tile, one spanning three), each query causal over its own prefix; GQA group 4."""
    args, starts = _sequences(2, [5, 1, 9, 3], [20, 3, 41, 16], 8, 2, 64, 8, causal=True)
    _check(args, starts, block_m=block_m)


def test_empty_sequences_and_zero_lengths():
    """A sequence with no query in between two with some; a query with q_len 0 gets zeros."""
    args, starts = _sequences(3, [3, 0, 4], [9, 5, 12], 4, 2, 32, 4, causal=True)
    q, kc, vc, tables, rows, lens = args
    lens = lens.clone()
    lens[4] = 0
    out = _check((q, kc, vc, tables, rows, lens), starts, block_m=2)
    assert torch.equal(out[4], torch.zeros_like(out[4]))


def test_default_tiles_for_the_families():
    """The tile the launch chooses (tiled_launch) for pi0.5 (8:1, 256; 50 action queries) and
    Xiaomi-Robotics-0 (32:8, 128; 30), against the reference."""
    for hq, hkv, d, h in ((8, 1, 256, 50), (32, 8, 128, 30)):
        args, starts = _sequences(4, [h], [23], hq, hkv, d, 16, causal=False)
        _check(args, starts, per_query=False)


def test_bfloat16_close_to_float32():
    args, starts = _sequences(5, [6, 7], [30, 2], 8, 2, 64, 16, causal=True)
    ref = paged_attention_reference(*args, 0.125)
    bf = [a.bfloat16() if a.is_floating_point() else a for a in args]
    out = _run(*bf, 0.125, seq_start=starts)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**16), lengths=st.lists(st.integers(0, 7), min_size=1, max_size=4),
       heads=st.sampled_from([(8, 1), (4, 2), (2, 2), (6, 2)]), bs=st.sampled_from([4, 16]),
       causal=st.booleans(), block_m=st.sampled_from([1, 2, 8]))
def test_property_matches_reference(seed, lengths, heads, bs, causal, block_m):
    if sum(lengths) == 0:
        lengths = lengths + [1]
    prefixes = [(seed >> i) % 30 for i in range(len(lengths))]
    args, starts = _sequences(seed, lengths, prefixes, heads[0], heads[1], 16, bs, causal)
    _check(args, starts, block_m=block_m)


def test_rejects_a_bad_seq_start():
    args, _ = _sequences(6, [2], [4], 4, 1, 16, 4, causal=True)
    with pytest.raises(ValueError, match="seq_start"):
        _run(*args, 0.25, seq_start=torch.tensor([0, 2], dtype=torch.int64))
