"""Scheduler: admission order, KV-bounded admission, per-frame budgets k, EOS, caps, aborts.

A frame here is what the engine's oxygen mode does with the scheduler (engine/core/frame_ops.py):
admit, decode the running batch by k, update."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from oxygen_ros.engine.core.kv import KVCacheBlocks, KVManager
from oxygen_ros.engine.core.request import Request, RequestKind, RequestStatus, Source
from oxygen_ros.engine.core.scheduler import Scheduler

PREFIX_SEQ = 1000
EOS = 1


def setup(num_blocks: int = 64, max_active: int = 8, block_size: int = 4
          ) -> tuple[KVManager, Scheduler]:
    kv = KVManager(num_blocks, block_size, bytes_per_block=1)
    kv.create(PREFIX_SEQ)
    kv.append(PREFIX_SEQ, list(range(500, 506)))  # 6-token observation prefix: 2 blocks
    return kv, Scheduler(kv, max_active)


def req(rid: int, n: int = 12, priority: int = 0, prompt: list[int] | None = None) -> Request:
    return Request(rid, RequestKind.QUESTION, f"q{rid}", prompt if prompt is not None else [7, 8, 9],
                   priority=priority, max_new_tokens=n, prefix_seq_id=PREFIX_SEQ, seq_id=rid)


@dataclass(frozen=True)
class FramePlan:
    """What one frame asked of the scheduler: the admissions, then the decode batch."""

    admitted: tuple[Request, ...]
    admitted_blocks: tuple[KVCacheBlocks, ...]
    decode: tuple[Request, ...]  # all running requests (admitted included), admission order
    num_steps: int  # k when there is anything to decode, else 0
    num_waiting: int


def plan(s: Scheduler, frame: int, k: int) -> FramePlan:
    admissions = s.admit(frame)
    decode = s.running
    return FramePlan(tuple(a.request for a in admissions), tuple(a.blocks for a in admissions),
                     decode, k if decode else 0, len(s.waiting))


def run_frame(s: Scheduler, frame: int, k: int, eos_at: dict[int, int] | None = None
              ) -> tuple[FramePlan, list[Request]]:
    """A fake runner: request r's i-th token is 100 + i, or EOS at position eos_at[r]."""
    out = plan(s, frame, k)
    tokens: dict[int, list[int]] = {}
    for r in out.decode:
        got = [100 + r.num_generated + i for i in range(min(out.num_steps, r.remaining))]
        if eos_at and r.id in eos_at:
            got = [EOS if r.num_generated + i == eos_at[r.id] else t for i, t in enumerate(got)]
        tokens[r.id] = got
    margins = {rid: [0.5] * len(t) for rid, t in tokens.items()}
    return out, s.update(frame, tokens, margins, EOS)


def ids(rs: tuple[Request, ...] | list[Request]) -> list[int]:
    return [r.id for r in rs]


def test_priority_then_fifo() -> None:
    _, s = setup(max_active=2)
    for rid, prio in [(0, 0), (1, 1), (2, 0), (3, 1), (4, 2)]:
        s.add(req(rid, n=4, priority=prio))
    assert ids(s.waiting) == [4, 1, 3, 0, 2]
    out, _ = run_frame(s, 0, k=2)
    assert ids(out.admitted) == [4, 1] and ids(out.decode) == [4, 1] and out.num_waiting == 3
    out, done = run_frame(s, 1, k=2)
    assert out.admitted == () and ids(done) == [4, 1]
    out, _ = run_frame(s, 2, k=2)
    assert ids(out.admitted) == [3, 0]
    run_frame(s, 3, k=2)
    out, done = run_frame(s, 4, k=2)
    assert ids(out.admitted) == [2] and ids(done) == []
    assert s.num_unfinished == 1


