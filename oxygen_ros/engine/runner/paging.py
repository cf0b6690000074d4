"""How the runner addresses its KV pool, one definition for the eager paths (runner/model_runner.py) and the
captured graphs (graphs.py): the slot of a sequence position, the zero-padded block-table tensor,
the attention contexts that write new K/V into the pool and read it back in place, and the bounded
least-recently-used dict that keeps adaRMS schedules and captured graphs.

A position p of a sequence with block table T lives in slot T[p // block_size] * block_size +
p % block_size of the flattened [blocks * block_size, Hkv, D] pool of every layer.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, Iterator, Protocol, Sequence, TypeVar

import numpy as np
import torch
import torch.nn.functional as F

from .attention import paged_attention


class Pool(Protocol):
    """What a context needs of the pool's owner (the ModelRunner)."""

    k_cache: list[torch.Tensor]  # per layer [blocks, block_size, Hkv, D]
    v_cache: list[torch.Tensor]
    backend: str
    scale: float


def slots(table: Sequence[int], start: int, count: int, block_size: int) -> list[int]:
    """Pool slots of positions start .. start+count-1 of the sequence with this block table
    (host side: no device work)."""
    bs = block_size
    return [table[p // bs] * bs + p % bs for p in range(start, start + count)]


def device_slots(tables: torch.Tensor, pos: torch.Tensor, block_size: int) -> torch.Tensor:
    """The same addressing on the device: row i's slot of position pos[i] in tables [B, W]
    (capturable: no host sync; a position past the table reads its last column, which only rows
    that write to the sink reach)."""
    col = torch.clamp(pos // block_size, max=tables.shape[1] - 1)
    block = tables.gather(1, col[:, None])[:, 0].long()
    return block * block_size + pos % block_size


def padded_tables(tables: Sequence[Sequence[int]], rows: int | None = None,
                  width: int | None = None) -> torch.Tensor:
    """Block tables as one int32 host tensor [rows, width], zero padded (rows default: one per
    table; width default: the longest table). Padding columns are never read: each query's
    length bounds the blocks it visits."""
    rows = len(tables) if rows is None else rows
    width = max(1, max((len(t) for t in tables), default=0)) if width is None else width
    out = np.zeros((rows, width), dtype=np.int32)
    for i, t in enumerate(tables):
        out[i, : len(t)] = t
    return torch.from_numpy(out)


def graph_width(width: int) -> int:
    """A captured graph's table width: `width` rounded up to a power of two, so tables that grow
    over a request's life reuse a few graphs."""
    return max(1, 1 << (max(width, 1) - 1).bit_length())


class PoolWriter:
    """Shared part of the attention contexts: write the new tokens' K/V into their slots.
    `states`: which packed rows continue which recurrent-state slot (engine/runner/state_pool.py;
    None for attention-only cache specs), for the model's state layers."""

    states: Any = None

    def __init__(self, pool: Pool, slots: torch.Tensor) -> None:
        self.runner = pool
        self.slots = slots

    def _write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        flat_k = self.runner.k_cache[layer].view(-1, k.shape[1], k.shape[2])
        flat_v = self.runner.v_cache[layer].view(-1, v.shape[1], v.shape[2])
        flat_k.index_copy_(0, self.slots, k)
        flat_v.index_copy_(0, self.slots, v)


class PrefillContext(PoolWriter):
    """Observation prefix: bidirectional among the prefix tokens (pi0.5), or causal (a causal
    LM backbone: Qwen3-VL); K/V go to the pool."""

    def __init__(self, pool: Pool, slots: torch.Tensor, causal: bool = False) -> None:
        super().__init__(pool, slots)
        self.causal = causal

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self._write(layer, k, v)
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
            scale=self.runner.scale, enable_gqa=True, is_causal=self.causal,
        )
        return out[0].transpose(0, 1)


class PagedContext(PoolWriter):
    """Queries of many sequences at once, each reading its own blocks of the pool in place; the
    eager paths build it from host lists, the captured graphs from their static buffers."""

    def __init__(self, pool: Pool, slots: torch.Tensor, tables: torch.Tensor,
                 q_row: torch.Tensor, q_len: torch.Tensor,
                 seq_start: torch.Tensor | None = None) -> None:
        super().__init__(pool, slots)
        self.tables, self.q_row, self.q_len = tables, q_row, q_len
        # queries [seq_start[s], seq_start[s+1]) share a row: the Triton backend tiles them
        self.seq_start = seq_start

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self._write(layer, k, v)
        r = self.runner
        return paged_attention(r.backend, q, r.k_cache[layer], r.v_cache[layer], self.tables,
                               self.q_row, self.q_len, r.scale, self.seq_start)


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A dict of at most `capacity` entries that are costly to make (adaRMS schedules, captured
    graphs): get() makes a missing one and marks it most recently used; beyond capacity the least
    recently used is dropped, so settings that change live (S, batch sizes) never grow it."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, make: Callable[[], V]) -> V:
        item = self._items.get(key)
        if item is None:
            item = self._items[key] = make()
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return item

    def __getitem__(self, key: K) -> V:  # a look without marking it used
        return self._items[key]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[K]:  # least recently used first
        return iter(self._items)
