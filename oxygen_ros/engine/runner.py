"""ModelRunner: the only owner of torch state (model weights and the unified KV pool).

Every sequence's keys/values live in one pool allocated once with static shapes; the runner
writes new K/V into slots given by the KV manager and reads them back with paged attention.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .attention import paged_attention, select_backend
from .config import ModelConfig

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def torch_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]


class _PoolWriter:
    """Shared part of the attention contexts: write the new tokens' K/V into their slots."""

    def __init__(self, runner: "ModelRunner", slots: torch.Tensor) -> None:
        self.runner = runner
        self.slots = slots

    def _write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        flat_k = self.runner.k_cache[layer].view(-1, k.shape[1], k.shape[2])
        flat_v = self.runner.v_cache[layer].view(-1, v.shape[1], v.shape[2])
        flat_k.index_copy_(0, self.slots, k)
        flat_v.index_copy_(0, self.slots, v)


class PrefillContext(_PoolWriter):
    """Observation prefix: bidirectional among the prefix tokens; K/V go to the pool."""

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self._write(layer, k, v)
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
            scale=self.runner.scale, enable_gqa=True,
        )
        return out[0].transpose(0, 1)


class PagedContext(_PoolWriter):
    """Queries of many sequences at once, each reading its own blocks of the pool in place."""

    def __init__(self, runner: "ModelRunner", slots: torch.Tensor, tables: torch.Tensor,
                 q_row: torch.Tensor, q_len: torch.Tensor) -> None:
        super().__init__(runner, slots)
        self.tables, self.q_row, self.q_len = tables, q_row, q_len

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self._write(layer, k, v)
        r = self.runner
        return paged_attention(r.backend, q, r.k_cache[layer], r.v_cache[layer], self.tables,
                               self.q_row, self.q_len, r.scale)


@dataclass(frozen=True)
class SeqView:
    """What the runner needs to know about one sequence: its block table and token count."""

    block_table: Sequence[int]
    length: int  # tokens already in the pool (the next token goes to position `length`)