@pytest.mark.parametrize("n,k,frames,per_frame", [
    (10, 4, 3, [4, 4, 2]),  # k does not divide N
    (3, 8, 1, [3]),  # k > N
    (1, 4, 1, [1]),  # N == 1
    (12, 4, 3, [4, 4, 4]),
])
def test_tokens_per_frame(n: int, k: int, frames: int, per_frame: list[int]) -> None:
    kv, s = setup()
    r = req(0, n=n)
    s.add(r)
    got = []
    for f in range(10, 10 + frames):
        before = r.num_generated
        out, done = run_frame(s, f, k)
        assert out.num_steps == k
        got.append(r.num_generated - before)
    assert got == per_frame and done == [r]
    assert r.status is RequestStatus.FINISHED and r.finish_reason == "length"
    assert r.output_ids == [100 + i for i in range(n)] and r.margins == [0.5] * n
    assert r.admitted_frame == 10 and r.finished_frame == 10 + frames - 1
    assert r.frames_spanned == list(range(10, 10 + frames))
    assert r.seq_id not in kv and s.running == ()
    assert plan(s, 99, k).num_steps == 0  # nothing left to decode


def test_admission_reserves_all_decode_slots() -> None:
    kv, s = setup()
    s.add(req(0, n=12))
    out = plan(s, 0, 4)
    [blocks] = out.admitted_blocks
    assert kv.length(0) == 6 + 3 + 12
    assert blocks.block_ids == tuple(kv.block_table(0)) and len(blocks.block_ids) == 6
    assert blocks.copies == ((1, 2, 2),)  # the prefix's partial tail is copied on write


def test_eos_stops_early_and_drops_the_rest() -> None:
    kv, s = setup()
    a, b = req(0, n=12), req(1, n=12)
    s.add(a)
    s.add(b)
    _, done = run_frame(s, 0, k=4, eos_at={0: 5})
    assert done == []
    _, done = run_frame(s, 1, k=4, eos_at={0: 5})
    assert done == [a] and a.finish_reason == "eos" and a.finished_frame == 1
    assert a.output_ids == [100, 101, 102, 103, 104, EOS] and len(a.margins) == 6
    assert a.seq_id not in kv and ids(s.running) == [1]
    _, done = run_frame(s, 2, k=4)
    assert done == [b] and b.finish_reason == "length" and b.num_generated == 12


def test_extra_tokens_are_truncated_and_unknown_ids_rejected() -> None:
    _, s = setup()
    r = req(0, n=3)
    s.add(r)
    plan(s, 0, 4)
    with pytest.raises(ValueError, match="not running"):
        s.update(0, {0: [5], 42: [5]}, {}, EOS)
    assert s.update(0, {0: [5, 6, 7, 8, 9]}, {}, None) == [r]
    assert r.output_ids == [5, 6, 7] and r.margins == []


def test_capacity_short_requests_wait_then_finish() -> None:
    # Pool of 12 blocks: the prefix holds 2; each request needs 1 CoW tail + 3 blocks (6+3+10=19
    # tokens -> 5 blocks, 1 shared). Only 2 requests fit at a time (2 + 4 + 4 = 10 <= 12 < 14).
    # Distinct prompts: identical ones would share the completed prefix tail via the cache.
    kv, s = setup(num_blocks=12, max_active=8)
    reqs = [req(i, n=10, prompt=[20 + i, 8, 9]) for i in range(5)]
    for r in reqs:
        s.add(r)
    admitted_at: dict[int, int] = {}
    for frame in range(20):
        out, _ = run_frame(s, frame, k=4)
        assert len(out.decode) <= 2
        admitted_at.update({r.id: frame for r in out.admitted})
        if s.num_unfinished == 0:
            break
    assert admitted_at == {0: 0, 1: 0, 2: 3, 3: 3, 4: 6}
    assert all(r.finish_reason == "length" and r.num_generated == 10 for r in reqs)
    kv.check_invariants()
    kv.free(PREFIX_SEQ)
    assert kv.usage().blocks_used == 0


def test_strict_order_blocks_lower_priority() -> None:
    kv, s = setup(num_blocks=8)
    s.add(req(0, n=8))  # 6 + 3 + 8 = 17 tokens: 3 new blocks
    plan(s, 0, 4)
    s.add(req(1, n=20, priority=5))  # needs 6 new blocks, only 3 free
    s.add(req(2, n=1))  # would fit, but must not jump ahead
    out = plan(s, 1, 4)
    assert out.admitted == () and ids(s.waiting) == [1, 2] and out.num_waiting == 2


