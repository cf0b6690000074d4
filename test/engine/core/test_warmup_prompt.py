"""Engine.warmup on a small model whose prompts are short: warmup's prompt is the configured
instruction, which fits max_prompt_tokens (it used to be a fixed longer synthetic instruction,
and such a model failed to start)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.model import init_model
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

SHORT = "pick up"


def short_prompt_engine() -> tuple[Engine, int]:
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
    cfg = EngineConfig(instruction=SHORT, denoise_steps=2, max_decode_steps=4, decode_steps_per_frame=4)
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
