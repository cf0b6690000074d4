"""KVCallRecorder: a proxy in front of the manager. Recording leaves the manager's behaviour and
class untouched, the replay reproduces the same end state from the start snapshot, the recorder
times only the manager's calls, and attach() routes the engine's and scheduler's calls through it."""
from __future__ import annotations

import time

import pytest

from oxygen_ros.bench.kv_recorder import KVCallRecorder
from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.core.kv import KVManager
from oxygen_ros.engine.core.synthetic import SyntheticStream

BS = 16


def script(kv) -> list:
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
        got = script(rec)
    assert got == expected
    assert [name for name, _, _ in rec.calls] == [
        "create", "append", "create", "append", "free", "create", "free", "append", "can_fit"]
    assert not set(vars(recorded)) & {"append", "create", "free"}  # the manager is not patched
    # a replay from any other state would fail (e.g. "sequence 10 already exists")
    assert rec.replay_s(repeats=2) > 0
    # it runs on copies: the recorded manager is untouched (prefix tail 2 filled in place)
    assert recorded.block_table(12) == plain.block_table(12) == [0, 1, 2, 3, 4]
    recorded.check_invariants()


def test_busy_counts_only_the_managers_calls() -> None:
    kv = KVManager(32, BS, 100)
    with KVCallRecorder(kv) as rec:
        script(rec)
        time.sleep(0.05)  # not a KV call: must not count
    assert 0 < rec.busy_s < 0.05


def test_attach_routes_engine_and_scheduler_calls_and_detach_restores() -> None:
    mc = PRESETS["tiny"]
    engine = Engine(mc, EngineConfig(mode="oxygen", decode_steps_per_frame=1, max_decode_steps=3,
                                     memory_every_n_frames=0))
    kv = engine.kv
    stream = SyntheticStream(mc)
    engine.ask("what happened?")
    with KVCallRecorder(kv).attach(engine) as rec:
        engine.step(stream.frame(0))
        engine.step(stream.frame(1))
    names = [name for name, _, _ in rec.calls]
    # the engine's prefix and the scheduler's admission (append with the prompt suffix) and
    # finishing frees all went through the proxy
    assert names.count("create") >= 4 and "append" in names and "free" in names
    assert engine.kv is kv and engine.scheduler.kv is kv
    assert rec.replay_s(repeats=1) > 0
    engine.step(stream.frame(2))  # still serving on the manager itself
    kv.check_invariants()


def test_attach_refuses_a_foreign_engine_and_replay_needs_a_recording() -> None:
    engine = Engine(PRESETS["tiny"], EngineConfig())
    with pytest.raises(ValueError, match="does not hold"):
        KVCallRecorder(KVManager(4, BS, 100)).attach(engine)
    with pytest.raises(RuntimeError, match="nothing recorded"):
        KVCallRecorder(KVManager(4, BS, 100)).replay_s()
