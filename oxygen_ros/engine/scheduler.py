"""Scheduler: which language requests run this frame (admission) and for how many tokens.

Policy (cross-frame continuous batching, OxyGen section "The method", point 2):
- Waiting requests are admitted highest priority first, FIFO (arrival) within a priority.
- Admission is strict: it stops at the first request that does not fit (KV or max_active), so a
  big high-priority request is never starved by smaller low-priority ones jumping ahead.
- Admission appends the prompt suffix AND reserves all max_new_tokens decode slots, so a running
  request can never run out of KV mid-decode (no preemption needed).
- Every running request decodes each frame, in admission order; each advances min(k, remaining).
- A waiting request already holds a fork of its frame's observation prefix (taken in `add`), so
  the prefix stays alive until the request is admitted and finished (or aborted).
  Caveat: if nothing is running and the head request still does not fit, only aborting waiting
  requests frees memory; callers can detect that as `running == ()` with `num_waiting > 0`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oxygen_ros.engine.kv.kv_manager import KVCacheBlocks, KVManager
from oxygen_ros.engine.request import Request, RequestStatus


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
class SchedulerOutput:
    frame: int
    admitted: tuple[Request, ...]  # need their suffix prefilled this frame
    admitted_blocks: tuple[KVCacheBlocks, ...]  # aligned with `admitted`
    decode: tuple[Request, ...]  # all running requests (admitted included), admission order
    num_steps: int  # k when there is anything to decode, else 0
    num_waiting: int


class Scheduler:
    def __init__(self, kv: KVManager, max_active_requests: int, reserved_blocks: int = 0) -> None:
        if reserved_blocks < 0:
            raise ValueError(f"reserved_blocks must be >= 0, got {reserved_blocks}")
        self.kv = kv
        # Kept free for the next frame's action path (prefix + action scratch): language
        # requests wait rather than ever stall the action stream.
        self.reserved_blocks = reserved_blocks
        self._max_active = 0
        self.set_max_active(max_active_requests)
        self._waiting: list[Request] = []  # kept sorted by (-priority, arrival)
        self._running: list[Request] = []  # admission order
        self._live: dict[int, Request] = {}  # unfinished requests by id
        self._arrivals = 0

    # ---- queue management -------------------------------------------------------------------
    def add(self, req: Request) -> None:
        if req.id in self._live:
            raise ValueError(f"request {req.id} is already scheduled")
        if req.seq_id is None:
            raise ValueError(f"request {req.id} has no seq_id")
        if req.is_finished:
            raise ValueError(f"request {req.id} is already {req.status.value}")
        # Fork first: it raises on an unknown prefix, leaving the queue untouched.
        self.kv.create(req.seq_id, parent=req.prefix_seq_id)
        req.status = RequestStatus.WAITING
        req.arrival = self._arrivals
        self._arrivals += 1
        self._live[req.id] = req
        self._waiting.append(req)
        self._waiting.sort(key=lambda r: (-r.priority, r.arrival))  # stable, queue is short

    def abort(self, req_id: int) -> Request | None:
        """Abort a waiting or running request and free its KV; None if it is not live."""
        req = self._live.pop(req_id, None)
        if req is None:
            return None
        queue = self._running if req.status is RequestStatus.RUNNING else self._waiting
        queue[:] = [r for r in queue if r is not req]  # by identity: dataclass == is by value
        self.kv.free(req.seq_id)  # type: ignore[arg-type]  # checked in add
        req.status = RequestStatus.ABORTED
        return req

    def set_max_active(self, n: int) -> None:
        """Takes effect at the next admission; running requests above the cap are not preempted."""
        if n < 1:
            raise ValueError(f"max_active_requests must be >= 1, got {n}")
        self._max_active = n

    @property
    def max_active(self) -> int:
        return self._max_active

    @property
    def waiting(self) -> tuple[Request, ...]:
        """In admission order (priority, then arrival)."""
        return tuple(self._waiting)

    @property
    def running(self) -> tuple[Request, ...]:
        return tuple(self._running)

    @property
    def num_unfinished(self) -> int:
        return len(self._waiting) + len(self._running)

    # ---- per frame --------------------------------------------------------------------------
    def schedule(self, frame: int, k: int) -> SchedulerOutput:
        if k < 1:
            raise ValueError(f"decode steps per frame k must be >= 1, got {k}")
        admitted: list[Request] = []
        blocks: list[KVCacheBlocks] = []
        while self._waiting and len(self._running) < self._max_active:
            req = self._waiting[0]
            worst = request_blocks(0, len(req.prompt_ids), req.max_new_tokens,
                                   self.kv.block_size, with_prefix=False)
            if not self.kv.can_fit(worst + self.reserved_blocks):
                break
            got = self.kv.append(req.seq_id, req.prompt_ids,  # type: ignore[arg-type]
                                 reserve=req.max_new_tokens)
            if got is None:
                break  # strict order: nobody jumps ahead of a request that does not fit
            self._waiting.pop(0)
            req.status = RequestStatus.RUNNING
            req.admitted_frame = frame
            self._running.append(req)
            admitted.append(req)
            blocks.append(got)
        decode = tuple(self._running)
        return SchedulerOutput(frame, tuple(admitted), tuple(blocks), decode,
                               k if decode else 0, len(self._waiting))

    def update(self, frame: int, tokens: dict[int, list[int]], margins: dict[int, list[float]],
               eos_token_id: int | None) -> list[Request]:
        """Record generated tokens (keyed by request id). Tokens beyond max_new_tokens or after an
        EOS are dropped; the EOS itself is kept. Returns the requests that finished, KV freed."""
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
                self._accept(req, frame, new, margins.get(req.id, ()), eos_token_id)
            if req.finish_reason is None and len(req.output_ids) >= req.max_new_tokens:
                req.finish_reason = "length"
            if req.finish_reason is None:
                still.append(req)
                continue
            req.status = RequestStatus.FINISHED
            req.finished_frame = frame
            del live[req.id]
            self.kv.free(req.seq_id)  # type: ignore[arg-type]
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
