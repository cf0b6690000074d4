"""Engine.abort: a request dropped while asked, waiting or running produces no further update
and returns its KV blocks."""
from __future__ import annotations

import pytest

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["tiny"]


@pytest.fixture(scope="module")
def engine_parts():
    return init_model(MC, seed=0), build_tiny_tokenizer(512)


@pytest.mark.parametrize("frames_before", [0, 1, 2])  # asked / attached+running / mid-decode
def test_abort_ends_request_and_frees_kv(engine_parts, frames_before):
    model, tok = engine_parts
    eng = Engine(MC, EngineConfig(memory_every_n_frames=0, max_decode_steps=12,
                                  decode_steps_per_frame=2), model=model, tokenizer=tok)
    stream = SyntheticStream(MC, seed=0)
    baseline = eng.kv.usage().blocks_used
    rid = eng.ask("what is on the table?")
    keep = eng.ask("where is the cup?")
    for i in range(frames_before):
        eng.step(stream.frame(i))
    assert eng.abort(rid) is True
    assert eng.abort(rid) is False  # no longer live
    seen = []
    for i in range(frames_before, frames_before + 12):
        seen += [u.id for u in eng.step(stream.frame(i)).updates]
    assert rid not in seen and keep in seen  # the other request is unaffected
    assert not eng.has_unfinished()
    assert eng.kv.usage().blocks_used == baseline


def test_abort_unknown_request(engine_parts):
    model, tok = engine_parts
    eng = Engine(MC, EngineConfig(), model=model, tokenizer=tok)
    assert eng.abort(12345) is False
