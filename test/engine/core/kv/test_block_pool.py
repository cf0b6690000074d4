"""BlockPool: deterministic allocation order, refcounts, prefix-cache index, LRU eviction."""
from __future__ import annotations

import pytest

from oxygen_ros.engine.core.kv.block_pool import BlockPool


def test_allocate_lowest_ids_first_and_never_partial() -> None:
    pool = BlockPool(4)
    assert pool.allocate(3) == [0, 1, 2]
    assert pool.allocate(2) is None  # only 1 left: nothing handed out
    assert pool.num_free == 1 and pool.num_used == 3
    assert pool.allocate(0) == []
    assert pool.allocate(1) == [3]
    assert pool.allocate(1) is None
    assert pool.peak_used == 4


def test_freed_blocks_reused_lowest_first() -> None:
    pool = BlockPool(6)
    pool.allocate(6)
    pool.decref([4, 1, 3])
    assert pool.free_block_ids() == [1, 3, 4]
    assert pool.allocate(2) == [1, 3]
    assert pool.num_used == 5 and pool.peak_used == 6


def test_refcounts() -> None:
    pool = BlockPool(2)
    [b] = pool.allocate(1)
    pool.incref([b, b])
    assert pool.refcount(b) == 3
    pool.decref([b, b])
    assert pool.refcount(b) == 1 and pool.num_used == 1
    pool.decref([b])
    assert pool.refcount(b) == 0 and pool.num_used == 0 and pool.num_free == 2
    with pytest.raises(ValueError):
        pool.decref([b])
    with pytest.raises(ValueError):
        pool.incref([b])  # free, uncached: must be allocated, not revived
    with pytest.raises(ValueError):
        pool.refcount(7)


def test_lookup_confirms_keys() -> None:
    pool = BlockPool(3)
    [b] = pool.allocate(1)
    assert pool.register(b, 1234, (None, (1, 2)))
    assert pool.lookup(1234, (None, (1, 2))) == b
    assert pool.lookup(1234, (None, (1, 3))) is None  # same hash, other keys: a collision
    assert pool.lookup(99, (None, (1, 2))) is None
    [c] = pool.allocate(1)
    assert not pool.register(c, 1234, (None, (1, 2)))  # first registration stays canonical
    assert not pool.register(b, 555, "x")  # a block has one hash
    assert pool.block_hash(c) is None and pool.is_cached(b)
    with pytest.raises(ValueError):
        pool.register(2, 7, "unused block")


def test_cached_blocks_stay_until_needed_then_lru_evicted() -> None:
    pool = BlockPool(4)
    a, b, c = pool.allocate(3)
    pool.register(a, 10, "a")
    pool.register(b, 11, "b")
    pool.decref([b, a, c])  # release order b, a: b is least recently released
    assert pool.num_used == 0 and pool.num_cached_free == 2 and pool.num_free == 2
    assert pool.cached_free_block_ids() == [b, a]
    assert pool.free_block_ids() == [c, 3]
    assert pool.lookup(11, "b") == b  # still a hit while cached-free
    # Uncached free blocks are taken before anything is evicted.
    assert pool.allocate(2) == [2, 3]
    assert pool.lookup(10, "a") == a and pool.lookup(11, "b") == b
    # Then the least recently released cached block goes, and its hash with it.
    assert pool.allocate(1) == [b]
    assert pool.lookup(11, "b") is None and pool.block_hash(b) is None
    assert pool.num_cached_free == 1


def test_incref_revives_cached_free_block() -> None:
    pool = BlockPool(2)
    [a] = pool.allocate(1)
    pool.register(a, 10, "a")
    pool.decref([a])
    pool.reset_peak()
    pool.incref([pool.lookup(10, "a")])  # type: ignore[list-item]
    assert pool.refcount(a) == 1 and pool.num_cached_free == 0 and pool.num_used == 1
    assert pool.peak_used == 1
    assert pool.allocate(2) is None  # the revived block is not evictable any more
    pool.decref([a])
    assert pool.cached_free_block_ids() == [a]


def test_bad_sizes() -> None:
    with pytest.raises(ValueError):
        BlockPool(0)
    with pytest.raises(ValueError):
        BlockPool(2).allocate(-1)
