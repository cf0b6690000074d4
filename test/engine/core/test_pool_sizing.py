"""Engine.auto_num_blocks: the KV pool kv.num_blocks 0 sizes, from what the configured serving
needs with prefix sharing (requests born on one frame share its prefix), not every request with
its own prefix copy."""
from __future__ import annotations

import pytest

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.core.scheduler import request_blocks
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer


def test_pi05_default_pool_blocks():
    """pi0.5: prefix 968 tokens = 61 blocks, a request's own 200 + 12 tokens = 14 blocks + 1
    CoW, a frame's action path 66 blocks; N 12 at k 4: prefixes of 4 frames."""
    mc, ec = PRESETS["pi05"], EngineConfig()
    assert Engine.prefix_frames(ec) == 4
    assert Engine.frame_blocks(mc, ec) == 66
    assert Engine.auto_num_blocks(mc, ec) == 4 * 61 + 34 * 15 + 2 * 66 == 886  # was 2716
    assert Engine.auto_num_blocks(mc, EngineConfig(max_active_requests=4)) == 4 * 61 + 6 * 15 + 132


def test_prefix_frames_follow_n_k_and_the_rate_target():
    assert Engine.prefix_frames(EngineConfig(max_decode_steps=13, decode_steps_per_frame=4)) == 5
    # under a target the engine may decode only k_min tokens a frame
    assert Engine.prefix_frames(EngineConfig(target_action_hz=10.0, k_min=1)) == 13
    # never more prefixes than requests
    assert Engine.prefix_frames(EngineConfig(max_active_requests=1, max_decode_steps=64,
                                             decode_steps_per_frame=1)) == 3


@pytest.mark.parametrize("preset", ["tiny", "pi05"])
@pytest.mark.parametrize("n,k,active", [(1, 1, 1), (12, 4, 32), (512, 1, 256), (64, 64, 1)])
def test_one_preempted_request_always_fits(preset, n, k, active):
    """A request admitted again after preemption needs its own prefix copy beside the next
    frame's action path: the pool always holds one (else Intake would refuse every request)."""
    mc = PRESETS[preset]
    ec = EngineConfig(max_decode_steps=n, decode_steps_per_frame=k, max_active_requests=active)
    worst = request_blocks(mc.max_prefix_tokens, mc.max_prompt_tokens, n, ec.block_size, True)
    assert worst + Engine.frame_blocks(mc, ec) <= Engine.auto_num_blocks(mc, ec)


def test_requests_of_one_frame_all_run_in_the_smaller_pool():
    """max_active_requests questions born on one frame share its prefix: all decode at once."""
    mc = PRESETS["tiny"]
    engine = Engine(mc, EngineConfig(memory_every_n_frames=0), model=init_model(mc, seed=0),
                    tokenizer=build_tiny_tokenizer(mc.vocab_size))
    assert engine.runner.pool.shape[2] == Engine.auto_num_blocks(mc, engine.config) + 1 == 207
    for i in range(engine.config.max_active_requests):
        engine.ask(f"what is {i}?")
    out = engine.step(SyntheticStream(mc).frame(0))
    assert out.admitted == out.batch_size == 32 and out.num_waiting == 0
