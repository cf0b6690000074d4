"""Language request state: plain data, mutated only by the Scheduler."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class RequestKind(enum.Enum):
    MEMORY = "memory"  # periodic "what happened?" text memory
    QUESTION = "question"  # a person's question about the scene


class RequestStatus(enum.Enum):
    WAITING = "waiting"  # added, holds its frame's prefix alive, no suffix KV yet
    RUNNING = "running"  # admitted: suffix + all decode slots reserved
    FINISHED = "finished"
    ABORTED = "aborted"


@dataclass
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
    prefix_seq_id: int | None = None  # the frame's observation prefix sequence
    seq_id: int | None = None  # this request's own KV sequence (set by whoever creates it)
    status: RequestStatus = RequestStatus.WAITING
    output_ids: list[int] = field(default_factory=list)
    margins: list[float] = field(default_factory=list)  # per generated token (top1 - top2 logit)
    frames_spanned: list[int] = field(default_factory=list)  # frames in which it got tokens
    finish_reason: str | None = None  # "length" | "eos" | None
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
