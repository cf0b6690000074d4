"""Whole tiny engine frames with attention_backend="triton" (Triton's interpreter on the CPU, run
by test_triton_interpreted.py) give the same tokens and actions as the C++ op: decode, suffix
prefill, prefix-cache hits and denoise all go through the kernel."""
from __future__ import annotations

import numpy as np
import pytest

from oxygen_ros.engine.runner.attention import triton_paged

if not triton_paged.INTERPRETED:
    pytest.skip("needs TRITON_INTERPRET=1 (test_triton_interpreted.py)", allow_module_level=True)

from oxygen_ros.engine.runner.attention import load_cpp_op
from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["tiny"]


def _frames(backend: str, mode: str, n: int = 3):
    model, tok = init_model(MC, seed=0), build_tiny_tokenizer(512)
    engine = Engine(MC, EngineConfig(mode=mode, attention_backend=backend, decode_steps_per_frame=2,
                                     max_decode_steps=4, denoise_steps=2), model=model, tokenizer=tok)
    assert engine.runner.backend == backend
    engine.ask("What is on the table?\n")
    stream = SyntheticStream(MC, seed=0)
    outs = [engine.step(stream.frame(i)) for i in range(n)]
    return ([o.actions for o in outs],
            [(u.id, u.new_tokens, u.is_final) for o in outs for u in o.updates])


@pytest.mark.skipif(not load_cpp_op(), reason="C++ toolchain unavailable")
@pytest.mark.parametrize("mode", ["oxygen", "isolated"])
def test_triton_frames_equal_cpp_frames(mode):
    actions_t, tokens_t = _frames("triton", mode)
    actions_c, tokens_c = _frames("cpp", mode)
    assert tokens_t == tokens_c and len(tokens_t) >= 3
    for a, b in zip(actions_t, actions_c):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-5)


@pytest.mark.skipif(not load_cpp_op(), reason="C++ toolchain unavailable")
def test_denoise_and_suffixes_go_through_the_tiled_kernel(monkeypatch):
    """The runner hands the query-tiled kernel every multi-query call (the action tokens of each
    denoise step, a frame's packed prompt suffixes, eager or through the denoise graph stand-in)
    and the per-query kernel the one-token decode steps; frames stay equal to the C++ op's."""
    calls = []
    real = triton_paged.paged_attention_triton

    def spy(q, *args, seq_start=None, **kw):
        calls.append((q.shape[0], seq_start is not None))
        return real(q, *args, seq_start=seq_start, **kw)

    monkeypatch.setattr(triton_paged, "paged_attention_triton", spy)
    for graphs in (False, True):
        calls.clear()
        model, tok = init_model(MC, seed=0), build_tiny_tokenizer(512)
        engine = Engine(MC, EngineConfig(mode="oxygen", attention_backend="triton",
                                         decode_steps_per_frame=2, max_decode_steps=4,
                                         denoise_steps=2, cuda_graphs=graphs),
                        model=model, tokenizer=tok)
        engine.ask("What is on the table?\n")
        out = engine.step(SyntheticStream(MC, seed=0).frame(0))
        tiled = {t for t, used in calls if used}
        assert MC.action_horizon in tiled, calls  # denoise
        assert any(t > 1 and t != MC.action_horizon for t in tiled), calls  # packed suffixes
        assert all(not used for t, used in calls if t == 1)  # decode keeps the per-query kernel
        ref = Engine(MC, EngineConfig(mode="oxygen", attention_backend="cpp",
                                      decode_steps_per_frame=2, max_decode_steps=4,
                                      denoise_steps=2), model=model, tokenizer=tok)
        ref.ask("What is on the table?\n")
        expect = ref.step(SyntheticStream(MC, seed=0).frame(0))
        np.testing.assert_allclose(out.actions, expect.actions, atol=2e-5, rtol=1e-5)
        assert [u.new_tokens for u in out.updates] == [u.new_tokens for u in expect.updates]