class ModelRunner:
    def __init__(self, model: torch.nn.Module, config: ModelConfig, num_blocks: int, block_size: int,
                 device: str = "cpu", dtype: str = "float32", backend: str = "auto") -> None:
        self.model = model
        self.config = config
        self.device = torch.device(device)
        self.dtype = torch_dtype(dtype)
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.backend = select_backend(backend, self.device)
        self.scale = config.head_dim ** -0.5
        shape = (num_blocks, block_size, config.num_kv_heads, config.head_dim)
        # Allocated once: every task and every frame shares this pool (gpt-fast setup_caches).
        self.k_cache = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(config.depth)]
        self.v_cache = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(config.depth)]

    @property
    def bytes_per_block(self) -> int:
        c = self.config
        elem = torch.finfo(self.dtype).bits // 8
        return 2 * c.depth * self.block_size * c.num_kv_heads * c.head_dim * elem

    # -- helpers --------------------------------------------------------------------------------
    def _slots(self, table: Sequence[int], start: int, count: int) -> list[int]:
        bs = self.block_size
        return [table[p // bs] * bs + p % bs for p in range(start, start + count)]

    def _tables(self, tables: Sequence[Sequence[int]]) -> torch.Tensor:
        width = max(1, max(len(t) for t in tables))
        out = np.zeros((len(tables), width), dtype=np.int32)
        for i, t in enumerate(tables):
            out[i, : len(t)] = t
        return torch.from_numpy(out).to(self.device)

    def _long(self, values: Sequence[int]) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.long, device=self.device)

    def _int(self, values: Sequence[int]) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.int32, device=self.device)

    def copy_blocks(self, copies: Sequence[tuple[int, int, int]]) -> None:
        """Copy-on-write of a shared, partially filled block (once per forked sequence)."""
        for src, dst, n in copies:
            for cache in (*self.k_cache, *self.v_cache):
                cache[dst, :n].copy_(cache[src, :n])

    # -- stages ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def prefill_observation(self, images: np.ndarray, prompt_ids: Sequence[int], seq: SeqView) -> int:
        """Vision + prompt of one observation into the pool at positions 0..P-1. Returns P."""
        m = self.model
        pix = torch.from_numpy(np.ascontiguousarray(images)).to(self.device)
        pix = pix.permute(0, 3, 1, 2).to(self.dtype) / 255.0 * 2.0 - 1.0
        img = m.embed_images(pix).reshape(-1, self.config.vlm.width)
        txt = m.embed_tokens(self._long(prompt_ids))
        hidden = torch.cat([img, txt.to(img.dtype)], dim=0)
        n = hidden.shape[0]
        if n != seq.length:
            raise ValueError(f"prefix has {n} tokens but {seq.length} slots were allocated")
        ctx = PrefillContext(self, self._long(self._slots(seq.block_table, 0, n)))
        m.forward_tokens(0, hidden, torch.arange(n, device=self.device), ctx, None)
        return n

    @torch.inference_mode()
    def denoise(self, seq: SeqView, prefix_len: int, noise: torch.Tensor, num_steps: int,
                expert: int = 1) -> torch.Tensor:
        """Flow-matching Euler from t=1 (noise) to t=0. The action tokens' K/V go to the
        sequence's own scratch slots after the prefix; the shared prefix blocks are only read."""
        m = self.model
        h = noise.shape[0]
        slots = self._long(self._slots(seq.block_table, prefix_len, h))
        tables = self._tables([seq.block_table])
        ctx = PagedContext(self, slots, tables, self._int([0] * h), self._int([prefix_len + h] * h))
        positions = torch.arange(prefix_len, prefix_len + h, device=self.device)
        x = noise.to(device=self.device, dtype=torch.float32)
        dt = -1.0 / num_steps
        for step in range(num_steps):
            t = 1.0 + step * dt
            cond = m.time_cond(expert, t)
            hidden = m.action_in(expert, x.to(self.dtype))
            out = m.forward_tokens(expert, hidden, positions, ctx, cond)  # [W]: broadcast
            v = m.action_out(expert, out).float()
            x = x + dt * v
        return x

    @torch.inference_mode()
    def prefill_suffix(self, seqs: Sequence[SeqView], suffixes: Sequence[Sequence[int]],
                       skip: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Causal prefill of each request's prompt suffix after its frame's prefix, all requests
        packed in one pass. `skip[i]` leading suffix tokens are already in the pool (prefix-cache
        hit). Returns (first generated token ids [B], their top-1 minus top-2 margins [B])."""
        skip = skip or [0] * len(seqs)
        ids, pos, slots, rows, lens, last = [], [], [], [], [], []
        for i, (s, suf, c) in enumerate(zip(seqs, suffixes, skip)):
            start = s.length  # prefix tokens already in the pool for this sequence
            for j in range(c, len(suf)):
                ids.append(suf[j])
                pos.append(start + j)
                rows.append(i)
                lens.append(start + j + 1)
            slots.extend(self._slots(s.block_table, start + c, len(suf) - c))
            last.append(len(ids) - 1)
        m = self.model
        hidden = m.embed_tokens(self._long(ids))
        ctx = PagedContext(self, self._long(slots), self._tables([s.block_table for s in seqs]),
                           self._int(rows), self._int(lens))
        out = m.forward_tokens(0, hidden, self._long(pos), ctx, None)
        return self._greedy(m.lm_logits(out[self._long(last)]))

    @torch.inference_mode()
    def decode(self, seqs: Sequence[SeqView], first_tokens: torch.Tensor, steps: Sequence[int]
               ) -> tuple[list[list[int]], list[list[float]]]:
        """Batched greedy decode: request i advances steps[i] tokens starting from its last token
        first_tokens[i]. Tokens stay on the device between steps; one host sync at the end."""
        b = len(seqs)
        if b == 0 or max(steps, default=0) == 0:
            return [[] for _ in range(b)], [[] for _ in range(b)]
        m = self.model
        tables = self._tables([s.block_table for s in seqs])
        tokens = first_tokens.to(self.device)
        out_tok: list[torch.Tensor] = []
        out_mar: list[torch.Tensor] = []
        active_idx: list[list[int]] = []
        for step in range(max(steps)):
            idx = [i for i in range(b) if steps[i] > step]
            active_idx.append(idx)
            sel = self._long(idx)
            slots = [self._slots(seqs[i].block_table, seqs[i].length + step, 1)[0] for i in idx]
            positions = [seqs[i].length + step for i in idx]
            ctx = PagedContext(self, self._long(slots), tables, self._int(idx),
                               self._int([p + 1 for p in positions]))
            step_ids = tokens if len(idx) == b else tokens[sel]
            hidden = m.embed_tokens(step_ids)
            logits = m.lm_logits(m.forward_tokens(0, hidden, self._long(positions), ctx, None))
            nxt, margin = self._greedy(logits)
            out_tok.append(nxt)
            out_mar.append(margin)
            if len(idx) == b:
                tokens = nxt
            else:
                tokens = tokens.clone()
                tokens[sel] = nxt
        toks = [t.tolist() for t in out_tok]
        mars = [mm.tolist() for mm in out_mar]
        result_t: list[list[int]] = [[] for _ in range(b)]
        result_m: list[list[float]] = [[] for _ in range(b)]
        for step, idx in enumerate(active_idx):
            for j, i in enumerate(idx):
                result_t[i].append(toks[step][j])
                result_m[i].append(mars[step][j])
        return result_t, result_m

    @staticmethod
    def _greedy(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        top = torch.topk(logits.float(), 2, dim=-1)
        return top.indices[:, 0], top.values[:, 0] - top.values[:, 1]
