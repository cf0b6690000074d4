"""KVCallRecorder: recording leaves the manager's behaviour unchanged, the replay reproduces the
same end state from the start snapshot, and the manager's own timer counts only its calls."""
from __future__ import annotations

import time

import pytest

from oxygen_ros.engine.kv import KVManager
from oxygen_ros.engine.kv.recorder import KVCallRecorder

BS = 16


def script(kv: KVManager) -> list:
    """A frame-like sequence: prefix, action scratch fork, a request fork with suffix, frees."""
    out = []
    kv.create(10)
    out.append(kv.append(10, list(range(37)), cacheable=False))
    kv.create(11, parent=10)
    out.append(kv.append(11, [], reserve=10, cacheable=False))
    kv.free(11)
    kv.create(12, parent=10)
    kv.free(10)
    out.append(kv.append(12, [7, 8, 9], reserve=30))
    out.append(kv.can_fit(3))
    return out


def test_recording_is_transparent_and_replay_reproduces_the_state() -> None:
    plain, recorded = KVManager(32, BS, 100), KVManager(32, BS, 100)
    expected = script(plain)
    with KVCallRecorder(recorded) as rec:
        got = script(recorded)
    assert got == expected
    assert [name for name, _, _ in rec.calls] == [
        "create", "append", "create", "append", "free", "create", "free", "append", "can_fit"]
    assert "append" not in vars(recorded)  # the class's method again after the block
    # a replay from any other state would fail (e.g. "sequence 10 already exists")
    assert rec.replay_s(repeats=2) > 0
    # it runs on copies: the recorded manager is untouched (prefix tail 2 filled in place)
    assert recorded.block_table(12) == plain.block_table(12) == [0, 1, 2, 3, 4]
    recorded.check_invariants()


def test_busy_counts_only_the_managers_own_calls() -> None:
    kv = KVManager(32, BS, 100)
    with KVCallRecorder(kv) as rec:
        script(kv)
        time.sleep(0.05)  # not a KV call: must not count
    assert 0 < rec.busy_s < 0.05
    assert kv.busy_s >= rec.busy_s


def test_replay_needs_a_recording() -> None:
    with pytest.raises(RuntimeError, match="nothing recorded"):
        KVCallRecorder(KVManager(4, BS, 100)).replay_s()
