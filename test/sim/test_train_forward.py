"""The training forward computes what the engine serves: the action expert's velocity and the
language logits from oxygen_ros/sim/train_forward.py equal the ModelRunner's (paged KV) for the
same images, prompts and noise, with samples of different prompt lengths in one batch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.runner.model_runner import ModelRunner, SeqView
from oxygen_ros.sim.dataset import images_to_model
from oxygen_ros.sim.policy import PromptCodec, build_tokenizer
from oxygen_ros.sim.train_forward import IGNORE, Batch, language_logits, run_prefix, velocity

INSTRUCTIONS = ["reach the red goal", "press the button from the top down"]
CAPTIONS = ["moving to the goal", "pressing the button"]


@pytest.fixture(scope="module")
def setup():
    config = PRESETS["tiny"]
    tok = build_tokenizer(INSTRUCTIONS + CAPTIONS, vocab_size=config.vocab_size)
    model = init_model(config, seed=3)
    return config, tok, model, PromptCodec(config, tok)


def make_batch(config, codec, rng):
    s = config.vision.image_size
    images = rng.integers(0, 256, size=(2, s, s, 3), dtype=np.uint8)
    states = rng.uniform(-1, 1, size=(2, 4)).astype(np.float32)
    prompts = [codec.prompt_ids(i, st) for i, st in zip(INSTRUCTIONS, states)]
    assert len(prompts[0]) != len(prompts[1])  # padding is exercised
    mem = codec.memory_ids()
    langs = [mem + codec.caption_ids(c)[:-1] for c in CAPTIONS]
    lp, lc = max(map(len, prompts)), max(map(len, langs))
    prompt = torch.zeros(2, lp, dtype=torch.long)
    lang = torch.zeros(2, lc, dtype=torch.long)
    for r in range(2):
        prompt[r, :len(prompts[r])] = torch.tensor(prompts[r])
        lang[r, :len(langs[r])] = torch.tensor(langs[r])
    actions = torch.randn(2, config.action_horizon, config.action_dim, generator=torch.Generator().manual_seed(0))
    batch = Batch(images_to_model(images), prompt, torch.tensor([len(p) for p in prompts]), lang,
                  torch.tensor([len(x) for x in langs]), torch.full((2, lc), IGNORE), actions)
    return batch, images, prompts, langs


def served(model, config, image, prompt_ids):
    runner = ModelRunner(model, config, num_blocks=32, block_size=16)
    n = config.prefix_tokens(1, len(prompt_ids))
    table = list(range(32))
    runner.prefill_observation([image], prompt_ids, SeqView(table, n))
    return runner, table, n


def test_velocity_matches_the_runner(setup):
    config, tok, model, codec = setup
    batch, images, prompts, _ = make_batch(config, codec, np.random.default_rng(0))
    prefix = run_prefix(model, batch)
    noise = torch.randn(2, config.action_horizon, config.action_dim,
                        generator=torch.Generator().manual_seed(1))
    for r in range(2):
        runner, table, n = served(model, config, images[r], prompts[r])
        assert int(prefix.prefix_len[r]) == n
        # one Euler step from t=1: x1 = noise - v(noise, 1); two steps also visit t=0.5
        one = runner.denoise(SeqView(table, n), n, noise[r], num_steps=1)
        v1 = noise[r] - one
        two = runner.denoise(SeqView(table, n), n, noise[r], num_steps=2)
        x_half = noise[r] - 0.5 * v1
        v_half = (x_half - two) / 0.5
        for t, x, v_engine in ((1.0, noise[r], v1), (0.5, x_half, v_half)):
            xt = noise.clone()
            xt[r] = x
            v_train = velocity(model, prefix, xt, torch.full((2,), t))[r]
            torch.testing.assert_close(v_train, v_engine.float(), atol=2e-5, rtol=1e-4)


def test_language_logits_match_the_runner(setup):
    config, tok, model, codec = setup
    batch, images, prompts, langs = make_batch(config, codec, np.random.default_rng(1))
    logits = language_logits(model, batch)
    for r in range(2):
        runner, table, n = served(model, config, images[r], prompts[r])
        for j in (len(codec.memory_ids()) - 1, len(langs[r]) - 1):
            tokens, margins = runner.generate([SeqView(table, n)], [langs[r][:j + 1]], [1])
            top = torch.topk(logits[r, j], 2)
            assert tokens[0][0] == int(top.indices[0])
            assert margins[0][0] == pytest.approx(float(top.values[0] - top.values[1]), abs=1e-4)


def test_training_forward_has_gradients(setup):
    config, tok, model, codec = setup
    batch, *_ = make_batch(config, codec, np.random.default_rng(2))
    m = init_model(config, seed=3).train().requires_grad_(True)
    from oxygen_ros.sim.train_forward import losses
    out = losses(m, batch, torch.Generator().manual_seed(0))
    out.total.backward()
    assert m.vision.tower.embeddings.patch_embedding.weight.grad.abs().sum() > 0
    assert m.action_heads[0].time_mlp_in.weight.grad.abs().sum() > 0


def test_caption_only_samples_train_no_action(setup):
    """A caption-only frame (a missing episode: its targets are wrong on purpose) adds nothing
    to the flow loss; each trained sample's loss is its own; all masked: flow 0, caption kept."""
    import dataclasses

    from oxygen_ros.sim.train_forward import losses

    config, tok, model, codec = setup
    batch, *_ = make_batch(config, codec, np.random.default_rng(2))
    batch.lang_target[:, -1] = 5  # a caption target, so the caption loss is defined
    m = init_model(config, seed=3).train()

    def run(mask):
        b = batch if mask is None else dataclasses.replace(batch, action_mask=torch.tensor(mask))
        return losses(m, b, torch.Generator().manual_seed(0))  # the same noise and times

    full, first, second, none = run(None), run([True, False]), run([False, True]), run([False, False])
    assert float(first.flow) != pytest.approx(float(second.flow))
    assert float(full.flow) == pytest.approx((float(first.flow) + float(second.flow)) / 2, rel=1e-5)
    assert float(first.caption) == pytest.approx(float(full.caption))
    assert float(none.flow) == 0.0 and float(none.total) == pytest.approx(0.25 * float(none.caption))
