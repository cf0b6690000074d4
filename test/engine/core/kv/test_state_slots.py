"""Recurrent state slots in the unified pool (kv/state_slots.py, KVManager, Scheduler): a
sequence takes a slot at its first append, a fork shares it read-only, a sharer's first append
copies it into a slot of its own (the last holder writes in place), freeing returns it;
allocation is atomic over blocks and slots and returns None when either does not fit;
admission and relief count slots as they count blocks and never wedge. Exact slot ids."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oxygen_ros.engine.core.kv import KVManager
from oxygen_ros.engine.core.kv.state_slots import StateSlots
from oxygen_ros.engine.core.request import Request, RequestKind, RequestStatus, Source
from oxygen_ros.engine.core.scheduler import Scheduler


def manager(slots: int = 3, blocks: int = 16) -> KVManager:
    return KVManager(blocks, 4, 100, enable_prefix_cache=False, state_slots=slots,
                     bytes_per_slot=1000)


def test_fork_shares_the_snapshot_and_the_first_write_copies_it():
    kv = manager()
    kv.create(1)
    got = kv.append(1, list(range(5)))  # a frame's prefix: slot 0, nothing to copy
    assert (got.state_slot, got.state_copy) == (0, None)
    kv.create(2, parent=1)
    kv.create(3, parent=1)  # two requests born from the frame share its snapshot
    assert kv.state.refcount(0) == 3 and kv.usage().state_slots_used == 1
    got = kv.append(2, [7], reserve=2)  # request 2's first write: its own copy
    assert (got.state_slot, got.state_copy) == (1, (0, 1))
    kv.free(1)  # the frame releases its prefix; request 3 still holds the snapshot
    assert kv.state.refcount(0) == 1
    got = kv.append(3, [8], reserve=2)  # the last holder writes the snapshot in place
    assert (got.state_slot, got.state_copy) == (0, None)
    kv.check_invariants()
    u = kv.usage()
    assert (u.state_slots_used, u.state_slots_total, u.peak_state_slots) == (2, 3, 2)
    assert u.bytes_used == u.blocks_used * 100 + 2 * 1000
    kv.free(2)
    kv.free(3)
    assert kv.state.free_ids() == [0, 1, 2] and kv.usage().bytes_used == 0
    kv.check_invariants()


def test_an_append_that_needs_a_slot_when_none_is_free_changes_nothing():
    kv = manager(slots=2)
    for seq in (1, 2):
        kv.create(seq)
        assert kv.append(seq, [seq] * 3).state_slot == seq - 1
    kv.create(3)
    before = kv.usage()
    assert kv.append(3, [1, 2, 3]) is None  # blocks would fit, no slot does
    assert kv.usage() == before and kv.length(3) == 0 and kv.state_slot(3) is None
    kv.create(4, parent=1)
    assert kv.append(4, [9]) is None  # a copy-on-write needs a slot too
    assert kv.state_slot(4) == 0 and kv.length(4) == 3
    assert not kv.can_fit(0, 1) and kv.can_fit(1)
    kv.free(2)
    assert kv.append(3, [1, 2, 3]).state_slot == 1  # the slot freed is the one taken
    kv.check_invariants()


def test_state_slots_need_the_prefix_cache_off():
    with pytest.raises(ValueError, match="prefix cache off"):
        KVManager(8, 4, 0, enable_prefix_cache=True, state_slots=2)
    with pytest.raises(ValueError):
        StateSlots(0)


# -- a property over random operation sequences ----------------------------------------------
OPS = st.lists(st.tuples(st.sampled_from(["root", "fork", "append", "free"]),
                         st.integers(0, 7), st.integers(0, 6)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_slot_invariants_hold_over_any_operation_sequence(ops):
    """Whatever the order: refcounts equal holders, used + free = total, a sequence with tokens
    holds a slot, a sequence that has just written owns its slot alone, a refused append
    changes nothing, and freeing everything returns every slot."""
    kv = manager(slots=3, blocks=12)
    live: list[int] = []
    next_id = 0
    for op, pick, n in ops:
        if op == "root" or (op != "root" and not live):
            kv.create(next_id)
            live.append(next_id)
            next_id += 1
            continue
        seq = live[pick % len(live)]
        if op == "fork":
            kv.create(next_id, parent=seq)
            live.append(next_id)
            next_id += 1
        elif op == "free":
            kv.free(seq)
            live.remove(seq)
        else:
            before = (kv.usage(), kv.block_table(seq), kv.state_slot(seq), kv.length(seq))
            shared = kv.state_slot(seq) is not None and kv.state.refcount(kv.state_slot(seq)) > 1
            got = kv.append(seq, list(range(n)), reserve=1)
            if got is None:
                assert (kv.usage(), kv.block_table(seq), kv.state_slot(seq),
                        kv.length(seq)) == before
                assert kv.state.num_free == 0 or kv.pool.num_available < n + 1
            else:
                slot = got.state_slot
                assert slot == kv.state_slot(seq) and kv.state.refcount(slot) == 1
                assert (got.state_copy is not None) == shared
                if got.state_copy is not None:
                    assert got.state_copy == (before[2], slot) and before[2] != slot
        kv.check_invariants()
        assert kv.state.num_used + kv.state.num_free == 3
    for seq in live:
        kv.free(seq)
    assert kv.state.free_ids() == [0, 1, 2] and kv.usage().blocks_used == 0


# -- admission ---------------------------------------------------------------------------------
def _source() -> Source:
    return Source(0, None, (1, 2, 3), 5, 11)


def _req(i: int, seq: int, prefix: int | None) -> Request:
    return Request(i, RequestKind.QUESTION, "q", [40 + i], max_new_tokens=2, seq_id=seq,
                   prefix_seq_id=prefix, source=_source(), prefix_len=5)


def test_admission_counts_slots_and_never_wedges():
    """4 slots, 1 kept for the next frame's prefix: three requests forked from a frame's
    prefix share its snapshot (slot 0); the first two admitted copy it (slots 1, 2), the third
    waits (one slot left, kept for the next frame); while the next frame holds that slot
    nothing is admitted, nothing wedges; as requests finish the third is admitted and every
    slot comes back."""
    kv = manager(slots=4, blocks=64)
    sched = Scheduler(kv, max_active_requests=8, reserved_slots=1)
    kv.create(100)
    kv.append(100, [1, 2, 3, 4, 5])  # frame 0's prefix: slot 0
    for i in range(3):
        sched.add(_req(i, 200 + i, prefix=100))
    assert kv.state.refcount(0) == 4
    kv.free(100)  # the frame releases its prefix after the births
    first = sched.admit(0)
    assert [(a.request.id, a.blocks.state_slot, a.blocks.state_copy) for a in first] == \
        [(0, 1, (0, 1)), (1, 2, (0, 2))]
    # request 2 held the snapshot alone: admitting it would write slot 0 in place, but two
    # running + its own + the next frame's would need 4 slots beside it: it waits
    assert [r.id for r in sched.waiting] == [2] and kv.state.free_ids() == [3]
    assert sched.relieve() == []  # the next frame's slot is free: nothing to preempt
    kv.create(101)  # frame 1 takes the kept slot
    assert kv.append(101, [6, 7, 8, 9, 10]).state_slot == 3
    assert sched.admit(1) == []  # no slot beside it: request 2 waits, nothing wedges
    kv.free(101)
    done = []
    for frame in range(2, 8):
        for a in sched.admit(frame):
            assert a.blocks.state_slot is not None
        running = sched.running
        done += sched.update(frame, {r.id: [5, 5] for r in running}, {}, eos_token_id=None)
        kv.check_invariants()
    assert sorted(r.id for r in done) == [0, 1, 2] and not sched.num_unfinished
    assert all(r.status is RequestStatus.FINISHED for r in done)
    assert kv.state.free_ids() == [0, 1, 2, 3]


def test_relief_preempts_waiting_snapshots_for_the_next_frame():
    """Every slot held by waiting requests' snapshots (two frames' worth) and none free: relief
    preempts the newest until the next frame's prefix fits; the preempted request is
    prefilled again in a fresh slot when admitted; abort returns a running request's slot."""
    kv = manager(slots=2, blocks=64)
    sched = Scheduler(kv, max_active_requests=1, reserved_slots=1)
    for frame, seq in ((0, 100), (1, 101)):
        kv.create(seq)
        kv.append(seq, [1, 2, 3, 4, 5])
        sched.add(_req(frame, 200 + frame, prefix=seq))
        kv.free(seq)
    assert kv.state.num_free == 0
    preempted = sched.relieve()
    assert [r.id for r in preempted] == [1] and preempted[0].status is RequestStatus.PREEMPTED
    assert kv.state.free_ids() == [1]
    admitted = sched.admit(2, reserve=0)  # request 0: the last holder of slot 0, in place
    assert [(a.request.id, a.blocks.state_slot, a.blocks.state_copy) for a in admitted] == \
        [(0, 0, None)]
    sched.abort(0)
    admitted = sched.admit(3, reserve=0)  # request 1 prefilled again, in the lowest free slot
    assert [(a.request.id, a.blocks.state_slot, a.prefill is not None) for a in admitted] == \
        [(1, 0, True)]
    kv.check_invariants()
