"""KVManager: exact block ids, refcounts and CoW copies for scripted sequences (vLLM style), plus
a property test that replays random create/fork/append/free against a simulated KV pool."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oxygen_ros.engine.core.kv import KVCacheBlocks, KVManager, KVUsage, UnknownSequenceError

BS = 16
PREFIX = list(range(1000, 1037))  # 37 observation tokens: blocks [0, 1, 2], 5 in the tail
PROMPT = list(range(1, 12))  # 11 tokens: exactly completes the prefix's tail block


def refcounts(kv: KVManager) -> list[int]:
    return [kv.pool.refcount(b) for b in range(kv.pool.num_blocks)]


def with_prefix(num_blocks: int = 16, seq: int = 0, keys: list[int] = PREFIX) -> KVManager:
    kv = KVManager(num_blocks, BS, bytes_per_block=100)
    kv.create(seq)
    got = kv.append(seq, keys)
    assert got is not None
    return kv


def test_prefix_then_fork_shares_every_block() -> None:
    kv = with_prefix()
    assert kv.block_table(0) == [0, 1, 2] and kv.length(0) == 37
    kv.create(1, parent=0)
    kv.create(2, parent=0)
    assert kv.block_table(1) == kv.block_table(2) == [0, 1, 2]
    assert kv.length(1) == 37
    assert refcounts(kv)[:4] == [3, 3, 3, 0]
    assert kv.usage().blocks_used == 3  # forking never allocates
    kv.check_invariants()


def test_append_to_children_copies_on_write() -> None:
    kv = with_prefix()
    kv.create(1, parent=0)
    kv.create(2, parent=0)
    a = kv.append(1, [1, 2, 3, 4, 5, 6, 7, 8], reserve=4)  # 37 + 12 = 49 tokens
    assert a == KVCacheBlocks((0, 1, 3, 4), (3, 4), ((2, 3, 5),), 0)
    b = kv.append(2, [1, 2, 3], reserve=2)  # 37 + 5 = 42: fits in the copied tail
    assert b == KVCacheBlocks((0, 1, 5), (5,), ((2, 5, 5),), 0)
    assert refcounts(kv)[:6] == [3, 3, 1, 1, 1, 1]
    # The prefix owns its tail exclusively again: it appends in place, no copy.
    c = kv.append(0, [1037, 1038])
    assert c == KVCacheBlocks((0, 1, 2), (), (), 0)
    assert kv.slots(1, 36, 1) + kv.slots(1, 47, 2) == [3 * 16 + 4, 3 * 16 + 15, 4 * 16 + 0]
    assert kv.writable_blocks(1) == [3, 4] and kv.writable_blocks(0) == [2]
    kv.check_invariants()


def test_parent_appending_to_shared_tail_also_copies() -> None:
    kv = with_prefix()
    kv.create(1, parent=0)
    got = kv.append(0, [7])
    assert got == KVCacheBlocks((0, 1, 3), (3,), ((2, 3, 5),), 0)
    assert kv.block_table(1) == [0, 1, 2] and refcounts(kv)[:4] == [2, 2, 1, 1]


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 0, 2)])
def test_free_in_any_order_returns_every_block(order: tuple[int, ...]) -> None:
    kv = with_prefix()
    kv.create(1, parent=0)
    kv.create(2, parent=0)
    kv.append(1, [1, 2, 3, 4, 5, 6, 7, 8], reserve=4)  # blocks 3, 4
    kv.append(2, [1, 2, 3], reserve=2)  # block 5
    for seq in order:
        kv.free(seq)
        kv.check_invariants()
    # Blocks 0 and 1 are full with known keys: cached-free, released tail first.
    assert kv.pool.cached_free_block_ids() == [1, 0]
    assert kv.pool.free_block_ids() == list(range(2, 16))
    assert kv.usage() == KVUsage(0, 2, 14, 16, 0, 6, 600)
    with pytest.raises(ValueError):
        kv.free(order[0])
    with pytest.raises(KeyError):
        kv.free(order[0])


def test_free_partial_order_keeps_shared_blocks() -> None:
    kv = with_prefix()
    kv.create(1, parent=0)
    kv.append(1, [1, 2], reserve=3)  # CoW -> block 3
    kv.free(0)  # the prefix goes first; the child keeps blocks 0, 1 alive
    assert refcounts(kv)[:4] == [1, 1, 0, 1]
    assert kv.pool.free_block_ids()[:2] == [2, 4]
    kv.free(1)
    assert kv.usage().blocks_used == 0


def test_identical_suffix_under_same_prefix_hits() -> None:
    kv = with_prefix()
    kv.create(1, parent=0)
    kv.create(2, parent=0)
    kv.create(3, parent=0)
    suffix = PROMPT + list(range(50, 66)) + [70, 71, 72]  # tail(11) + full block(16) + 3
    a = kv.append(1, suffix, reserve=2)
    assert a == KVCacheBlocks((0, 1, 3, 4, 5), (3, 4, 5), ((2, 3, 5),), 0)
    b = kv.append(2, suffix, reserve=2)
    # Tail completion and the next full block hit: no copy; only the partial block is new.
    assert b == KVCacheBlocks((0, 1, 3, 4, 6), (6,), (), 27)
    assert refcounts(kv)[:7] == [4, 4, 2, 2, 2, 1, 1]
    # A suffix that diverges in its second block hits only the first.
    c = kv.append(3, PROMPT + [99] * 16)
    assert c == KVCacheBlocks((0, 1, 3, 7), (7,), (), 11)
    kv.check_invariants()


def test_different_prefix_misses_same_prefix_keys_hit() -> None:
    kv = with_prefix()
    kv.create(1, parent=0)
    kv.append(1, PROMPT)  # registers the completed tail (block 3)
    kv.create(10)
    other = kv.append(10, list(range(2000, 2037)))
    assert other == KVCacheBlocks((4, 5, 6), (4, 5, 6), (), 0)
    kv.create(11, parent=10)
    miss = kv.append(11, PROMPT)
    assert miss is not None and miss.num_cached_tokens == 0 and miss.copies == ((6, 7, 5),)
    # A second observation with identical keys reuses the full prefix blocks.
    kv.create(20)
    same = kv.append(20, PREFIX)
    assert same == KVCacheBlocks((0, 1, 8), (8,), (), 32)


def test_completed_tail_hashes_its_earlier_keys_too() -> None:
    kv = KVManager(8, 4, 1)
    kv.create(0)
    kv.append(0, [1, 2])
    kv.append(0, [3, 4])  # completes block 0 in place and registers (1, 2, 3, 4)
    kv.create(1)
    kv.append(1, [9, 9])
    miss = kv.append(1, [3, 4])
    assert miss == KVCacheBlocks((1,), (), (), 0)
    kv.create(2)
    kv.append(2, [1, 2])  # block 2
    hit = kv.append(2, [3, 4])  # the exclusive partial tail is swapped for the cached block
    assert hit == KVCacheBlocks((0,), (), (), 2)
    assert kv.pool.refcount(0) == 2 and kv.pool.free_block_ids()[0] == 2
    kv.check_invariants()


def test_reserved_slots_end_the_hash_chain() -> None:
    kv = KVManager(8, 4, 1)
    kv.create(0)
    kv.append(0, [1, 2], reserve=2)
    kv.append(0, [3, 4, 5, 6])  # after unknown keys: never hashed
    assert [kv.pool.block_hash(b) for b in kv.block_table(0)] == [None, None]
    kv.create(1)
    got = kv.append(1, [1, 2, 9, 9, 3, 4, 5, 6])
    assert got is not None and got.num_cached_tokens == 0


def test_uncacheable_append_keeps_chain_but_registers_nothing() -> None:
    kv = KVManager(16, BS, 1)
    kv.create(0)
    kv.append(0, PREFIX, cacheable=False)
    assert all(kv.pool.block_hash(b) is None for b in kv.block_table(0))
    kv.create(1, parent=0)
    kv.create(2, parent=0)
    kv.append(1, PROMPT)
    got = kv.append(2, PROMPT)
    assert got is not None and got.num_cached_tokens == 11


def test_prefix_cache_disabled() -> None:
    kv = KVManager(16, BS, 1, enable_prefix_cache=False)
    for seq in (0, 1):
        kv.create(seq)
        got = kv.append(seq, PREFIX)
        assert got is not None and got.num_cached_tokens == 0
    assert kv.block_table(1) == [3, 4, 5]
    kv.free(0)
    assert kv.usage().blocks_cached == 0


def test_eviction_when_pool_is_short_and_atomic_failure() -> None:
    kv = KVManager(5, 4, 10)
    kv.create(0)
    kv.append(0, list(range(12)))  # blocks 0, 1, 2, all registered
    kv.free(0)
    assert kv.pool.cached_free_block_ids() == [2, 1, 0]
    kv.create(1)
    got = kv.append(1, list(range(100, 112)))
    assert got is not None and got.new_block_ids == (3, 4, 2)  # free first, then evict block 2
    assert kv.pool.cached_free_block_ids() == [1, 0]
    # Re-appending the old keys would hit 0 and 1 (reviving them) but needs one more block.
    kv.create(2)
    before = (refcounts(kv), kv.pool.cached_free_block_ids(), kv.usage())
    assert kv.append(2, list(range(12))) is None
    assert (refcounts(kv), kv.pool.cached_free_block_ids(), kv.usage()) == before
    assert kv.length(2) == 0 and kv.block_table(2) == []
    assert kv.can_fit(2) and not kv.can_fit(3)
    # Prefix of it still hits.
    got = kv.append(2, list(range(8)))
    assert got == KVCacheBlocks((0, 1), (), (), 8)
    kv.check_invariants()


def test_errors() -> None:
    kv = KVManager(4, 4, 1)
    kv.create(0)
    with pytest.raises(ValueError):
        kv.create(0)
    with pytest.raises(UnknownSequenceError):
        kv.create(1, parent=7)
    with pytest.raises(ValueError):
        kv.append(0, [1], reserve=-1)
    with pytest.raises(ValueError):
        kv.slots(0, 0, 1)
    assert kv.append(0, []) == KVCacheBlocks((), (), (), 0)
    assert kv.append(0, [], reserve=17) is None
    with pytest.raises(UnknownSequenceError, match="unknown sequence 9"):
        kv.length(9)


# ---- property test: random programs against a simulated pool -----------------------------------
# (op, pick, keys, reserve, flag); a tiny key alphabet and small blocks make cache hits common.
OPS = st.lists(
    st.tuples(st.sampled_from(["create", "fork", "fork", "append", "append", "append", "free"]),
              st.integers(0, 9), st.lists(st.integers(0, 1), max_size=6), st.integers(0, 3),
              st.booleans()),
    min_size=12, max_size=50,
)


def snapshot(kv: KVManager, live: dict[int, list]) -> tuple:
    return (refcounts(kv), kv.pool.free_block_ids(), kv.pool.cached_free_block_ids(),
            {s: (kv.block_table(s), kv.length(s)) for s in live}, kv.usage())


@settings(max_examples=250, deadline=None)
@given(ops=OPS, block_size=st.sampled_from([1, 2, 4, 4]), num_blocks=st.integers(6, 32))
def test_random_programs_keep_contents_and_accounting(
        ops: list[tuple], block_size: int, num_blocks: int) -> None:
    kv = KVManager(num_blocks, block_size, 8)
    pool_data: list[object] = [None] * (num_blocks * block_size)  # what the runner would write
    live: dict[int, list] = {}  # seq -> logical contents: (token, hash of the history to it)
    next_id = 0
    for op in [("create", 0, [], 0, False)] * 2 + ops:
        if op[0] in ("create", "fork"):
            parent = sorted(live)[op[1] % len(live)] if live and op[0] == "fork" else None
            kv.create(next_id, parent=parent)
            live[next_id] = list(live[parent]) if parent is not None else []
            next_id += 1
        elif op[0] == "free" and live:
            seq = sorted(live)[op[1] % len(live)]
            kv.free(seq)
            del live[seq]
        elif op[0] == "append" and live:
            _, pick, keys, reserve, cacheable = op
            reserve = reserve if reserve < 3 else 0  # mostly keyed appends: the chain continues
            seq = sorted(live)[pick % len(live)]
            before = snapshot(kv, live)
            old = kv.length(seq)
            got = kv.append(seq, keys, reserve=reserve, cacheable=cacheable)
            if got is None:
                assert snapshot(kv, live) == before
                continue
            toks = keys + [("gen", seq, p) for p in range(old + len(keys), old + len(keys) + reserve)]
            # Real K/V at a position depend on everything before it: model that, so a cache hit
            # with equal block keys under a different history shows up as wrong contents.
            history = [tok for tok, _ in live[seq]]
            new = [(t, hash(tuple(history + toks[:i + 1]))) for i, t in enumerate(toks)]
            assert list(got.block_ids) == kv.block_table(seq)
            for src, dst, n in got.copies:  # the runner copies first ...
                assert dst in got.new_block_ids and n == old % block_size
                pool_data[dst * block_size:dst * block_size + n] = \
                    pool_data[src * block_size:src * block_size + n]
            slots = kv.slots(seq, old, len(new))
            for i, slot in enumerate(slots):
                block = slot // block_size
                if i < got.num_cached_tokens:  # ... skips what the cache already holds ...
                    assert kv.pool.block_hash(block) is not None
                    assert pool_data[slot] == new[i]
                else:  # ... and writes only blocks it owns alone
                    assert kv.pool.refcount(block) == 1
                    pool_data[slot] = new[i]
            live[seq].extend(new)
        kv.check_invariants()
        for seq, content in live.items():  # nobody's contents were clobbered
            assert [pool_data[s] for s in kv.slots(seq, 0, len(content))] == content
    for seq in list(live):
        kv.free(seq)
    kv.check_invariants()
    u = kv.usage()
    assert u.blocks_used == 0 and u.blocks_free + u.blocks_cached == num_blocks
