"""KV pressure degrades, never wedges; a failing frame loses nothing.

The engine, scheduler and KV manager run for real; the model's arithmetic is replaced where only
bookkeeping is under test (test/engine/core/fake_runner.py), so hundreds of frames cost milliseconds."""
from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_runner import fake_compute
from oxygen_ros.engine.config import MODES, PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.request import RequestStatus
from oxygen_ros.engine.core.scheduler import request_blocks
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["tiny"]
FRAMES = [SyntheticStream(MC, seed=0).frame(i) for i in range(4)]
QUESTIONS = ["What is on the table?\n", "Describe the gripper.\n",
             "Is the red cube inside the bowl now, or is it still on the table next to it?\n"]


@pytest.fixture(scope="module")
def parts():
    return init_model(MC, seed=0), build_tiny_tokenizer(512)


def make(parts, fake: bool = True, **cfg) -> Engine:
    model, tok = parts
    engine = Engine(MC, EngineConfig(**cfg), model=model, tokenizer=tok)
    if fake:
        fake_compute(engine)
    return engine


class Ledger:
    """Every request asked or born, and the one final update each must get."""

    def __init__(self) -> None:
        self.final: dict[int, str] = {}
        self.seen: set[int] = set()

    def take(self, out) -> None:
        for u in out.updates:
            assert u.id not in self.final, f"request {u.id} got a second final update"
            self.seen.add(u.id)
            if u.is_final:
                assert u.finish_reason in ("length", "eos", "refused"), u
                if u.finish_reason == "refused":
                    assert u.reason, "a refusal needs a reason"
                self.final[u.id] = u.finish_reason


def step(engine: Engine, ledger: Ledger, i: int):
    out = engine.step(FRAMES[i % len(FRAMES)])
    check(engine, ledger, out)
    return out


def check(engine: Engine, ledger: Ledger, out) -> None:
    assert out.actions.shape == (MC.action_horizon, MC.action_dim)
    engine.kv.check_invariants()
    u = out.kv
    assert u.blocks_used + u.blocks_free + u.blocks_cached == u.blocks_total
    # no leaked sequence: between frames only requests holding KV have one
    holding = [r for r in engine.scheduler.waiting + engine.scheduler.running
               if r.status in (RequestStatus.WAITING, RequestStatus.RUNNING)]
    assert engine.kv.num_sequences == len(holding)
    ledger.take(out)


def drain(engine: Engine, ledger: Ledger, start: int, limit: int) -> int:
    """Engine.drain on FRAMES from `start` on, checking every frame; the next frame's i."""
    frames = itertools.count(start)
    for out in engine.drain(lambda _: FRAMES[next(frames) % len(FRAMES)], max_frames=limit):
        check(engine, ledger, out)
    assert not engine.has_unfinished(), (f"stuck: {len(engine.scheduler.waiting)} waiting, "
                                         f"{len(engine.scheduler.running)} running after {limit} frames")
    # nothing left: every sequence freed, the pool holds no block
    assert engine.kv.num_sequences == 0 and engine.kv.usage().blocks_used == 0
    return next(frames)


def test_switching_to_parallel_with_requests_in_flight_keeps_serving(parts):
    """Reported wedge: mode -> parallel with requests running made every later frame fail
    ("KV pool cannot hold this frame's prefix"), even after switching back. The real model:
    the wedge needs the language thread's allocations to overlap the action path's."""
    engine = make(parts, fake=False, decode_steps_per_frame=1, max_decode_steps=8,
                  denoise_steps=1, memory_every_n_frames=1, max_active_requests=4,
                  num_blocks=Engine.frame_blocks(MC, EngineConfig()) + 24)
    ledger = Ledger()
    i = 0
    for i in range(6):
        engine.ask(QUESTIONS[i % 3])
        step(engine, ledger, i)
    assert engine.scheduler.running, "nothing in flight: the test proves nothing"
    engine.update_config(mode="parallel")
    for i in range(6, 12):
        engine.ask(QUESTIONS[i % 3])
        step(engine, ledger, i)
    engine.update_config(mode="oxygen")
    for i in range(12, 14):
        step(engine, ledger, i)
    drain(engine, ledger, 14, 60)
    assert ledger.seen == set(ledger.final) and len(ledger.final) >= 20


