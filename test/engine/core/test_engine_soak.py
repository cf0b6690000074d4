"""A long shift in a few seconds: nothing the engine holds grows with the number of frames.

oxygen mode, a memory request every frame, thousands of frames on the tiny preset with the
model's arithmetic replaced (test/engine/core/fake_runner.py): the engine, scheduler and KV manager
run for real. Live Request objects stay bounded and traced Python memory does not grow per frame.
(`oxygen-bench engine-soak` runs the same with the real model for longer.)"""
from __future__ import annotations

import gc
import tracemalloc

from fake_runner import fake_compute
from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.request import Request
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["tiny"]


def live_requests() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, Request))


def test_nothing_grows_per_frame(mode="oxygen"):
    engine = Engine(MC, EngineConfig(mode=mode, decode_steps_per_frame=4, max_decode_steps=12,
                                     denoise_steps=1, memory_every_n_frames=1),
                    model=init_model(MC, seed=0), tokenizer=build_tiny_tokenizer(512))
    fake_compute(engine)
    frames = [SyntheticStream(MC, seed=0).frame(i) for i in range(8)]  # reused: no input growth
    warm, total = 300, 1500
    gc.collect()
    base = live_requests()  # other tests' objects still alive in this process
    tracemalloc.start()
    try:
        for i in range(total):
            if i % 50 == 0:
                engine.ask("What is on the table?\n")
            out = engine.step(frames[i % len(frames)])
            assert out.actions.shape == (MC.action_horizon, MC.action_dim)
            if i == warm:
                gc.collect()
                live_warm, mem_warm = live_requests() - base, tracemalloc.get_traced_memory()[0]
        gc.collect()
        live_end, mem_end = live_requests() - base, tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    per_frame = (mem_end - mem_warm) / (total - warm)
    print(f"{mode}: live requests {live_warm} at frame {warm}, {live_end} at frame {total}; "
          f"traced memory {mem_warm} -> {mem_end} B ({per_frame:+.1f} B/frame)")
    # steady state is ceil(N/k) = 3 running requests; one question every 50 frames
    assert live_end <= 8 and live_warm <= 8, (live_warm, live_end)
    assert per_frame < 20, f"traced memory grows {per_frame:.0f} B per frame"