def test_max_active_cap_and_runtime_change() -> None:
    _, s = setup(max_active=1)
    for i in range(3):
        s.add(req(i, n=8))
    out, _ = run_frame(s, 0, k=4)
    assert ids(out.decode) == [0]
    s.set_max_active(3)
    out, _ = run_frame(s, 1, k=4)
    assert ids(out.admitted) == [1, 2] and ids(out.decode) == [0, 1, 2]
    s.set_max_active(1)  # no preemption: the running ones finish
    out, done = run_frame(s, 2, k=4)
    assert ids(out.decode) == [1, 2] and ids(done) == [1, 2]
    with pytest.raises(ValueError):
        s.set_max_active(0)


def test_changing_k_between_frames() -> None:
    _, s = setup()
    r = req(0, n=12)
    s.add(r)
    for frame, k in enumerate([1, 5, 3, 8]):
        before = r.num_generated
        run_frame(s, frame, k)
        assert r.num_generated - before == min(k, 12 - before)
    assert r.is_finished and r.frames_spanned == [0, 1, 2, 3]


def test_cross_frame_batch_reaches_ceil_n_over_k() -> None:
    # One request per frame, N = 12, k = 4: B = 3 in steady state (OxyGen figure 3).
    _, s = setup(num_blocks=256, max_active=32)
    sizes = []
    for frame in range(8):
        s.add(req(frame, n=12))
        out, _ = run_frame(s, frame, k=4)
        sizes.append(len(out.decode))
    assert sizes == [1, 2, 3, 3, 3, 3, 3, 3]


def test_waiting_request_keeps_its_prefix_alive() -> None:
    kv, s = setup()
    prefix_blocks = kv.block_table(PREFIX_SEQ)
    r = req(0, n=2)
    s.add(r)
    kv.free(PREFIX_SEQ)  # the frame is over; the request still needs the observation
    assert [kv.pool.refcount(b) for b in prefix_blocks] == [1, 1]
    out, done = run_frame(s, 0, k=4)
    assert out.admitted == (r,) and out.admitted_blocks[0].block_ids[0] == prefix_blocks[0]
    assert done == [r]
    assert kv.usage().blocks_used == 0


def test_identical_prompts_share_suffix_blocks() -> None:
    kv, s = setup()
    s.add(req(0, n=4, prompt=[7, 8, 9, 10, 11, 12]))
    s.add(req(1, n=4, prompt=[7, 8, 9, 10, 11, 12]))
    out = plan(s, 0, 4)
    a, b = out.admitted_blocks
    assert a.num_cached_tokens == 0 and b.num_cached_tokens == 6  # prefix tail + next block
    assert a.block_ids[:3] == b.block_ids[:3] and a.block_ids[3] != b.block_ids[3]


def test_abort_waiting_and_running() -> None:
    kv, s = setup(max_active=1)
    a, b = req(0), req(1)
    s.add(a)
    s.add(b)
    plan(s, 0, 4)
    assert s.abort(1) is b and b.status is RequestStatus.ABORTED and 1 not in kv
    assert s.abort(0) is a and s.running == () and 0 not in kv
    assert s.abort(0) is None and s.num_unfinished == 0
    with pytest.raises(ValueError):
        s.add(a)  # already aborted
    kv.free(PREFIX_SEQ)
    assert kv.usage().blocks_used == 0


def test_add_validation() -> None:
    _, s = setup()
    s.add(req(0))
    with pytest.raises(ValueError, match="already"):
        s.add(req(0))
    bad = req(6)
    bad.prefix_seq_id = 4242
    with pytest.raises(ValueError):
        s.add(bad)
    assert ids(s.waiting) == [0]


# -- preemption, relief and refusal -------------------------------------------------------------
def source(frame: int, n: int = 6) -> Source:
    return Source(frame, np.zeros((1, 2, 2, 3), np.uint8), (5, 6), n, key_root=1000 + frame)


