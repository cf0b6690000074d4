"""A hybrid backbone's state slots hold steady over a long run (qwen35-tiny, oxygen mode, a
memory request every frame): slots and blocks in use settle and stay, live requests stay
bounded, traced memory does not grow per frame. The long run replaces the model's arithmetic
(test/engine/fake_runner.py; the slots' bookkeeping, their copies and the scheduler run for
real); a short run with the real model checks the same steadiness."""
from __future__ import annotations

import gc
import tracemalloc

import torch
from fake_runner import fake_compute
from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.request import Request
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["qwen35-tiny"]
CFG = EngineConfig(mode="oxygen", decode_steps_per_frame=4, max_decode_steps=12,
                   denoise_steps=1, memory_every_n_frames=1, max_active_requests=8)


def _engine() -> Engine:
    return Engine(MC, CFG, model=init_model(MC, seed=0), tokenizer=build_tiny_tokenizer(2048))


def _live() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, Request))


def test_state_slots_and_memory_steady_over_a_long_run():
    engine = _engine()
    fake_compute(engine)
    chunk = {"pi_v3": torch.zeros(16, 7)}
    engine.runner.action_chunks = lambda *a, **k: chunk
    frames = [SyntheticStream(MC, seed=0).frame(i) for i in range(8)]
    warm, total = 150, 600
    gc.collect()
    base = _live()
    tracemalloc.start()
    slots = set()
    try:
        for i in range(total):
            if i % 40 == 0:
                engine.ask("What is on the table?")
            out = engine.step(frames[i % len(frames)])
            if i >= warm:
                slots.add((out.kv.state_slots_used, out.kv.blocks_used))
            if i == warm:
                gc.collect()
                live_warm, mem_warm = _live() - base, tracemalloc.get_traced_memory()[0]
        gc.collect()
        live_end, mem_end = _live() - base, tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    per_frame = (mem_end - mem_warm) / (total - warm)
    # steady state: the last two frames' memory requests running (+ a question now and then),
    # each in its own slot; a frame's prefix slot is released within the frame
    used = {s for s, _ in slots}
    assert used <= {2, 3} and out.kv.peak_state_slots <= out.kv.state_slots_total, slots
    assert live_end <= 8 and live_warm <= 8, (live_warm, live_end)
    assert per_frame < 20, f"traced memory grows {per_frame:.0f} B per frame"
    engine.kv.check_invariants()


def test_real_model_slots_settle():
    engine = _engine()
    stream = SyntheticStream(MC, seed=1)
    seen = []
    for i in range(8):
        out = engine.step(stream.frame(i % 3))
        seen.append((out.kv.state_slots_used, out.kv.blocks_used, out.num_running))
    # from frame 1 on, the memory requests of the last two frames run (12 tokens, 4 a frame:
    # each finishes in its third frame), each holding its own slot
    assert set(seen[1:]) == {(2, seen[1][1], 2)}, seen
    assert out.kv.peak_state_slots == 3  # + the frame's prefix (its snapshot) during the frame
    for _ in engine.drain(stream.frame):
        pass
    assert engine.kv.usage().state_slots_used == 0
    engine.kv.check_invariants()