def test_raising_n_with_one_active_request_and_a_small_pool_keeps_the_queue_moving(parts):
    """Reported wedge: N raised live to 40 with max_active_requests 1: admission wanted
    worst case + reserved blocks free while relief kept only the reserved ones, so nothing was
    admitted again and the queue grew without bound."""
    base = EngineConfig(max_active_requests=1, decode_steps_per_frame=4)
    need40 = Engine.frame_blocks(MC, base) + -(-(MC.max_prefix_tokens + MC.max_prompt_tokens + 40)
                                               // base.block_size) + 1
    engine = make(parts, decode_steps_per_frame=4, max_decode_steps=12, max_active_requests=1,
                  memory_every_n_frames=1, num_blocks=need40 + 2, max_waiting_requests=1000)
    ledger = Ledger()
    for i in range(5):
        step(engine, ledger, i)
    engine.update_config(max_decode_steps=40)
    admitted_frames = []
    for i in range(5, 45):
        out = step(engine, ledger, i)
        if out.admitted:
            admitted_frames.append(i)
    # one request of 40 tokens at k=4 finishes every 10 frames: the queue keeps moving
    assert len(admitted_frames) >= 3, admitted_frames
    left = engine.scheduler.num_unfinished
    drain(engine, ledger, 45, 10 * left + 20)
    assert all(reason == "length" for reason in ledger.final.values())


def test_lowering_max_active_live_keeps_the_queue_moving(parts):
    engine = make(parts, decode_steps_per_frame=2, max_decode_steps=6, max_active_requests=8,
                  memory_every_n_frames=1)
    ledger = Ledger()
    for i in range(6):
        engine.ask(QUESTIONS[i % 3])
        step(engine, ledger, i)
    engine.update_config(max_active_requests=1)
    for i in range(6, 12):
        out = step(engine, ledger, i)
    assert out.num_running <= 1
    drain(engine, ledger, 12, 80)


def test_a_frame_that_raises_keeps_its_questions(parts, monkeypatch):
    engine = make(parts, decode_steps_per_frame=2, max_decode_steps=4, memory_every_n_frames=0)
    ledger = Ledger()
    rid = engine.ask("What is on the table?\n")
    real = engine.runner.denoise

    def broken(*args, **kwargs):
        raise RuntimeError("device lost")

    monkeypatch.setattr(engine.runner, "denoise", broken)
    with pytest.raises(RuntimeError, match="device lost"):
        engine.step(FRAMES[0])
    monkeypatch.setattr(engine.runner, "denoise", real)
    assert engine.kv.usage().blocks_used == 0  # the failed frame's action path was released
    out = step(engine, ledger, 1)
    assert [u.id for u in out.updates] == [rid] and out.updates[0].birth_frame == 1
    drain(engine, ledger, 2, 10)
    assert ledger.final == {rid: "length"}


def test_parallel_joins_its_language_thread_when_the_action_path_raises(parts, monkeypatch):
    engine = make(parts, mode="parallel", decode_steps_per_frame=2, max_decode_steps=4,
                  memory_every_n_frames=1)
    ledger = Ledger()
    step(engine, ledger, 0)
    engine.ask("What is on the table?\n")
    real = engine.runner.denoise

    def broken(*args, **kwargs):
        raise RuntimeError("device lost")

    monkeypatch.setattr(engine.runner, "denoise", broken)
    with pytest.raises(RuntimeError, match="device lost"):
        engine.step(FRAMES[1])
    assert not any(t.name == "oxygen-language" for t in threading.enumerate())
    monkeypatch.setattr(engine.runner, "denoise", real)
    # the language work the failed frame did is reported by the next good frame
    step(engine, ledger, 2)
    drain(engine, ledger, 3, 10)
    assert len(ledger.final) == 4 and set(ledger.final.values()) == {"length"}


def test_a_full_queue_refuses_the_newest_lowest_priority_with_a_reason(parts):
    engine = make(parts, decode_steps_per_frame=1, max_decode_steps=12, max_active_requests=1,
                  memory_every_n_frames=1, max_waiting_requests=3)
    ledger = Ledger()
    for i in range(8):
        step(engine, ledger, i)
    assert len(engine.scheduler.waiting) <= 3
    refused = [rid for rid, why in ledger.final.items() if why == "refused"]
    assert refused, "nothing was refused: the test proves nothing"
    qid = engine.ask("What is on the table?\n", priority=1)  # outranks waiting memories
    step(engine, ledger, 8)
    assert qid in {r.id for r in engine.scheduler.waiting + engine.scheduler.running}
    drain(engine, ledger, 9, 80)
    assert ledger.final[qid] == "length"


# -- property: random operation sequences ---------------------------------------------------------
OPS = st.one_of(
    st.tuples(st.just("ask"), st.integers(1, 4), st.integers(0, 2), st.integers(1, 20)),
    st.tuples(st.just("k"), st.integers(1, 6)),
    st.tuples(st.just("N"), st.integers(1, 24)),
    st.tuples(st.just("S"), st.integers(1, 3)),
    st.tuples(st.just("mode"), st.sampled_from(MODES)),
    st.tuples(st.just("max_active"), st.integers(1, 6)),
    st.tuples(st.just("memory"), st.integers(0, 3)),
    st.tuples(st.just("step"), st.integers(1, 4)),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=25), extra_blocks=st.integers(0, 40),
       seed=st.integers(0, 3))
