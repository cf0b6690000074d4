"""Paged attention as a Triton kernel: the same contract as the C++ op, reading the pool in place.

One program handles one query and one KV head: the G = Hq / Hkv query heads sharing that KV
head are packed into one [G_PAD, D] tile, so each K/V tile is loaded once for all of them
(pi0.5: 8 query heads, 1 KV head). Keys are walked in tiles of BLOCK_N logical positions; each
position's slot comes from the block table (`table[p // BS] * BS + p % BS`), so a tile may span
several small pool blocks or part of a large one. Online softmax in float32 (exp2 domain).

Split-KV (flash-decoding): with few queries (a small decode batch on a GPU with many SMs) the
key range of each query is cut into NUM_SPLITS chunks run by separate programs, each writing an
unnormalised float32 partial (acc, running max, running sum); a second kernel combines them.

`FP32_MATH` (constexpr) loads every tile as float32 and multiplies in IEEE float32: used for
float32 inputs and by Triton's CPU interpreter (TRITON_INTERPRET=1, which must be set before
this module is imported: the kernels are decorated at import). On a GPU, bf16/fp16 tiles go to
tl.dot as they are, accumulating in float32.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

try:  # triton >= 3.4 reads its settings through knobs; older ones read the variable directly
    from triton import knobs

    INTERPRETED: bool = bool(knobs.runtime.interpret)
except ImportError:
    INTERPRETED = os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on")
# (decided when the kernels below are decorated, i.e. at this module's import, as triton.jit does)
_LOG2E = 1.4426950408889634
_MASKED = -1.0e30  # finite "minus infinity" for the running max: exp2 of its differences is 0 or 1


@triton.jit
def _attend_kernel(q_ptr, k_ptr, v_ptr, tables_ptr, q_row_ptr, q_len_ptr,
                   out_ptr, m_ptr, l_ptr, qk_scale,
                   stride_qt, stride_qh, stride_ot, stride_oh, stride_os, table_width, split_len,
                   HKV: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
                   D_PAD: tl.constexpr, BS: tl.constexpr, BLOCK_N: tl.constexpr,
                   SPLIT: tl.constexpr, FP32_MATH: tl.constexpr):
    t = tl.program_id(0)
    g = tl.program_id(1)
    s = tl.program_id(2)
    row = tl.load(q_row_ptr + t).to(tl.int64)
    length = tl.load(q_len_ptr + t)
    heads = tl.arange(0, G_PAD)
    dims = tl.arange(0, D_PAD)
    hmask = heads < G
    dmask = dims < D
    q_off = t.to(tl.int64) * stride_qt + (g * G + heads)[:, None] * stride_qh + dims[None, :]
    q = tl.load(q_ptr + q_off, mask=hmask[:, None] & dmask[None, :], other=0.0)
    if FP32_MATH:
        q = q.to(tl.float32)
    lo = s * split_len
    hi = tl.minimum(length, lo + split_len)
    m_i = tl.full([G_PAD], -1.0e30, tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D_PAD], tl.float32)
    offs = tl.arange(0, BLOCK_N)
    table = tables_ptr + row * table_width
    for start in range(lo, hi, BLOCK_N):
        pos = start + offs
        valid = pos < hi
        block = tl.load(table + pos // BS, mask=valid, other=0).to(tl.int64)
        slot = block * BS + pos % BS
        kv_off = (slot * HKV + g)[:, None] * D + dims[None, :]
        kv_mask = valid[:, None] & dmask[None, :]
        k = tl.load(k_ptr + kv_off, mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + kv_off, mask=kv_mask, other=0.0)
        if FP32_MATH:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
            qk = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            qk = tl.dot(q, tl.trans(k))
        qk = tl.where(valid[None, :], qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if FP32_MATH:
            pv = tl.dot(p, v, input_precision="ieee")
        else:
            pv = tl.dot(p.to(v.dtype), v)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    o_off = t.to(tl.int64) * stride_ot + (g * G + heads)[:, None] * stride_oh + s * stride_os \
        + dims[None, :]
    o_mask = hmask[:, None] & dmask[None, :]
    if SPLIT:
        # unnormalised partial; the combine kernel rescales by the running maxima
        tl.store(out_ptr + o_off, acc, mask=o_mask)
        ml_off = (t.to(tl.int64) * HKV * G + g * G + heads) * tl.num_programs(2) + s
        tl.store(m_ptr + ml_off, m_i, mask=hmask)
        tl.store(l_ptr + ml_off, l_i, mask=hmask)
    else:
        denom = tl.where(l_i > 0.0, l_i, 1.0)  # q_len 0 -> zeros, as the C++ op
        tl.store(out_ptr + o_off, (acc / denom[:, None]).to(out_ptr.dtype.element_ty), mask=o_mask)


@triton.jit
def _combine_kernel(part_ptr, m_ptr, l_ptr, out_ptr, stride_ot, stride_oh,
                    HQ: tl.constexpr, NUM_SPLITS: tl.constexpr, SPLITS_PAD: tl.constexpr,
                    D: tl.constexpr, D_PAD: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    splits = tl.arange(0, SPLITS_PAD)
    dims = tl.arange(0, D_PAD)
    smask = splits < NUM_SPLITS
    base = t.to(tl.int64) * HQ + h
    m = tl.load(m_ptr + base * NUM_SPLITS + splits, mask=smask, other=-1.0e30)
    l_s = tl.load(l_ptr + base * NUM_SPLITS + splits, mask=smask, other=0.0)
    w = tl.exp2(m - tl.max(m, 0))
    denom = tl.sum(w * l_s, 0)
    denom = tl.where(denom > 0.0, denom, 1.0)
    part = tl.load(part_ptr + (base * NUM_SPLITS + splits)[:, None] * D_PAD + dims[None, :],
                   mask=smask[:, None] & (dims < D)[None, :], other=0.0)
    out = tl.sum(w[:, None] * part, 0) / denom
    tl.store(out_ptr + t.to(tl.int64) * stride_ot + h * stride_oh + dims,
             out.to(out_ptr.dtype.element_ty), mask=dims < D)


def _pow2(n: int, floor: int = 1) -> int:
    return max(floor, triton.next_power_of_2(n))


def default_num_splits(num_queries: int, num_kv_heads: int, max_len: int, block_n: int,
                       device: torch.device) -> int:
    """Split-KV only when the query x KV-head programs cannot fill the GPU (small decode batches:
    Thor has 20 SMs) and each split still gets a few key tiles. Host-side from shapes only (no
    device sync), so the choice is fixed for a graph-captured shape."""
    if device.type != "cuda":
        return 1
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    programs = num_queries * num_kv_heads
    if programs >= sms:
        return 1
    tiles = triton.cdiv(max_len, block_n)
    return max(1, min(triton.cdiv(2 * sms, programs), tiles // 4, 16))


def paged_attention_triton(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, q_row: torch.Tensor, q_len: torch.Tensor,
                           scale: float, num_splits: int | None = None,
                           block_n: int | None = None) -> torch.Tensor:
    """q [T,Hq,D]; k/v_cache [NB,BS,Hkv,D] contiguous; block_tables int32 [R,MB]; q_row, q_len
    int32 [T]. Query t sees logical positions [0, q_len[t]) of row q_row[t]. Returns [T,Hq,D]."""
    if q.dim() != 3 or k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError("q must be [T,Hq,D] and k_cache, v_cache [NB,BS,Hkv,D]")
    t, hq, d = q.shape
    _, bs, hkv, dk = k_cache.shape
    if dk != d or hq % hkv:
        raise ValueError(f"head_dim {d} vs {dk}, or Hq {hq} not a multiple of Hkv {hkv}")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("k_cache and v_cache must be contiguous")
    if q.dtype != k_cache.dtype or q.dtype != v_cache.dtype:
        raise ValueError("q and the caches must share a dtype")
    if block_tables.dtype != torch.int32 or q_row.dtype != torch.int32 or q_len.dtype != torch.int32:
        raise ValueError("block_tables, q_row and q_len must be int32")
    if q.device.type == "cpu" and not INTERPRETED:
        raise RuntimeError("the Triton kernel runs on CPU tensors only under TRITON_INTERPRET=1 "
                           "(set before oxygen_ros.engine.attention.triton_paged is imported)")
    if q.stride(2) != 1:
        q = q.contiguous()
    tables = block_tables.contiguous()
    g = hq // hkv
    g_pad = _pow2(g, 16)  # tl.dot needs M >= 16
    d_pad = _pow2(d, 16)
    if block_n is None:
        block_n = 32 if d_pad >= 256 else 64
    max_len = tables.shape[1] * bs
    if num_splits is None:
        num_splits = default_num_splits(t, hkv, max_len, block_n, q.device)
    tiles = max(1, triton.cdiv(max_len, block_n))
    num_splits = max(1, min(num_splits, tiles))
    split_len = triton.cdiv(tiles, num_splits) * block_n
    fp32_math = INTERPRETED or q.dtype == torch.float32
    out = torch.empty((t, hq, d), dtype=q.dtype, device=q.device)
    if t == 0:
        return out
    common = dict(HKV=hkv, G=g, G_PAD=g_pad, D=d, D_PAD=d_pad, BS=bs, BLOCK_N=block_n,
                  FP32_MATH=fp32_math)
    qk_scale = float(scale) * _LOG2E
    if num_splits == 1:
        _attend_kernel[(t, hkv, 1)](q, k_cache, v_cache, tables, q_row, q_len, out, out, out,
                                    qk_scale, q.stride(0), q.stride(1), out.stride(0), out.stride(1),
                                    0, tables.shape[1], split_len, SPLIT=False, **common)
        return out
    part = torch.empty((t, hq, num_splits, d_pad), dtype=torch.float32, device=q.device)
    m = torch.empty((t, hq, num_splits), dtype=torch.float32, device=q.device)
    l_sum = torch.empty_like(m)
    _attend_kernel[(t, hkv, num_splits)](q, k_cache, v_cache, tables, q_row, q_len, part, m, l_sum,
                                         qk_scale, q.stride(0), q.stride(1), part.stride(0),
                                         part.stride(1), part.stride(2), tables.shape[1], split_len,
                                         SPLIT=True, **common)
    _combine_kernel[(t, hq)](part, m, l_sum, out, out.stride(0), out.stride(1), HQ=hq,
                             NUM_SPLITS=num_splits, SPLITS_PAD=_pow2(num_splits, 2), D=d, D_PAD=d_pad)
    return out
