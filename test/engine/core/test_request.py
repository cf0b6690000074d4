"""Request: plain state and its derived helpers."""
from __future__ import annotations

import pytest

from oxygen_ros.engine.core.request import Request, RequestKind, RequestStatus


def test_defaults_and_helpers() -> None:
    r = Request(id=3, kind=RequestKind.MEMORY, prompt="Memory:", prompt_ids=[5, 6], max_new_tokens=4,
                seq_id=3)
    assert r.status is RequestStatus.WAITING and not r.is_finished
    assert r.num_generated == 0 and r.remaining == 4
    r.output_ids += [1, 2]
    assert r.num_generated == 2 and r.remaining == 2
    r.status = RequestStatus.FINISHED
    assert r.is_finished and r.remaining == 0  # e.g. stopped at EOS before max_new_tokens
    r.status = RequestStatus.ABORTED
    assert r.is_finished


def test_lists_are_not_shared_between_requests() -> None:
    a = Request(0, RequestKind.QUESTION, "q", [1], seq_id=1)
    b = Request(1, RequestKind.QUESTION, "q", [1], seq_id=2)
    a.output_ids.append(9)
    assert b.output_ids == [] and a.frames_spanned is not b.frames_spanned


def test_rejects_zero_tokens() -> None:
    with pytest.raises(ValueError, match="max_new_tokens"):
        Request(0, RequestKind.QUESTION, "q", [1], max_new_tokens=0, seq_id=1)


def test_a_request_needs_its_kv_sequence() -> None:
    # every request has its own KV sequence from birth: there is no request without one
    with pytest.raises(TypeError, match="seq_id"):
        Request(5, RequestKind.MEMORY, "m", [1])  # type: ignore[call-arg]
