"""KVManager: per-sequence block tables over a BlockPool, with fork, copy-on-write and a prefix
cache. Pure bookkeeping (no torch): the ModelRunner owns the tensors and performs the copies.

Sequences are keyed by an int seq_id: an observation prefix, a language request (a fork of its
frame's prefix plus its suffix), an action scratch sequence. Logical position p of a sequence lives
at slot `table[p // block_size] * block_size + p % block_size`.

Prefix cache: a full block whose keys are all known gets the chained hash
`hash((parent_hash, tuple(block_keys)))` (the first block's parent is None), so a block hash
identifies the whole key history up to its end. The pool confirms a hit by comparing the stored
`(parent_hash, block_keys)` pair, not only the hash. Reserved (to-be-generated) slots have no keys:
the chain stops at the first block that contains one.

Blocks are registered in the cache when an append fills them, i.e. BEFORE the runner writes their
K/V. A later append in the same frame may hit them, so the runner must store a call's K/V before
any attention of that call reads the pool (store-then-attend per layer) and must run requests in
admission order when it splits work across calls.

Recurrent state (a cache spec with a RecurrentState, ``state_slots`` > 0): every sequence also
holds one state slot (kv/state_slots.py), taken at its first append, shared by a fork and copied
on the first append of a sharer (KVCacheBlocks.state_copy), freed with the sequence. An append
is atomic over blocks and its slot alike. The prefix cache must be off then (the engine turns it
off): a hit skips tokens, and the state would not advance over them.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oxygen_ros.engine.core.kv.block_pool import BlockPool
from oxygen_ros.engine.core.kv.state_slots import StateSlots


class UnknownSequenceError(KeyError, ValueError):
    """A seq_id that is not (or no longer) live. Catchable as KeyError or ValueError."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "unknown sequence"


@dataclass(frozen=True)
class KVCacheBlocks:
    """Result of an append: the whole table afterwards, what the runner must prepare."""

    block_ids: tuple[int, ...]  # the sequence's full block table after the append
    new_block_ids: tuple[int, ...]  # freshly allocated blocks (CoW targets included, hits not)
    copies: tuple[tuple[int, int, int], ...]  # (src, dst, num_tokens): copy before writing
    num_cached_tokens: int  # leading appended tokens already in the cache (skip computing them)
    state_slot: int | None = None  # the sequence's recurrent-state slot (None: no state)
    state_copy: tuple[int, int] | None = None  # (src, dst) slot: copy before writing


@dataclass(frozen=True)
class KVUsage:
    blocks_used: int
    blocks_cached: int  # refcount 0 but holding reusable content (evictable)
    blocks_free: int
    blocks_total: int
    bytes_used: int
    peak_blocks: int
    peak_bytes: int
    # recurrent-state slots (0 when the cache spec has none); bytes_used / peak_bytes count them
    state_slots_used: int = 0
    state_slots_total: int = 0
    peak_state_slots: int = 0


@dataclass(slots=True)
class _Seq:
    table: list[int]
    length: int = 0
    known: bool = True  # keys of all positions [0, length) known, so the hash chain continues
    last_hash: int | None = None  # hash of the last full block (parent of the next one)
    tail_keys: tuple[int, ...] = ()  # keys in the partial last block (meaningful if known)
    slot: int | None = None  # recurrent-state slot (taken at the first append)


@dataclass(slots=True)
class _Seg:
    """One block touched by an append (planning step, nothing mutated yet)."""

    start: int  # index into the appended tokens
    take: int  # appended tokens that land in this block
    action: str  # "hit" | "inplace" | "cow" | "alloc"
    block: int | None = None  # the hit block, or the existing tail for inplace/cow
    hkeys: tuple | None = None  # (parent_hash, block_keys) when full and keys known
    block_hash: int | None = None


