"""Scheduler: which language requests hold KV, run this frame, and for how many tokens.

It owns a request's life from `add` to its final token: admission, preemption (vLLM style:
recomputation), retirement and refusal. Policy (cross-frame continuous batching, OxyGen section
"The method", point 2):
- Waiting requests are admitted highest priority first, FIFO (arrival) within a priority.
- Admission is strict: it stops at the first request that does not fit (KV or max_active), so a
  big high-priority request is never starved by smaller low-priority ones jumping ahead.
- Admission appends the prompt suffix AND reserves all max_new_tokens decode slots, so a running
  request never runs out of KV mid-decode and is never preempted.
- `reserved_blocks` stay free for the next frame's action path (prefix + action scratch).
- A waiting request holds a fork of its frame's observation prefix (taken in `add`). Under KV
  pressure (`relieve`) the newest, lowest-priority waiting requests are preempted: their KV is
  freed and they keep only their source observation; admission prefills that prefix again
  (same K/V, so the same tokens). Relief frees blocks until the action path AND the head of the
  queue fit, with the same arithmetic admission uses (`need`), so the queue always moves.
- The queue is bounded (`max_waiting`): beyond it the lowest-priority, newest request is
  refused with a reason, so live state is bounded whatever the number of frames.
- Recurrent state slots (a cache spec with a RecurrentState: kv/state_slots.py) are accounted
  as blocks are: admission needs one slot for the request (its own copy of the prefix snapshot,
  or a fresh one for a re-prefill) beside `reserved_slots` for the next frame's prefix, and
  relief preempts waiting requests (whose forks hold their frame's snapshot) until they fit.

The engine's frame primitives (engine/core/frame_ops.py) are its only caller, through one contract:
`add` (births), `relieve` (before the action path), `admit` -> Admission (what to prefill and
copy before a request's first step), `running` (the decode batch, admission order), `update`
(the tokens: retirement), `abort`. There is no per-frame plan object: the modes arrange
admission and decoding differently (oxygen admits then decodes the batch with a k chosen for
that batch; isolated admits one request at a time and runs it to its end).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oxygen_ros.engine.core.kv.kv_manager import KVCacheBlocks, KVManager
from oxygen_ros.engine.core.request import Request, RequestStatus, Source


def blocks_for(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


def request_blocks(prefix_tokens: int, suffix_tokens: int, max_new_tokens: int, block_size: int,
                   with_prefix: bool) -> int:
    """Blocks a language request may still need: its prompt suffix and every decode slot (+1
    for the copy-on-write of the prefix's partial last block), plus its observation prefix when
    that has to be prefilled again (a preempted request). The one place this is computed."""
    own = blocks_for(suffix_tokens + max_new_tokens, block_size) + 1
    return own + (blocks_for(prefix_tokens, block_size) if with_prefix else 0)


@dataclass(frozen=True)
class Admission:
    """One admitted request and what the runner must do before its first decode step."""

    request: Request
    blocks: KVCacheBlocks  # its table after the suffix append (copies: CoW before writing)
    prefill: Source | None  # preempted: prefill this observation into its first blocks


class Scheduler:
    def __init__(self, kv: KVManager, max_active_requests: int, reserved_blocks: int = 0,
                 max_waiting: int = 1 << 30, reserved_slots: int = 0) -> None:
        if reserved_blocks < 0 or reserved_slots < 0:
            raise ValueError(f"reserved_blocks / reserved_slots must be >= 0, got "
                             f"{reserved_blocks} / {reserved_slots}")
        self.kv = kv
        self.reserved_blocks = reserved_blocks
        self.reserved_slots = reserved_slots
        # one state slot per admitted request when the pool holds recurrent state
        self._slot_need = 1 if kv.state is not None else 0
        self._max_active = 0
        self._max_waiting = 0
        self.set_max_active(max_active_requests)
        self.set_max_waiting(max_waiting)
        self._waiting: list[Request] = []  # kept sorted by (-priority, arrival)
        self._running: list[Request] = []  # admission order
        self._live: dict[int, Request] = {}  # unfinished requests by id
        self._arrivals = 0

    # ---- queue management -------------------------------------------------------------------
    def add(self, req: Request) -> list[Request]:
        """Queue a request: with prefix_seq_id it forks that prefix (WAITING); without, it
        waits with its source only (PREEMPTED) and admission prefills the prefix. Returns the
        requests refused because the queue is full (possibly `req` itself), already final."""
        if req.id in self._live:
            raise ValueError(f"request {req.id} is already scheduled")
        if req.is_finished:
            raise ValueError(f"request {req.id} is already {req.status.value}")
        if req.prefix_seq_id is None and req.source is None:
            raise ValueError(f"request {req.id} has neither a prefix sequence nor a source")
        refused: list[Request] = []
        if len(self._waiting) >= self._max_waiting:
            victim = min([*self._waiting, req], key=lambda r: (r.priority, -r.arrival
                                                               if r is not req else -1 << 62))
            reason = (f"the waiting queue is full ({self._max_waiting} requests): "
                      f"refused the newest of the lowest priority ({victim.priority})")
            if victim is req:
                self._refuse(req, reason)
                return [req]
            self.abort(victim.id)
            self._refuse(victim, reason)
            refused.append(victim)
        if req.prefix_seq_id is not None:
            # Fork first: it raises on an unknown prefix, leaving the queue untouched.
            self.kv.create(req.seq_id, parent=req.prefix_seq_id)
            req.status = RequestStatus.WAITING
        else:
            req.status = RequestStatus.PREEMPTED
        req.prefix_seq_id = None  # the fork (if any) is taken; the frame's prefix may go
        req.arrival = self._arrivals
        self._arrivals += 1
        self._live[req.id] = req
        self._waiting.append(req)
        self._waiting.sort(key=lambda r: (-r.priority, r.arrival))  # stable, queue is short
        return refused

    @staticmethod
    def _refuse(req: Request, reason: str) -> None:
        req.status = RequestStatus.ABORTED
        req.finish_reason = "refused"
        req.reason = reason
        req.source = None

    def abort(self, req_id: int) -> Request | None:
        """Abort a waiting or running request and free its KV; None if it is not live."""
        req = self._live.pop(req_id, None)
        if req is None:
            return None
        queue = self._running if req.status is RequestStatus.RUNNING else self._waiting
        queue[:] = [r for r in queue if r is not req]
        if req.status is not RequestStatus.PREEMPTED:
            self.kv.free(req.seq_id)
        req.status = RequestStatus.ABORTED
        req.source = None
        return req

    def set_max_active(self, n: int) -> None:
        """Takes effect at the next admission; running requests above the cap are not preempted
        (they hold all their slots and finish within N/k frames)."""
        if n < 1:
            raise ValueError(f"max_active_requests must be >= 1, got {n}")
        self._max_active = n

    def set_max_waiting(self, n: int) -> None:
        """Applies to the next add (a shorter queue is not trimmed: it drains)."""
        if n < 1:
            raise ValueError(f"max_waiting_requests must be >= 1, got {n}")
        self._max_waiting = n

    @property
    def max_active(self) -> int:
        return self._max_active

    @property
    def waiting(self) -> tuple[Request, ...]:
        """In admission order (priority, then arrival); preempted ones included."""
        return tuple(self._waiting)

    @property
    def running(self) -> tuple[Request, ...]:
        return tuple(self._running)

    @property
    def num_unfinished(self) -> int:
        return len(self._waiting) + len(self._running)

    # ---- KV pressure --------------------------------------------------------------------------
    def need(self, req: Request) -> int:
        """New blocks admitting `req` may take (admission and relief use this one number)."""
        return request_blocks(req.prefix_len, len(req.prompt_ids), req.max_new_tokens,
                              self.kv.block_size, req.status is RequestStatus.PREEMPTED)

    def relieve(self) -> list[Request]:
        """Preempt waiting requests (newest, lowest priority first) until the next frame's
        action path fits beside the head of the queue, or, failing that, alone. Returns the
        requests preempted. Running requests are never preempted: they cannot grow."""
        head = self._waiting[0] if self._waiting else None
        target, slots = self.reserved_blocks, self.reserved_slots
        if head is not None and len(self._running) < self._max_active:
            target += self.need(head)
            slots += self._slot_need
        preempted = self._make_room(target, keep=head, slots=slots)
        if head is not None and head.status is RequestStatus.WAITING and \
                head.source is not None and \
                not self.kv.can_fit(self.reserved_blocks, self.reserved_slots):
            self._preempt(head)  # the action path comes first
            preempted.append(head)
        return preempted

    def _make_room(self, blocks: int, keep: Request | None, slots: int = 0) -> list[Request]:
        """Preempt waiting requests holding KV, from the back of the queue, until `blocks`
        (and `slots` state slots) are available (or none is left to preempt); `keep` is spared,
        and so is a request without a source (it could not be prefilled again)."""
        preempted: list[Request] = []
        for req in reversed(self._waiting):
            if self.kv.can_fit(blocks, slots):
                break
            if req.status is RequestStatus.WAITING and req is not keep and req.source is not None:
                self._preempt(req)
                preempted.append(req)
        return preempted

    def _preempt(self, req: Request) -> None:
        self.kv.free(req.seq_id)
        req.status = RequestStatus.PREEMPTED

    # ---- per frame --------------------------------------------------------------------------
    def admit(self, frame: int, limit: int | None = None, reserve: int | None = None
              ) -> list[Admission]:
        """Admit waiting requests in order while they fit beside `reserve` free blocks (default
        reserved_blocks: the next frame's action path). A caller whose frame still holds its own
        action path's blocks, and whose admissions all finish within the frame, passes 0: the
        next frame's blocks are the ones this frame releases."""
        admissions: list[Admission] = []
        kv = self.kv
        # a caller that keeps no blocks for the next frame keeps no state slot for it either
        slot_reserve = self.reserved_slots if reserve is None or reserve > 0 else 0
        reserve = self.reserved_blocks if reserve is None else reserve
        while self._waiting and len(self._running) < self._max_active and \
                (limit is None or len(admissions) < limit):
            req = self._waiting[0]
            need = self.need(req) + reserve
            slots = self._slot_need + slot_reserve
            if not kv.can_fit(need, slots):
                # newer waiting requests' prefixes make way for the head (the same arithmetic
                # as relief); they are prefilled again when their turn comes
                self._make_room(need, keep=req, slots=slots)
                if not kv.can_fit(need, slots):
                    break
            source = req.source if req.status is RequestStatus.PREEMPTED else None
            if source is not None:
                kv.create(req.seq_id, None)
                kv.append(req.seq_id, source.keys(), cacheable=False)
            got = kv.append(req.seq_id, req.prompt_ids,
                            reserve=req.max_new_tokens)
            if got is None:  # cannot happen after can_fit(need); undo and keep strict order
                if source is not None:
                    kv.free(req.seq_id)
                break
            self._waiting.pop(0)
            req.status = RequestStatus.RUNNING
            req.admitted_frame = frame
            req.block_table = got.block_ids
            req.state_slot = got.state_slot
            req.num_cached_tokens = got.num_cached_tokens
            req.suffix_pending = True
            req.source = None  # never preempted from here on
            self._running.append(req)
            admissions.append(Admission(req, got, source))
        return admissions

    def update(self, frame: int, tokens: dict[int, list[int]], margins: dict[int, list[float]],
               eos_token_id: int | None) -> list[Request]:
        """Record generated tokens (keyed by request id). Tokens beyond max_new_tokens or after an
        EOS are dropped; the EOS itself is kept. Returns the requests that finished, KV freed and
        forgotten (the caller reports them once and drops them)."""
        live = self._live
        unknown = [rid for rid in tokens
                   if rid not in live or live[rid].status is not RequestStatus.RUNNING]
        if unknown:
            raise ValueError(f"tokens for requests that are not running: {sorted(unknown)}")
        finished: list[Request] = []
        still: list[Request] = []
        for req in self._running:  # one pass per frame over the whole batch: keep it lean
            new = tokens.get(req.id)
            if new:
                req.suffix_pending = False
                self._accept(req, frame, new, margins.get(req.id, ()), eos_token_id)
            if req.finish_reason is None and len(req.output_ids) >= req.max_new_tokens:
                req.finish_reason = "length"
            if req.finish_reason is None:
                still.append(req)
                continue
            req.status = RequestStatus.FINISHED
            req.finished_frame = frame
            del live[req.id]
            self.kv.free(req.seq_id)
            finished.append(req)
        self._running = still
        return finished

    @staticmethod
    def _accept(req: Request, frame: int, new: list[int], margins: Sequence[float],
                eos_token_id: int | None) -> None:
        room = req.max_new_tokens - len(req.output_ids)  # running, so remaining() without checks
        take = new if len(new) <= room else new[:room]
        if eos_token_id is not None and eos_token_id in take:
            take = take[:take.index(eos_token_id) + 1]
            req.finish_reason = "eos"
        req.output_ids.extend(take)
        # Margins are optional diagnostics: keep them aligned with the tokens actually kept.
        req.margins.extend(margins[:len(take)])
        if take and (not req.frames_spanned or req.frames_spanned[-1] != frame):
            req.frames_spanned.append(frame)
