"""Questions (pure): every question ends exactly once and the bound is never exceeded, whatever
the order of submit / hand-over / updates / refusals; the engine diagnostic forgets an error once
a frame succeeds."""
from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from oxygen_ros.node.questions import QUEUE_FULL, Question, Questions

OPS = st.lists(st.tuples(st.sampled_from(["submit", "take_ask", "final", "end", "drain"]),
                         st.integers(0, 50)), max_size=120)


@settings(max_examples=200, deadline=None)
@given(capacity=st.integers(1, 8), ops=OPS)
def test_each_question_ends_once_and_bound_holds(capacity, ops):
    qs = Questions(capacity)
    ended: dict[int, int] = {}  # id(question) -> times ended
    submitted: list[Question] = []
    keep: list[Question] = []
    next_rid = 1

    def ends(q):
        ended[id(q)] = ended.get(id(q), 0) + 1

    for op, n in ops:
        if op == "submit":
            q = Question(f"q{len(submitted)}")
            keep.append(q)  # id() must not be reused by a later question
            reason = qs.submit(q)
            if reason is not None:
                assert reason == QUEUE_FULL and qs.outstanding >= capacity
                ends(q)  # refused at once: its final is the refusal
                continue
            submitted.append(q)
        elif op == "take_ask":
            for q in qs.take(n % 4 if n % 2 else None):
                if qs.asked(q, next_rid) is False:
                    pass  # ended meanwhile: already counted
                next_rid += 1
        elif op == "final" and next_rid > 1:
            q = qs.finished(1 + n % (next_rid - 1))
            if q is not None:
                ends(q)
        elif op == "end" and submitted:
            q = submitted[n % len(submitted)]
            if qs.end(q, "cancelled", time.monotonic()):
                ends(q)
        elif op == "drain":
            for q in qs.drain():
                if qs.end(q, "aborted", time.monotonic()):
                    ends(q)
        assert qs.outstanding <= capacity
    assert all(c == 1 for c in ended.values())
    for q in qs.drain():  # the rest ends now: nothing is left without its final
        assert qs.end(q, "aborted", time.monotonic())
        ends(q)
    assert all(ended.get(id(q)) == 1 for q in submitted if q.done)
    assert qs.outstanding == 0


def test_cancelled_while_handed_over_is_not_registered():
    qs = Questions(4)
    q = Question("where?")
    assert qs.submit(q) is None
    (taken,) = qs.take()
    assert qs.end(taken, "cancelled", 0.0)
    assert qs.asked(taken, 7) is False  # the worker aborts it in the engine
    assert qs.owner(7) is None and qs.finished(7) is None


def test_engine_status_clears_after_a_good_frame():
    from oxygen_ros.node.inference_worker import InferenceWorker

    w = InferenceWorker(None, lambda: None, None, None, None, None, [], "x", "f", lambda *a: None, None)
    now = time.monotonic()
    w.frames, w.last_frame_at = 10, now - 0.5
    w.step_errors, w.last_error, w.last_error_at = 1, "RuntimeError: boom", now - 0.2
    assert w.status(True, "active", 0.5) == ("WARN", "last error: RuntimeError: boom")
    w.last_frame_at = now  # a frame succeeded after the error
    assert w.status(True, "active", 0.5) == ("OK", "running")
    w.last_frame_at, w.last_error_at = now - 0.1, now - 10.0  # old error, frames flowing
    assert w.status(True, "active", 0.5) == ("OK", "running")
