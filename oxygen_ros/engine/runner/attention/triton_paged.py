"""Paged attention as Triton kernels: the same contract as the C++ op, reading the pool in place.

Per-query kernel (decode): one program handles one query and one KV head: the G = Hq / Hkv query heads sharing that KV
head are packed into one [G_PAD, D] tile, so each K/V tile is loaded once for all of them
(pi0.5: 8 query heads, 1 KV head). Keys are walked in tiles of BLOCK_N logical positions; each
position's slot comes from the block table (`table[p // BS] * BS + p % BS`), so a tile may span
several small pool blocks or part of a large one. Online softmax in float32 (exp2 domain).

Split-KV (flash-decoding): with few queries (a small decode batch on a GPU with many SMs) the
key range of each query is cut into NUM_SPLITS chunks run by separate programs, each writing an
unnormalised float32 partial (acc, running max, running sum); a second kernel combines them.

Query-tiled kernel (denoise action tokens, packed prompt suffixes: same-row runs of queries,
given as `seq_start`): one program handles BLOCK_M queries of one run and one KV head, the tile's
rows being BLOCK_M queries x G_PAD heads, so each K/V tile is loaded once for all of them
(docs/gpu.md). Each query keeps its own q_len.

Launch configurations (constexprs, warps) come from attend_launch / tiled_launch /
combine_launch, which bench/suite/gpu_compile.py also uses to compile every one ahead of time.

`FP32_MATH` (constexpr) loads every tile as float32 and multiplies in IEEE float32: used for
float32 inputs and by Triton's CPU interpreter (TRITON_INTERPRET=1, which must be set before
this module is imported: the kernels are decorated at import). On a GPU, bf16/fp16 tiles go to
tl.dot as they are, accumulating in float32.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

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
def _key_tile(q, k_ptr, v_ptr, table, start, hi, g, qk_scale, HKV: tl.constexpr, D: tl.constexpr,
              D_PAD: tl.constexpr, BS: tl.constexpr, BLOCK_N: tl.constexpr,
              FP32_MATH: tl.constexpr):
    """Scores of the q tile against logical keys [start, start + BLOCK_N) below hi (scaled, exp2
    domain, not masked), the V tile and the positions; each key's slot from the block table."""
    pos = start + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D_PAD)
    valid = pos < hi
    block = tl.load(table + pos // BS, mask=valid, other=0).to(tl.int64)
    slot = block * BS + pos % BS
    kv_off = (slot * HKV + g)[:, None] * D + dims[None, :]
    kv_mask = valid[:, None] & (dims < D)[None, :]
    k = tl.load(k_ptr + kv_off, mask=kv_mask, other=0.0)
    v = tl.load(v_ptr + kv_off, mask=kv_mask, other=0.0)
    if FP32_MATH:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        qk = tl.dot(q, tl.trans(k))
    return qk * qk_scale, v, pos


@triton.jit
def _online_softmax(qk, v, acc, m_i, l_i, FP32_MATH: tl.constexpr):
    """One key tile into the running (acc, max, sum) of each row; masked scores are -inf."""
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    p = tl.exp2(qk - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    if FP32_MATH:
        pv = tl.dot(p, v, input_precision="ieee")
    else:
        pv = tl.dot(p.to(v.dtype), v)
    return acc * alpha[:, None] + pv, m_new, l_i


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
    table = tables_ptr + row * table_width
    for start in range(lo, hi, BLOCK_N):
        qk, v, pos = _key_tile(q, k_ptr, v_ptr, table, start, hi, g, qk_scale, HKV, D, D_PAD, BS,
                               BLOCK_N, FP32_MATH)
        qk = tl.where((pos < hi)[None, :], qk, float("-inf"))
        acc, m_i, l_i = _online_softmax(qk, v, acc, m_i, l_i, FP32_MATH)
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
def _attend_tiled_kernel(q_ptr, k_ptr, v_ptr, tables_ptr, q_row_ptr, q_len_ptr, seq_start_ptr,
                         out_ptr, qk_scale, stride_qt, stride_qh, stride_ot, stride_oh,
                         table_width, num_seqs,
                         HKV: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr,
                         D: tl.constexpr, D_PAD: tl.constexpr, BS: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, FP32_MATH: tl.constexpr):
    """BLOCK_M queries of one sequence x the G query heads of KV head g per program: tile row
    i * G_PAD + h is query q0 + i, head g * G + h. Sequence s owns the queries
    [seq_start[s], seq_start[s + 1]) (one block-table row) and the programs
    [seq_start[s] // BLOCK_M + s, seq_start[s + 1] // BLOCK_M + s + 1): enough for its
    ceil(len / BLOCK_M) tiles; the spare one has no valid row and loads no key."""
    pid = tl.program_id(0)
    g = tl.program_id(1)
    lo = 0
    hi = num_seqs
    while lo < hi:  # the last sequence whose first program is at or before pid
        mid = (lo + hi) // 2
        first_program = tl.load(seq_start_ptr + mid) // BLOCK_M + mid
        before = first_program <= pid
        lo = tl.where(before, mid + 1, lo)
        hi = tl.where(before, hi, mid)
    seq = lo - 1
    first = tl.load(seq_start_ptr + seq)
    end = tl.load(seq_start_ptr + seq + 1)
    q0 = first + (pid - (first // BLOCK_M + seq)) * BLOCK_M
    rows = tl.arange(0, BLOCK_M * G_PAD)
    tok = q0 + rows // G_PAD
    head = rows % G_PAD
    rmask = (tok < end) & (head < G)
    dims = tl.arange(0, D_PAD)
    dmask = dims < D
    lens = tl.load(q_len_ptr + tok, mask=rmask, other=0)
    hi_key = tl.max(lens, 0)
    row = tl.load(q_row_ptr + first, mask=first < end, other=0).to(tl.int64)
    q_off = tok.to(tl.int64)[:, None] * stride_qt + (g * G + head)[:, None] * stride_qh \
        + dims[None, :]
    q = tl.load(q_ptr + q_off, mask=rmask[:, None] & dmask[None, :], other=0.0)
    if FP32_MATH:
        q = q.to(tl.float32)
    m_i = tl.full([BLOCK_M * G_PAD], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M * G_PAD], tl.float32)
    acc = tl.zeros([BLOCK_M * G_PAD, D_PAD], tl.float32)
    table = tables_ptr + row * table_width
    for start in range(0, hi_key, BLOCK_N):
        qk, v, pos = _key_tile(q, k_ptr, v_ptr, table, start, hi_key, g, qk_scale, HKV, D, D_PAD,
                               BS, BLOCK_N, FP32_MATH)
        # each query its own length: causal suffixes, ragged tails
        qk = tl.where(pos[None, :] < lens[:, None], qk, float("-inf"))
        acc, m_i, l_i = _online_softmax(qk, v, acc, m_i, l_i, FP32_MATH)
    denom = tl.where(l_i > 0.0, l_i, 1.0)  # q_len 0 -> zeros, as the C++ op
    o_off = tok.to(tl.int64)[:, None] * stride_ot + (g * G + head)[:, None] * stride_oh \
        + dims[None, :]
    tl.store(out_ptr + o_off, (acc / denom[:, None]).to(out_ptr.dtype.element_ty),
             mask=rmask[:, None] & dmask[None, :])


@triton.jit
def _combine_kernel(part_ptr, m_ptr, l_ptr, out_ptr, stride_ot, stride_oh, num_splits,
                    HQ: tl.constexpr, SPLITS_PAD: tl.constexpr, D: tl.constexpr,
                    D_PAD: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    splits = tl.arange(0, SPLITS_PAD)
    dims = tl.arange(0, D_PAD)
    smask = splits < num_splits
    base = t.to(tl.int64) * HQ + h
    m = tl.load(m_ptr + base * num_splits + splits, mask=smask, other=-1.0e30)
    l_s = tl.load(l_ptr + base * num_splits + splits, mask=smask, other=0.0)
    w = tl.exp2(m - tl.max(m, 0))
    denom = tl.sum(w * l_s, 0)
    denom = tl.where(denom > 0.0, denom, 1.0)
    part = tl.load(part_ptr + (base * num_splits + splits)[:, None] * D_PAD + dims[None, :],
                   mask=smask[:, None] & (dims < D)[None, :], other=0.0)
    out = tl.sum(w[:, None] * part, 0) / denom
    tl.store(out_ptr + t.to(tl.int64) * stride_ot + h * stride_oh + dims,
             out.to(out_ptr.dtype.element_ty), mask=dims < D)


def _pow2(n: int, floor: int = 1) -> int:
    return max(floor, triton.next_power_of_2(n))


@dataclass(frozen=True)
class Launch:
    """One kernel's compile-time configuration: what the wrappers below launch, and what
    bench/suite/gpu_compile.py compiles ahead of time for a GPU target (the same functions decide)."""

    kernel: str  # a name in KERNELS
    constexprs: tuple[tuple[str, int | bool], ...]
    num_warps: int = 4

    @property
    def meta(self) -> dict:
        return dict(self.constexprs, num_warps=self.num_warps)


def _fp32_math(dtype: torch.dtype) -> bool:
    """float32 tiles in tl.dot: float32 inputs, and every dtype under the interpreter (the tile
    sizes still follow the dtype, so interpreter tests in bf16 run the bf16 tiles)."""
    return INTERPRETED or dtype == torch.float32


def attend_launch(hq: int, hkv: int, d: int, bs: int, dtype: torch.dtype, split: bool,
                  block_n: int | None = None) -> Launch:
    """Per-query kernel (decode; split-KV partials when `split`). float32 tiles take twice the
    registers of bf16: half as many keys per tile (gpu_compile: no spills at head_dim 256)."""
    g = hq // hkv
    d_pad = _pow2(d, 16)
    fp32 = dtype == torch.float32
    if block_n is None:
        block_n = (16 if d_pad >= 256 else 32) if fp32 else (32 if d_pad >= 256 else 64)
    return Launch("attend", (("HKV", hkv), ("G", g), ("G_PAD", _pow2(g, 16)), ("D", d),
                             ("D_PAD", d_pad), ("BS", bs), ("BLOCK_N", block_n), ("SPLIT", split),
                             ("FP32_MATH", _fp32_math(dtype))),
                  num_warps=8 if fp32 and d_pad >= 256 else 4)


def tiled_launch(hq: int, hkv: int, d: int, bs: int, dtype: torch.dtype,
                 block_m: int | None = None, block_n: int | None = None) -> Launch:
    """Query-tiled kernel (denoise, packed prompt suffixes): BLOCK_M queries x G_PAD heads per
    tile row block, at least 16 rows for tl.dot; the row count bounded by the accumulator's
    registers (rows x head_dim float32 spread over the warps)."""
    g = hq // hkv
    g_pad = _pow2(g)
    d_pad = _pow2(d, 16)
    fp32 = dtype == torch.float32
    if fp32:  # float32 q, K and V tiles: the smallest tl.dot tile, fewer keys at 256
        rows, keys = 16, 16 if d_pad >= 256 else 32
    else:  # 64 x 64 at head dim 32 spilled on sm_110 (ptxas kept it at 80 registers)
        rows, keys = (32, 32) if d_pad >= 256 else (64, 32 if d_pad <= 32 else 64)
    if block_m is None:
        block_m = max(1, rows // g_pad, 16 // g_pad)
    if block_n is None:
        block_n = keys
    big = block_m * g_pad * d_pad >= 32 * 256 or (fp32 and d_pad >= 256)
    return Launch("attend_tiled", (("HKV", hkv), ("G", g), ("G_PAD", g_pad), ("D", d),
                                   ("D_PAD", d_pad), ("BS", bs), ("BLOCK_M", block_m),
                                   ("BLOCK_N", block_n), ("FP32_MATH", _fp32_math(dtype))),
                  num_warps=8 if big else 4)


def combine_launch(hq: int, d: int, num_splits: int) -> Launch:
    return Launch("combine", (("HQ", hq), ("SPLITS_PAD", _pow2(num_splits, 2)), ("D", d),
                              ("D_PAD", _pow2(d, 16))))


MAX_SPLITS = 16


def launches(hq: int, hkv: int, d: int, bs: int, dtype: torch.dtype) -> list[Launch]:
    """Every configuration the wrappers can launch for one attention shape (any batch, any
    length): per-query single pass and split, the combine for each split-count padding, tiled."""
    out = [attend_launch(hq, hkv, d, bs, dtype, False), attend_launch(hq, hkv, d, bs, dtype, True)]
    pads = sorted({_pow2(n, 2) for n in range(2, MAX_SPLITS + 1)})
    out += [combine_launch(hq, d, p) for p in pads]
    out.append(tiled_launch(hq, hkv, d, bs, dtype))
    return out


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
    return max(1, min(triton.cdiv(2 * sms, programs), tiles // 4, MAX_SPLITS))


def _check_inputs(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  block_tables: torch.Tensor, q_row: torch.Tensor, q_len: torch.Tensor) -> None:
    if q.dim() != 3 or k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError("q must be [T,Hq,D] and k_cache, v_cache [NB,BS,Hkv,D]")
    _, hq, d = q.shape
    _, _, hkv, dk = k_cache.shape
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
                           "(set before oxygen_ros.engine.runner.attention.triton_paged is imported)")


def paged_attention_triton(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, q_row: torch.Tensor, q_len: torch.Tensor,
                           scale: float, num_splits: int | None = None,
                           block_n: int | None = None, seq_start: torch.Tensor | None = None,
                           block_m: int | None = None) -> torch.Tensor:
    """q [T,Hq,D]; k/v_cache [NB,BS,Hkv,D] contiguous; block_tables int32 [R,MB]; q_row, q_len
    int32 [T]. Query t sees logical positions [0, q_len[t]) of row q_row[t]. Returns [T,Hq,D].

    seq_start (int32 [S+1], non-decreasing, seq_start[S] = T): the caller's promise that the
    queries [seq_start[s], seq_start[s+1]) share one q_row (a denoise step's action tokens, a
    packed prompt suffix): they go to the query-tiled kernel, which loads each K/V tile once for
    BLOCK_M of them. Without it, one program per query (decode), split-KV when few."""
    _check_inputs(q, k_cache, v_cache, block_tables, q_row, q_len)
    t, hq, d = q.shape
    _, bs, hkv, _ = k_cache.shape
    if q.stride(2) != 1:
        q = q.contiguous()
    tables = block_tables.contiguous()
    out = torch.empty((t, hq, d), dtype=q.dtype, device=q.device)
    if t == 0:
        return out
    qk_scale = float(scale) * _LOG2E
    if seq_start is not None:
        if seq_start.dtype != torch.int32 or seq_start.dim() != 1 or seq_start.numel() < 2:
            raise ValueError("seq_start must be int32 [S+1] with S >= 1")
        launch = tiled_launch(hq, hkv, d, bs, q.dtype, block_m, block_n)
        meta = launch.meta
        num_seqs = seq_start.numel() - 1
        grid = (t // meta["BLOCK_M"] + num_seqs, hkv)
        _attend_tiled_kernel[grid](q, k_cache, v_cache, tables, q_row, q_len, seq_start, out,
                                   qk_scale, q.stride(0), q.stride(1), out.stride(0),
                                   out.stride(1), tables.shape[1], num_seqs, **meta)
        return out
    single = attend_launch(hq, hkv, d, bs, q.dtype, False, block_n)
    block_n = single.meta["BLOCK_N"]
    max_len = tables.shape[1] * bs
    if num_splits is None:
        num_splits = default_num_splits(t, hkv, max_len, block_n, q.device)
    tiles = max(1, triton.cdiv(max_len, block_n))
    num_splits = max(1, min(num_splits, tiles))
    split_len = triton.cdiv(tiles, num_splits) * block_n
    if num_splits == 1:
        _attend_kernel[(t, hkv, 1)](q, k_cache, v_cache, tables, q_row, q_len, out, out, out,
                                    qk_scale, q.stride(0), q.stride(1), out.stride(0), out.stride(1),
                                    0, tables.shape[1], split_len, **single.meta)
        return out
    split = attend_launch(hq, hkv, d, bs, q.dtype, True, block_n)
    d_pad = split.meta["D_PAD"]
    part = torch.empty((t, hq, num_splits, d_pad), dtype=torch.float32, device=q.device)
    m = torch.empty((t, hq, num_splits), dtype=torch.float32, device=q.device)
    l_sum = torch.empty_like(m)
    _attend_kernel[(t, hkv, num_splits)](q, k_cache, v_cache, tables, q_row, q_len, part, m, l_sum,
                                         qk_scale, q.stride(0), q.stride(1), part.stride(0),
                                         part.stride(1), part.stride(2), tables.shape[1], split_len,
                                         **split.meta)
    _combine_kernel[(t, hq)](part, m, l_sum, out, out.stride(0), out.stride(1), num_splits,
                             **combine_launch(hq, d, num_splits).meta)
    return out


# The kernels by Launch.kernel name (bench/suite/gpu_compile.py compiles them for GPU targets).
KERNELS = {"attend": _attend_kernel, "attend_tiled": _attend_tiled_kernel,
           "combine": _combine_kernel}
