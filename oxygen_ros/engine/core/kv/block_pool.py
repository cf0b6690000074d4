"""BlockPool: bookkeeping for the fixed set of KV blocks (no tensors, no torch).

Each block is in exactly one of three states:
- used:        refcount > 0 (held by one or more block tables);
- cached-free: refcount == 0 but it still holds hashed, reusable content (prefix cache);
- free:        refcount == 0 and no content worth keeping.

Allocation order is deterministic so tests can assert exact block ids:
1. free blocks, lowest id first (a min-heap; freed blocks go back into the heap);
2. then cached-free blocks, least recently released first (LRU). Evicting one drops its hash.
Taking free blocks before evicting keeps cached content alive as long as possible.
"""
from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Hashable, Iterable


class BlockPool:
    """Refcounts, free list and prefix-cache index over `num_blocks` KV blocks."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks <= 0:
            raise ValueError(f"num_blocks must be > 0, got {num_blocks}")
        self.num_blocks = num_blocks
        self._ref: list[int] = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._keys: list[Hashable | None] = [None] * num_blocks
        self._free: list[int] = list(range(num_blocks))  # already a valid min-heap
        # Cached blocks with refcount 0, oldest release first (eviction order).
        self._evictable: OrderedDict[int, None] = OrderedDict()
        self._by_hash: dict[int, int] = {}
        self._num_used = 0
        self._peak_used = 0

    # ---- counters ---------------------------------------------------------------------------
    @property
    def num_used(self) -> int:
        return self._num_used

    @property
    def num_cached_free(self) -> int:
        return len(self._evictable)

    @property
    def num_free(self) -> int:
        """Free blocks that hold no cached content (excludes cached-free ones)."""
        return len(self._free)

    @property
    def num_available(self) -> int:
        """Blocks `allocate` can hand out: free plus evictable cached ones."""
        return len(self._free) + len(self._evictable)

    @property
    def peak_used(self) -> int:
        return self._peak_used

    def reset_peak(self) -> None:
        self._peak_used = self._num_used

    # ---- allocation and refcounts -----------------------------------------------------------
    def allocate(self, n: int) -> list[int] | None:
        """n fresh blocks with refcount 1, or None (nothing changes) if fewer are available."""
        if n < 0:
            raise ValueError(f"cannot allocate {n} blocks")
        if n > len(self._free) + len(self._evictable):
            return None
        out: list[int] = []
        free, ref = self._free, self._ref
        for _ in range(n):
            if free:
                b = heapq.heappop(free)
            else:
                b, _ = self._evictable.popitem(last=False)
                self._drop_hash(b)
            ref[b] = 1
            out.append(b)
        self._num_used += n
        if self._num_used > self._peak_used:
            self._peak_used = self._num_used
        return out

    # incref/decref run for every block of every fork and free, every frame: the id check is
    # inlined rather than a call per block.
    def incref(self, ids: Iterable[int]) -> None:
        """Share blocks; a cached-free block is revived (taken out of the eviction queue)."""
        ref, n = self._ref, self.num_blocks
        for b in ids:
            if not 0 <= b < n:
                raise ValueError(f"block id {b} outside pool of {n}")
            if ref[b] == 0:
                if b not in self._evictable:
                    raise ValueError(f"incref of free block {b} (allocate it first)")
                del self._evictable[b]
                self._num_used += 1
            ref[b] += 1
        if self._num_used > self._peak_used:
            self._peak_used = self._num_used

    def decref(self, ids: Iterable[int]) -> None:
        """Release blocks in the given order; the first released is the first evicted."""
        ref, n = self._ref, self.num_blocks
        for b in ids:
            if not 0 <= b < n:
                raise ValueError(f"block id {b} outside pool of {n}")
            r = ref[b]
            if r <= 0:
                raise ValueError(f"decref of block {b} with refcount {r}")
            ref[b] = r - 1
            if r == 1:
                self._num_used -= 1
                if self._hash[b] is not None:
                    self._evictable[b] = None
                else:
                    heapq.heappush(self._free, b)

    def refcount(self, block_id: int) -> int:
        self._check_id(block_id)
        return self._ref[block_id]

    # ---- prefix cache -----------------------------------------------------------------------
    def lookup(self, block_hash: int, keys: Hashable) -> int | None:
        """The cached block with this hash AND equal keys (a hash collision is not a hit)."""
        b = self._by_hash.get(block_hash)
        if b is None or self._keys[b] != keys:
            return None
        return b

    def register(self, block_id: int, block_hash: int, keys: Hashable) -> bool:
        """Index a used, full, immutable block. False if the block or the hash is already taken
        (the first block registered under a hash stays canonical; duplicates just are not cached)."""
        self._check_id(block_id)
        if self._ref[block_id] <= 0:
            raise ValueError(f"register of unused block {block_id}")
        if self._hash[block_id] is not None or block_hash in self._by_hash:
            return False
        self._hash[block_id] = block_hash
        self._keys[block_id] = keys
        self._by_hash[block_hash] = block_id
        return True

    def block_hash(self, block_id: int) -> int | None:
        self._check_id(block_id)
        return self._hash[block_id]

    def is_cached(self, block_id: int) -> bool:
        return self.block_hash(block_id) is not None

    # ---- introspection (tests, debugging) ---------------------------------------------------
    def free_block_ids(self) -> list[int]:
        """Free (uncached) blocks in allocation order."""
        return sorted(self._free)

    def cached_free_block_ids(self) -> list[int]:
        """Cached-free blocks in eviction order (first = evicted first)."""
        return list(self._evictable)

    def _drop_hash(self, b: int) -> None:
        h = self._hash[b]
        if h is not None:
            del self._by_hash[h]
            self._hash[b] = None
            self._keys[b] = None

    def _check_id(self, b: int) -> None:
        if not 0 <= b < self.num_blocks:
            raise ValueError(f"block id {b} outside pool of {self.num_blocks}")