def test_random_operations_never_wedge_or_lose_a_request(parts, ops, extra_blocks, seed):
    base = EngineConfig()
    # smallest pool that admits one request of the largest N tried beside the action path
    need = Engine.frame_blocks(MC, base) + -(-(MC.max_prefix_tokens + MC.max_prompt_tokens + 24)
                                             // base.block_size) + 1
    engine = make(parts, decode_steps_per_frame=2, max_decode_steps=6, denoise_steps=1,
                  memory_every_n_frames=1, max_active_requests=3, max_waiting_requests=6,
                  num_blocks=need + extra_blocks, seed=seed)
    ledger = Ledger()
    asked: set[int] = set()
    rng = np.random.default_rng(seed)
    cap = 3  # the largest max_active_requests so far (running requests above a lowered cap finish)
    i = 0
    for op in ops:
        kind = op[0]
        if kind == "ask":
            _, count, priority, n = op
            for _ in range(count):
                asked.add(engine.ask(QUESTIONS[int(rng.integers(3))], priority=priority,
                                     max_new_tokens=n))
        elif kind == "step":
            for _ in range(op[1]):
                step(engine, ledger, i)
                i += 1
        else:
            key = {"k": "decode_steps_per_frame", "N": "max_decode_steps", "S": "denoise_steps",
                   "mode": "mode", "max_active": "max_active_requests",
                   "memory": "memory_every_n_frames"}[kind]
            engine.update_config(**{key: op[1]})
            if kind == "max_active":
                cap = max(cap, op[1])
        assert engine.num_live_requests <= cap + 6 + len(engine.intake.pending)
    # after the asks stop: every request finishes or is refused within a bounded number of frames
    drain(engine, ledger, i, 40 * 24)
    assert asked <= set(ledger.final), f"lost: {sorted(asked - set(ledger.final))}"
    assert ledger.seen == set(ledger.final)


@pytest.mark.parametrize("mode", MODES)
def test_the_smallest_pool_validation_accepts_serves_every_mode(parts, mode):
    """num_blocks = the action path + one worst-case request (what validate_changes requires):
    every mode still admits and finishes requests (parallel: the language thread runs while this
    frame's action path holds its blocks, so it keeps nothing more free for the next frame)."""
    cfg = EngineConfig(max_decode_steps=12)
    smallest = Engine.frame_blocks(MC, cfg) + request_blocks(
        MC.max_prefix_tokens, MC.max_prompt_tokens, 12, cfg.block_size, with_prefix=True)
    engine = make(parts, mode=mode, decode_steps_per_frame=4, max_decode_steps=12,
                  memory_every_n_frames=1, num_blocks=smallest)
    with pytest.raises(ValueError, match="needs up to"):
        engine.validate_changes(max_decode_steps=12 + cfg.block_size)
    ledger = Ledger()
    for i in range(4):
        step(engine, ledger, i)
    drain(engine, ledger, 4, 40)
    assert len(ledger.final) == 4 and set(ledger.final.values()) == {"length"}
