"""Engine.warmup on a small model whose prompts are short: warmup's prompt is the configured
instruction, which fits max_prompt_tokens (it used to be a fixed longer synthetic instruction,
and such a model failed to start)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

SHORT = "pick up"


def short_prompt_engine(k: int = 4) -> tuple[Engine, int]:
    """A tiny model whose max_prompt_tokens holds SHORT with any state but not the synthetic
    stream's instruction; returns (engine, the synthetic prompt's length)."""
    base = PRESETS["tiny"]
    tok = build_tiny_tokenizer(base.vocab_size)
    probe = Engine(base, EngineConfig(instruction=SHORT), model=init_model(base, seed=0), tokenizer=tok)
    stream = SyntheticStream(base)
    synthetic = len(probe.intake.prompt_ids(stream.instruction,
                                            np.asarray(stream.frame(0).state, np.float32)))
    limit = len(probe.intake.prompt_ids(SHORT, probe.intake.worst_state))
    mc = dataclasses.replace(base, max_prompt_tokens=limit)
    cfg = EngineConfig(instruction=SHORT, denoise_steps=2, max_decode_steps=4, decode_steps_per_frame=k)
    return Engine(mc, cfg, model=init_model(mc, seed=0), tokenizer=tok), synthetic


def test_warmup_fits_the_models_prompt_length():
    engine, synthetic = short_prompt_engine()
    assert synthetic > engine.model_config.max_prompt_tokens  # the old warmup prompt did not fit
    engine.warmup()  # used to raise ValueError (max_prompt_tokens)
    assert engine.frame == 0 and not engine.has_unfinished()
    obs = dataclasses.replace(SyntheticStream(engine.model_config).frame(0), instruction=SHORT)
    out = engine.step(obs)
    assert out.actions.shape[0] == engine.model_config.action_horizon


def test_warmup_with_a_given_instruction_uses_it():
    engine, _ = short_prompt_engine()
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        engine.warmup(instruction="pick up the red cube and place it in the bowl")


class FakeClock:
    """Engine warmup's clock, advanced by each frame the engine steps."""

    def __init__(self, frame_s: float) -> None:
        self.now, self.frame_s, self.frames = 0.0, frame_s, 0

    def __call__(self) -> float:
        return self.now


def timed_engine(monkeypatch, frame_s: float) -> tuple[Engine, FakeClock]:
    """The short-prompt engine whose every frame takes `frame_s` seconds of a fake clock."""
    import oxygen_ros.engine.core.engine as engine_module

    engine, _ = short_prompt_engine(k=1)  # the language request decodes over several frames
    clock = FakeClock(frame_s)
    monkeypatch.setattr(engine_module, "_clock", clock)
    step = engine._step

    def timed_step(*args, **kwargs):
        clock.frames += 1
        clock.now += clock.frame_s
        return step(*args, **kwargs)

    monkeypatch.setattr(engine, "_step", timed_step)
    return engine, clock


def test_warmup_of_a_slow_model_is_one_frame(monkeypatch):
    """Frames as slow as the full pi0.5's on a CPU (15 s): one warmup frame, not a minute of
    them (the whole warmup ran 66 s after the load at full size)."""
    engine, clock = timed_engine(monkeypatch, 15.0)
    engine.warmup()
    assert clock.frames == 1
    assert engine.frame == 0 and not engine.has_unfinished()  # forgotten as a full warmup is
    obs = dataclasses.replace(SyntheticStream(engine.model_config).frame(0), instruction=SHORT)
    assert engine.step(obs).actions.shape[0] == engine.model_config.action_horizon


def test_warmup_of_a_fast_model_runs_every_frame(monkeypatch):
    engine, clock = timed_engine(monkeypatch, 0.001)
    engine.warmup()
    fast = clock.frames
    unbounded, clock2 = timed_engine(monkeypatch, 15.0)
    unbounded.warmup(budget_s=None)
    assert fast == clock2.frames >= 4  # both action frames and the language request's decode
    bounded, clock3 = timed_engine(monkeypatch, 4.0)
    bounded.warmup(budget_s=10.0)  # 4 s, 8 s, then 12 s >= 10 s: stop
    assert clock3.frames == 3
    assert bounded.frame == 0 and not bounded.has_unfinished()  # the cut request is dropped


def test_warmup_budget_is_checked():
    engine, _ = short_prompt_engine()
    with pytest.raises(ValueError, match="budget_s"):
        engine.warmup(budget_s=-1.0)


def recorded_engine(monkeypatch, estimate_s: float, **config) -> tuple[Engine, list[tuple]]:
    """A tiny engine whose full frame is estimated at `estimate_s` seconds; records each warmup
    step's (valid cameras, denoise steps, memory every n frames)."""
    mc = PRESETS["tiny"]
    cfg = EngineConfig(denoise_steps=3, max_decode_steps=4, **config)
    engine = Engine(mc, cfg, model=init_model(mc, seed=0), tokenizer=build_tiny_tokenizer(mc.vocab_size))
    monkeypatch.setattr(engine, "estimate_frame_s", lambda: estimate_s)
    steps: list[tuple] = []
    step = engine._step

    def recorded(obs, *args, **kwargs):
        steps.append((len(obs.valid_images()), engine.config.denoise_steps,
                      engine.config.memory_every_n_frames))
        return step(obs, *args, **kwargs)

    monkeypatch.setattr(engine, "_step", recorded)
    return engine, steps


def test_warmup_of_a_frame_past_the_budget_is_one_reduced_frame(monkeypatch):
    """A full frame estimated at 60 s on a CPU (the full pi0.5 at one thread: 54 s): one frame
    of the first camera, one denoise step, no language request; then the engine is as new."""
    engine, steps = recorded_engine(monkeypatch, 60.0)
    saved = engine.config
    note = engine.warmup()
    assert steps == [(1, 1, 0)]
    assert "one reduced frame" in note and "estimated at 60 s" in note
    assert engine.config == saved and engine.frame == 0 and not engine.has_unfinished()
    out = engine.step(SyntheticStream(engine.model_config).frame(0))
    assert out.s == 3 and out.frame == 0


def test_warmup_within_the_budget_runs_full_frames(monkeypatch):
    engine, steps = recorded_engine(monkeypatch, 5.0)
    note = engine.warmup()
    cams = engine.model_config.num_cameras
    assert steps[0] == (cams, 3, 1) and len(steps) >= 2
    assert note.startswith(f"warmup: {len(steps)} full frame(s)") and "estimated at 5.0 s" in note


def test_warmup_with_cuda_graphs_runs_the_real_shapes(monkeypatch):
    """Capture needs the real shapes: no reduced frame with cuda_graphs (CPU stand-in here)."""
    engine, steps = recorded_engine(monkeypatch, 60.0, cuda_graphs=True)
    engine.warmup()
    assert steps[0] == (engine.model_config.num_cameras, 3, 1)
    unbounded, steps2 = recorded_engine(monkeypatch, 60.0)
    unbounded.warmup(budget_s=None)  # no budget: every frame, full
    assert steps2[0] == (unbounded.model_config.num_cameras, 3, 1) and len(steps2) >= 2


def test_estimate_frame_s_is_small_for_the_tiny_model():
    mc = PRESETS["tiny"]
    engine = Engine(mc, EngineConfig(), model=init_model(mc, seed=0),
                    tokenizer=build_tiny_tokenizer(mc.vocab_size))
    assert 0.0 < engine.estimate_frame_s() < 1.0
