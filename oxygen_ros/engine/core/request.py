"""Language request state: plain data. The Engine creates a request when it is born on a frame;
from then on only the Scheduler changes it (admission, preemption, tokens, retirement).
RequestUpdate is what the engine reports of it each frame."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np


class RequestKind(enum.Enum):
    MEMORY = "memory"  # periodic "what happened?" text memory
    QUESTION = "question"  # a person's question about the scene


class RequestStatus(enum.Enum):
    WAITING = "waiting"  # added, holds a fork of its frame's prefix, no suffix KV yet
    PREEMPTED = "preempted"  # waiting without any KV: its prefix is prefilled again from `source`
    RUNNING = "running"  # admitted: prefix, suffix and all decode slots in its block table
    FINISHED = "finished"
    ABORTED = "aborted"  # aborted or refused (finish_reason "refused", `reason` says why)


@dataclass(frozen=True, eq=False)
class Source:
    """The observation a request was born from: what its prefix is computed from again when
    the request waits without KV (preempted, or isolated execution's own prefill)."""

    frame: int
    images: np.ndarray  # valid cameras only, uint8 [C, H, W, 3]
    prompt_ids: tuple[int, ...]  # the frame's action prompt (instruction + state)
    num_tokens: int  # prefix length: image tokens + prompt tokens
    key_root: int  # prefix-cache identity of this observation

    def keys(self) -> list[int]:
        """Per-token prefix-cache keys. The prefix is bidirectional, so every token's key
        depends on the whole observation."""
        root = self.key_root
        return [root ^ (i << 1) for i in range(self.num_tokens)]


@dataclass(eq=False)
class Request:
    """One language request, born at an observation frame, decoded across frames."""

    id: int
    kind: RequestKind
    prompt: str
    prompt_ids: list[int]  # suffix appended after the frame's observation prefix
    priority: int = 0  # higher is admitted first
    max_new_tokens: int = 12  # N
    birth_frame: int = 0
    stamp: float = 0.0  # seconds, stamp of the source observation
    # -- KV state (set by whoever creates the request, then the Scheduler's) --------------------
    seq_id: int = field(kw_only=True)  # this request's own KV sequence id (kept across preemption)
    prefix_seq_id: int | None = None  # the frame's prefix it forks when added (None: prefill)
    source: Source | None = None  # kept while the request may need its prefix again
    prefix_len: int = 0  # tokens of its observation prefix
    rope_offset: int = 0  # rotary position minus index after its prefix's images (Qwen3-VL)
    block_table: tuple[int, ...] = ()  # final once running (every decode slot is reserved)
    state_slot: int | None = None  # its own recurrent-state slot once running (state specs)
    num_cached_tokens: int = 0  # suffix tokens that hit the prefix cache at admission
    suffix_pending: bool = False  # admitted, its suffix not yet run (rides in the next decode)
    # -- progress -------------------------------------------------------------------------------
    status: RequestStatus = RequestStatus.WAITING
    output_ids: list[int] = field(default_factory=list)
    margins: list[float] = field(default_factory=list)  # per generated token (top1 - top2 logit)
    frames_spanned: list[int] = field(default_factory=list)  # frames in which it got tokens
    finish_reason: str | None = None  # "length" | "eos" | "refused" | None
    reason: str = ""  # why it was refused
    arrival: int = -1  # monotonic counter, set by Scheduler.add (FIFO within a priority)
    admitted_frame: int | None = None
    finished_frame: int | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"request {self.id}: max_new_tokens must be >= 1, got {self.max_new_tokens}")

    @property
    def num_generated(self) -> int:
        return len(self.output_ids)

    @property
    def is_finished(self) -> bool:
        return self.status in (RequestStatus.FINISHED, RequestStatus.ABORTED)

    @property
    def remaining(self) -> int:
        """Tokens it may still generate (0 once finished, even when it stopped at EOS)."""
        if self.is_finished:
            return 0
        return self.max_new_tokens - len(self.output_ids)


@dataclass(frozen=True)
class RequestUpdate:
    """A language request's progress in one frame (streamed to ~/memory and ~/answer)."""

    id: int
    kind: str
    prompt: str
    new_tokens: tuple[int, ...]
    text: str
    num_tokens: int
    is_final: bool
    frames_spanned: int
    birth_frame: int
    stamp: float
    finish_reason: str | None  # "length" | "eos" | "refused" (then `reason` says why)
    new_margins: tuple[float, ...] = ()  # top1 - top2 logit of each new token (near ties)
    admitted_frame: int | None = None
    reason: str = ""
