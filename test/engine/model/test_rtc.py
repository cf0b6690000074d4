"""Real-time chunking in the engine (engine/model/rtc.py): guidance pulls the chunk's prefix to the
previous chunk, beta = 0 is unguided, inpainting keeps the prefix exact, guided chunks are finite
and deterministic, and language outputs do not change with RTC in any mode."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oxygen_ros.bench.compare import collect_requests
from oxygen_ros.engine.config import MODES, PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.model.rtc import ActionPrior, guidance_weight, prefix_weights
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["tiny"]  # horizon 10, action_dim 8
JOINTS = 6  # the prior covers the robot's joints, not the padded dims
DELAY = 3


@pytest.fixture(scope="module")
def parts():
    return init_model(MC, seed=5), build_tiny_tokenizer(512), SyntheticStream(MC, seed=5)


def engine(parts, **cfg) -> Engine:
    model, tok, _ = parts
    base = dict(memory_every_n_frames=0, seed=5, denoise_steps=10)
    return Engine(MC, EngineConfig(**{**base, **cfg}), model=model, tokenizer=tok)


def far_prior(unguided: np.ndarray) -> ActionPrior:
    """A target 3 units away from the unguided sample on every executed joint."""
    return ActionPrior((unguided[:8, :JOINTS] + 3.0).astype(np.float32), DELAY)


def step(parts, eng: Engine, prior: ActionPrior | None, frame: int = 2) -> np.ndarray:
    obs = parts[2].frame(frame)
    return eng.step(dataclasses.replace(obs, prior=prior)).actions


@pytest.fixture(scope="module")
def unguided(parts):
    return step(parts, engine(parts), None)


@pytest.mark.parametrize("jacobian", ["identity", "vjp"])
def test_guidance_pulls_the_prefix_to_the_previous_chunk(parts, unguided, jacobian):
    prior = far_prior(unguided)
    got = step(parts, engine(parts, rtc_jacobian=jacobian), prior)
    assert np.all(np.isfinite(got))
    before = np.abs(unguided[:DELAY, :JOINTS] - prior.actions[:DELAY]).mean()  # 3.0
    after = np.abs(got[:DELAY, :JOINTS] - prior.actions[:DELAY]).mean()
    assert after < 0.05 * before, (jacobian, before, after)
    # the ramp (weights 1 -> 0 between d and the prior's end) still pulls, less and less
    ramp = np.abs(got[DELAY:8, :JOINTS] - prior.actions[DELAY:8]).mean(axis=1)
    assert ramp[0] < 0.5 * before and ramp[0] < ramp[-1]


def test_beta_zero_is_unguided(parts, unguided):
    prior = far_prior(unguided)
    same = step(parts, engine(parts, rtc_jacobian="identity", rtc_max_guidance=0.0), prior)
    assert np.array_equal(same, unguided)  # the same kernels, a zero correction: bit for bit
    # vjp runs the velocity through differentiable attention over the gathered prefix K/V (the
    # paged kernels have no backward): equal up to float32 rounding
    vjp = step(parts, engine(parts, rtc_jacobian="vjp", rtc_max_guidance=0.0), prior)
    np.testing.assert_allclose(vjp, unguided, atol=1e-5)


def test_inpaint_keeps_the_prefix_exact(parts, unguided):
    prior = far_prior(unguided)
    got = step(parts, engine(parts, rtc_method="inpaint"), prior)
    assert np.array_equal(got[:DELAY, :JOINTS], prior.actions[:DELAY])
    assert np.all(np.isfinite(got)) and not np.allclose(got[DELAY:], unguided[DELAY:])


@pytest.mark.parametrize("jacobian", ["identity", "vjp"])
def test_guided_chunks_are_deterministic_for_a_seed(parts, unguided, jacobian):
    prior = far_prior(unguided)
    a = step(parts, engine(parts, rtc_jacobian=jacobian), prior)
    b = step(parts, engine(parts, rtc_jacobian=jacobian), prior)
    assert np.array_equal(a, b)


def test_cuda_graphs_engine_runs_the_guided_loop_eagerly(parts, unguided):
    prior = far_prior(unguided)
    eager = step(parts, engine(parts), prior)
    eng = engine(parts, cuda_graphs=True)
    np.testing.assert_allclose(step(parts, eng, prior), eager, atol=1e-5)
    assert eng.runner.denoise_graphs.keys == []  # no graph was built for the guided frame
    eng = engine(parts, cuda_graphs=True)
    np.testing.assert_allclose(step(parts, eng, None), unguided, atol=1e-5)
    assert eng.runner.denoise_graphs.keys  # an unguided frame still runs the graph


QUESTIONS = ["What is on the table?\n", "Describe the gripper.\n"]


def _run(parts, mode: str, rtc: bool) -> tuple[list[dict], list[np.ndarray]]:
    eng = engine(parts, mode=mode, decode_steps_per_frame=2, max_decode_steps=4,
                 memory_every_n_frames=1, max_active_requests=2, denoise_steps=2)
    outs, prev = [], None
    f = 0
    while f < 2 or eng.has_unfinished():
        if f < 2:
            eng.ask(QUESTIONS[f % 2])
        prior = ActionPrior(prev[2:, :JOINTS] + 1.0, 2) if rtc and prev is not None else None
        if f == 2:
            eng.update_config(memory_every_n_frames=0)
        out = eng.step(dataclasses.replace(parts[2].frame(f), prior=prior))
        outs.append(out)
        prev = out.actions
        f += 1
        assert f < 30
    return collect_requests(outs), [o.actions for o in outs]


@pytest.mark.parametrize("mode", MODES)
def test_language_is_identical_with_rtc_on_and_off(parts, mode):
    off, actions_off = _run(parts, mode, False)
    on, actions_on = _run(parts, mode, True)
    assert len(off) >= 3 and on == off
    assert not np.allclose(actions_on[1], actions_off[1])  # the guidance did act


def test_prefix_weights_and_guidance_schedule():
    np.testing.assert_allclose(prefix_weights(10, 2, 6), [1, 1, 0.8, 0.6, 0.4, 0.2, 0, 0, 0, 0],
                               atol=1e-6)
    assert prefix_weights(5, 9, 3).tolist() == [1, 1, 1, 0, 0]  # d clamped to H
    # S = 10: t = 1 (tau = 0) is capped at beta; symmetric around t = 0.5, minimum 2 there
    g = [guidance_weight(1.0 - k / 10, 10.0) for k in range(10)]
    assert g[0] == 10.0 and abs(g[5] - 2.0) < 1e-12
    np.testing.assert_allclose(g[1], 9.1111111, rtol=1e-6)
    np.testing.assert_allclose(g[1:5], g[9:5:-1], rtol=1e-9)
    assert guidance_weight(0.3, 0.0) == 0.0


def test_bad_priors_are_refused(parts):
    eng = engine(parts)
    obs = parts[2].frame(0)
    bad = [ActionPrior(np.full((4, JOINTS), np.nan, np.float32), 1),
           ActionPrior(np.zeros((4, MC.action_dim + 1), np.float32), 1),
           ActionPrior(np.zeros((4, JOINTS), np.float32), -1),
           ActionPrior(np.zeros((0, JOINTS), np.float32), 0)]
    for prior in bad:
        with pytest.raises(ValueError, match="action prior"):
            eng.step(dataclasses.replace(obs, prior=prior))
    assert eng.frame == 0 and eng.kv.usage().blocks_used == 0
    with pytest.raises(ValueError, match="rtc_jacobian"):
        EngineConfig(rtc_jacobian="exact")
    with pytest.raises(ValueError, match="rtc_max_guidance"):
        EngineConfig(rtc_max_guidance=-1.0)