def born(kv: KVManager, rid: int, frame: int, prefix: int | None, n: int = 4,
         priority: int = 0) -> Request:
    """A request as the engine makes it: a source and, when `prefix` is given, that prefix to fork."""
    src = source(frame)
    return Request(rid, RequestKind.MEMORY, f"m{rid}", [7, 8, 9], priority=priority,
                   max_new_tokens=n, prefix_seq_id=prefix, seq_id=rid, source=src,
                   prefix_len=src.num_tokens)


def frame_prefix(kv: KVManager, seq: int, frame: int) -> None:
    kv.create(seq)
    kv.append(seq, source(frame).keys(), cacheable=False)


def test_relieve_preempts_newest_lowest_priority_waiting_until_the_head_fits() -> None:
    kv = KVManager(16, 4, bytes_per_block=1)
    s = Scheduler(kv, 4, reserved_blocks=6)
    for f in range(4):  # four frames, one request each forking its own 6-token prefix (2 blocks)
        frame_prefix(kv, 100 + f, f)
        s.add(born(kv, f, f, 100 + f, priority=1 if f == 3 else 0))
        kv.free(100 + f)
    assert kv.usage().blocks_used == 8 and ids(s.waiting) == [3, 0, 1, 2]
    # head (3) needs 3 blocks (suffix 3 + N 4 -> 2, + 1 CoW) beside the reserved 6: 9 free
    preempted = s.relieve()
    assert ids(preempted) == [2] and kv.usage().blocks_free == 10
    assert preempted[0].status is RequestStatus.PREEMPTED and preempted[0].source is not None
    assert 2 not in kv and s.need(preempted[0]) == 3 + 2  # + its prefix, prefilled again
    kv.check_invariants()


def test_preempted_request_is_admitted_with_its_prefix_to_prefill() -> None:
    kv = KVManager(32, 4, bytes_per_block=1)
    s = Scheduler(kv, 4)
    r = born(kv, 0, 0, None)  # no prefix to fork: it prefills its own (isolated, preempted)
    assert s.add(r) == [] and r.status is RequestStatus.PREEMPTED and 0 not in kv
    [adm] = s.admit(frame=3)
    assert adm.request is r and adm.prefill is not None and adm.prefill.frame == 0
    assert kv.length(0) == 6 + 3 + 4 and len(r.block_table) == 4  # prefix + suffix + N
    assert r.source is None and r.suffix_pending and r.status is RequestStatus.RUNNING
    s.update(3, {0: [11, 12, 13, 14]}, {}, None)
    assert kv.usage().blocks_used == 0


def test_admission_makes_room_for_the_head_from_the_back_of_the_queue() -> None:
    kv = KVManager(12, 4, bytes_per_block=1)
    s = Scheduler(kv, 1, reserved_blocks=3)
    for f in range(3):
        frame_prefix(kv, 100 + f, f)
        s.add(born(kv, f, f, 100 + f))
        kv.free(100 + f)
    # 6 blocks held by three prefixes, 6 free: the head needs 3 + 3 reserved -> fits as is
    assert [a.request.id for a in s.admit(0)] == [0]
    s.update(0, {0: [1, 2, 3, 4]}, {}, None)
    frame_prefix(kv, 103, 3)
    s.add(born(kv, 3, 3, 103))
    kv.free(103)
    kv.pool.allocate(2)  # something else holds 2 blocks: 12 - 6 - 2 = 4 free < 3 + 3
    [adm] = s.admit(1)
    assert adm.request.id == 1 and s.waiting[-1].status is RequestStatus.PREEMPTED


def test_a_full_queue_refuses_the_newest_of_the_lowest_priority() -> None:
    kv = KVManager(64, 4, bytes_per_block=1)
    s = Scheduler(kv, 1, max_waiting=2)
    frame_prefix(kv, 100, 0)
    a, b = born(kv, 0, 0, 100), born(kv, 1, 0, 100)
    assert s.add(a) == [] and s.add(b) == []
    c = born(kv, 2, 0, 100)
    assert s.add(c) == [c] and c.finish_reason == "refused" and "queue is full" in c.reason
    q = born(kv, 3, 0, 100, priority=1)  # outranks the waiting memories: the newest one goes
    assert s.add(q) == [b] and b.status is RequestStatus.ABORTED and 1 not in kv
    assert ids(s.waiting) == [3, 0]