class KVManager:
    def __init__(self, num_blocks: int, block_size: int, bytes_per_block: int,
                 enable_prefix_cache: bool = True, state_slots: int = 0,
                 bytes_per_slot: int = 0) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be > 0, got {block_size}")
        if bytes_per_block < 0:
            raise ValueError(f"bytes_per_block must be >= 0, got {bytes_per_block}")
        self.pool = BlockPool(num_blocks)
        self.block_size = block_size
        self.bytes_per_block = bytes_per_block
        self.enable_prefix_cache = enable_prefix_cache
        self._seqs: dict[int, _Seq] = {}
        if state_slots and enable_prefix_cache:
            raise ValueError("recurrent state slots need the prefix cache off (a hit would skip "
                             "tokens the state must see)")
        self.state = StateSlots(state_slots) if state_slots else None
        self.bytes_per_slot = bytes_per_slot

    # ---- sequences --------------------------------------------------------------------------
    def create(self, seq_id: int, parent: int | None = None) -> None:
        """A new empty sequence, or a read-only share of ALL of parent's blocks (no allocation)."""
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id} already exists")
        if parent is None:
            self._seqs[seq_id] = _Seq(table=[], known=self.enable_prefix_cache)
            return
        p = self._get(parent)
        self.pool.incref(p.table)
        if p.slot is not None:
            self.state.incref(p.slot)  # read-only share of the parent's state
        self._seqs[seq_id] = _Seq(list(p.table), p.length, p.known, p.last_hash, p.tail_keys,
                                  p.slot)

    def free(self, seq_id: int) -> None:
        s = self._get(seq_id)
        # Reversed: the tail of a chain is evicted before its head (a chain is useless headless).
        self.pool.decref(reversed(s.table))
        if s.slot is not None:
            self.state.decref([s.slot])
        del self._seqs[seq_id]

    def __contains__(self, seq_id: object) -> bool:
        return seq_id in self._seqs

    @property
    def num_sequences(self) -> int:
        return len(self._seqs)

    # ---- append -----------------------------------------------------------------------------
    def append(self, seq_id: int, token_keys: Sequence[int], reserve: int = 0,
               cacheable: bool = True) -> KVCacheBlocks | None:
        """Extend by len(token_keys) keyed tokens plus `reserve` un-keyed slots. Atomic: None and
        no change when the blocks do not fit. cacheable=False: no lookups or registration (the
        hash chain is still tracked, so later cacheable appends can hit)."""
        if reserve < 0:
            raise ValueError(f"reserve must be >= 0, got {reserve}")
        s = self._get(seq_id)
        keys = tuple(token_keys)
        total = len(keys) + reserve
        if total == 0:
            return KVCacheBlocks(tuple(s.table), (), (), 0, s.slot)
        # a state slot of its own: none yet, or one shared with a fork (copy on write)
        new_slot = self.state is not None and (s.slot is None or self.state.refcount(s.slot) > 1)
        if new_slot and self.state.num_free < 1:
            return None
        segs, last_hash, tail_keys, known = self._plan(s, keys, total, cacheable)

        # Fit check before touching anything. A hit on a cached-free block takes it out of the
        # evictable set, so it is no longer available for allocation.
        hits = [g.block for g in segs if g.action == "hit"]
        need = len(segs) - len(hits) - sum(1 for g in segs if g.action == "inplace")
        revived = len({b for b in hits if self.pool.refcount(b) == 0}) if hits else 0
        if self.pool.num_available - revived < need:
            return None

        if hits:
            self.pool.incref(hits)  # before allocate, so allocate cannot evict them
        fresh = self.pool.allocate(need)
        assert fresh is not None  # checked above
        fresh_iter = iter(fresh)
        copies: list[tuple[int, int, int]] = []
        released: list[int] = []
        off = s.length % self.block_size
        cached_tokens = 0
        for i, g in enumerate(segs):
            is_tail = i == 0 and off > 0
            if g.action == "hit":
                cached_tokens += g.take
                target = g.block
            elif g.action == "inplace":
                target = g.block
            else:
                target = next(fresh_iter)
                if g.action == "cow":
                    copies.append((g.block, target, off))
            if is_tail:
                if target != s.table[-1]:
                    released.append(s.table[-1])
                s.table[-1] = target
            else:
                s.table.append(target)
            if g.action != "hit" and g.hkeys is not None and cacheable and self.enable_prefix_cache:
                self.pool.register(target, g.block_hash, g.hkeys)
        if released:
            self.pool.decref(released)  # after allocate: a CoW source is never its own target
        state_copy = None
        if new_slot:
            slot = self.state.allocate()
            assert slot is not None  # checked above
            if s.slot is not None:
                state_copy = (s.slot, slot)
                self.state.decref([s.slot])  # still held by the sharer(s): refcount was > 1
            s.slot = slot
        s.length += total
        s.last_hash, s.tail_keys, s.known = last_hash, tail_keys, known
        return KVCacheBlocks(tuple(s.table), tuple(fresh), tuple(copies), cached_tokens, s.slot,
                             state_copy)

    def _plan(self, s: _Seq, keys: tuple[int, ...], total: int, cacheable: bool
              ) -> tuple[list[_Seg], int | None, tuple[int, ...], bool]:
        """Blocks the append touches, with hashes and hits; also the chain state afterwards."""
        bs = self.block_size
        off = s.length % bs
        track = self.enable_prefix_cache and s.known
        hitting = track and cacheable
        last_hash, tail_keys = s.last_hash, s.tail_keys
        segs: list[_Seg] = []
        idx = 0
        while idx < total:
            take = min(bs - (off if idx == 0 else 0), total - idx)
            first_off = off if idx == 0 else 0
            full = first_off + take == bs
            track = track and idx + take <= len(keys)  # a reserved slot ends the chain
            g = _Seg(idx, take, "alloc")
            if track:
                block_keys = (tail_keys if first_off else ()) + keys[idx:idx + take]
                if full:
                    g.hkeys = (last_hash, block_keys)
                    g.block_hash = hash(g.hkeys)
                    last_hash, tail_keys = g.block_hash, ()
                else:
                    tail_keys = block_keys
            hit = self.pool.lookup(g.block_hash, g.hkeys) if hitting and g.hkeys else None
            hitting = hit is not None  # hits only while contiguous from the append's start
            if hit is not None:
                g.action, g.block = "hit", hit
            elif first_off:
                tail = s.table[-1]
                g.action = "inplace" if self.pool.refcount(tail) == 1 else "cow"
                g.block = tail
            segs.append(g)
            idx += take
        return segs, last_hash, tail_keys, track

    # ---- queries ----------------------------------------------------------------------------
    def slots(self, seq_id: int, start: int, count: int) -> list[int]:
        s = self._get(seq_id)
        if start < 0 or count < 0 or start + count > s.length:
            raise ValueError(
                f"positions [{start}, {start + count}) outside sequence {seq_id} of length {s.length}"
            )
        bs, table = self.block_size, s.table
        return [table[p // bs] * bs + p % bs for p in range(start, start + count)]

    def block_table(self, seq_id: int) -> list[int]:
        return list(self._get(seq_id).table)

    def length(self, seq_id: int) -> int:
        return self._get(seq_id).length

    def writable_blocks(self, seq_id: int) -> list[int]:
        """Blocks this sequence may write: exclusively owned and not in the prefix cache."""
        pool = self.pool
        return [b for b in self._get(seq_id).table
                if pool.refcount(b) == 1 and pool.block_hash(b) is None]

    def state_slot(self, seq_id: int) -> int | None:
        return self._get(seq_id).slot

    def can_fit(self, num_new_blocks: int, num_new_slots: int = 0) -> bool:
        slots_ok = num_new_slots <= 0 or (self.state is not None
                                          and self.state.num_free >= num_new_slots)
        return self.pool.num_available >= num_new_blocks and slots_ok

    def usage(self) -> KVUsage:
        p, st = self.pool, self.state
        used, total, peak = (st.num_used, st.num_slots, st.peak_used) if st else (0, 0, 0)
        return KVUsage(
            blocks_used=p.num_used, blocks_cached=p.num_cached_free, blocks_free=p.num_free,
            blocks_total=p.num_blocks,
            bytes_used=p.num_used * self.bytes_per_block + used * self.bytes_per_slot,
            peak_blocks=p.peak_used,
            peak_bytes=p.peak_used * self.bytes_per_block + peak * self.bytes_per_slot,
            state_slots_used=used, state_slots_total=total, peak_state_slots=peak,
        )

    def reset_peak(self) -> None:
        self.pool.reset_peak()
        if self.state is not None:
            self.state.reset_peak()

    def check_invariants(self) -> None:
        """Raise AssertionError if refcounts, tables or counters disagree (tests, debugging)."""
        p, bs = self.pool, self.block_size
        holders = [0] * p.num_blocks
        for sid, s in self._seqs.items():
            if len(s.table) != -(-s.length // bs):
                raise AssertionError(f"seq {sid}: {len(s.table)} blocks for {s.length} tokens")
            if len(set(s.table)) != len(s.table):
                raise AssertionError(f"seq {sid}: a block appears twice in {s.table}")
            for b in s.table:
                holders[b] += 1
            if s.length % bs and p.block_hash(s.table[-1]) is not None:
                raise AssertionError(f"seq {sid}: partial tail block {s.table[-1]} is cached")
        for b in range(p.num_blocks):
            if p.refcount(b) != holders[b]:
                raise AssertionError(f"block {b}: refcount {p.refcount(b)} != {holders[b]} holders")
        used = sum(1 for h in holders if h)
        if used != p.num_used or used + p.num_free + p.num_cached_free != p.num_blocks:
            raise AssertionError(
                f"counters: used {p.num_used} (actual {used}), free {p.num_free}, "
                f"cached {p.num_cached_free}, total {p.num_blocks}"
            )
        if self.state is not None:
            slot_holders = [0] * self.state.num_slots
            for sid, s in self._seqs.items():
                if s.slot is not None:
                    slot_holders[s.slot] += 1
                elif s.length:
                    raise AssertionError(f"seq {sid}: {s.length} tokens and no state slot")
            for slot, n in enumerate(slot_holders):
                if self.state.refcount(slot) != n:
                    raise AssertionError(f"state slot {slot}: refcount "
                                         f"{self.state.refcount(slot)} != {n} holders")
            if sum(1 for n in slot_holders if n) + self.state.num_free != self.state.num_slots:
                raise AssertionError("state slots: used + free != total")

    def _get(self, seq_id: int) -> _Seq:
        try:
            return self._seqs[seq_id]
        except KeyError:
            raise UnknownSequenceError(f"unknown sequence {seq_id}") from None
