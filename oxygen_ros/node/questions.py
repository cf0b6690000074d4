"""Questions from ~/ask (topic and action) until their one final message. Pure (no rclpy).

A question is queued by a callback, handed to the engine by the inference worker before the
next frame, streamed while it decodes and retired by its final update. Every question ends
exactly once: with its answer, or with a refusal (too long, queue full, asked while the node is
not active, aborted on deactivate/cleanup, cancelled). A question is answered from the
observations of the activation it was asked in, never held over to a later one. The bound (`capacity`) counts questions queued AND decoding;
beyond it new questions are refused at once ("queue_full"), never dropped silently.
"""
from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

# finish reasons of refusals (a final ~/answer with empty text)
TOO_LONG = "refused: too long"
QUEUE_FULL = "refused: queue full"
INVALID = "refused: invalid"
ABORTED_DEACTIVATE = "aborted: node deactivated"
# asked while inactive, or still in the topic's queue when the node deactivated
INACTIVE = "refused: node inactive (questions are answered while it is active)"
ABORTED_CLEANUP = "aborted: node cleaned up"
CANCELLED = "cancelled"


@dataclass(eq=False)
class Question:
    prompt: str
    # called with every update of this question (the action server's feedback / result);
    # None for questions from the ~/ask topic
    sink: Callable[[Any], None] | None = None
    request_id: int = 0  # the engine's id once asked
    # the prompt's token ids from the check where it entered (TextIO.check): Engine.ask takes
    # them, so a question is tokenised once
    prompt_ids: list[int] = field(default_factory=list)
    done: bool = False


class Questions:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"question capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._queued: collections.deque[Question] = collections.deque()
        self._asked: dict[int, Question] = {}  # engine request id -> question
        self.answered = 0
        self.refused = 0
        self.last_refusal = ""
        self.last_refusal_at: float | None = None

    @property
    def outstanding(self) -> int:
        with self._lock:
            return len(self._queued) + len(self._asked)

    def submit(self, question: Question) -> str | None:
        """Queue `question`; returns a refusal reason instead when the bound is reached."""
        with self._lock:
            if len(self._queued) + len(self._asked) >= self.capacity:
                return QUEUE_FULL
            self._queued.append(question)
            return None

    def take(self, limit: int | None = None) -> list[Question]:
        """Queued questions, oldest first, at most `limit` (the worker hands them to the engine)."""
        with self._lock:
            n = len(self._queued) if limit is None else max(0, min(limit, len(self._queued)))
            return [self._queued.popleft() for _ in range(n)]

    def requeue_front(self, questions: list[Question]) -> None:
        """Questions the worker took but could not hand over: first in line again."""
        with self._lock:
            self._queued.extendleft(reversed(questions))

    def asked(self, question: Question, request_id: int) -> bool:
        """Record the engine's id of a question; False when it ended meanwhile (cancelled)."""
        with self._lock:
            question.request_id = request_id
            if question.done:
                return False
            self._asked[request_id] = question
            return True

    def owner(self, request_id: int) -> Question | None:
        with self._lock:
            q = self._asked.get(request_id)
            return None if q is None or q.done else q

    def finished(self, request_id: int) -> Question | None:
        """The question of a final update, retired (None if it is not ours or already ended)."""
        with self._lock:
            q = self._asked.pop(request_id, None)
            if q is not None and not q.done:
                q.done = True
                self.answered += 1
                return q
            return None

    def end(self, question: Question, reason: str, now: float) -> bool:
        """Retire `question` without an answer (refusal). False if it had already ended."""
        with self._lock:
            if question.done:
                return False
            question.done = True
            self._asked.pop(question.request_id, None)
            try:
                self._queued.remove(question)
            except ValueError:
                pass
            self.refused += 1
            self.last_refusal, self.last_refusal_at = reason, now
            return True

    def note_refusal(self, reason: str, now: float) -> None:
        """A question refused before it was queued (it never became a Question)."""
        with self._lock:
            self.refused += 1
            self.last_refusal, self.last_refusal_at = reason, now

    def drain(self) -> list[Question]:
        """Every question not ended yet (queued and asked), for aborting them all."""
        with self._lock:
            out = list(self._queued) + [q for q in self._asked.values() if not q.done]
            return out
