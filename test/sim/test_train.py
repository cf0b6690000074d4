"""Training the simulator policy: a step lowers the loss, the written checkpoint serves the same
chunks as the trained model (through the engine, as the node loads it), and the recorder writes
expert episodes whose targets replay to the expert's actions."""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.model import euler_sample
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.observation import Observation
from oxygen_ros.robot.build import ModelSource, build_engine
from oxygen_ros.sim.dataset import Batcher, Demos, images_to_model, norm_stats
from oxygen_ros.sim.policy import ACTION_PERIOD_STEPS, PromptCodec, build_tokenizer, policy_config
from oxygen_ros.sim.train import train
from oxygen_ros.sim.train_forward import Batch, losses, run_prefix, velocity

SMALL = dict(width=32, expert_width=32, depth=1, vision_width=16, vision_depth=1, patch=16)


def synthetic_demos(episodes: int = 4, frames: int = 12, seed: int = 0) -> Demos:
    """Two tasks of `episodes // 2` episodes each; images, states and targets random."""
    rng = np.random.default_rng(seed)
    n = episodes * frames
    ep = np.repeat(np.arange(episodes, dtype=np.int32), frames)
    task = (ep % 2).astype(np.int16)
    return Demos(
        images=rng.integers(0, 256, size=(n, 64, 64, 3), dtype=np.uint8),
        state=rng.uniform([-0.1, 0.4, 0.05, 0.3], [0.1, 0.9, 0.3, 1.0], size=(n, 4)).astype(np.float32),
        target=rng.uniform([-0.1, 0.4, 0.05, 0.3], [0.1, 0.9, 0.3, 1.0], size=(n, 4)).astype(np.float32),
        episode=ep, step=np.tile(np.arange(frames, dtype=np.int32) * 2, episodes), task=task,
        caption=(np.arange(n) % 3).astype(np.int16), tasks=["press", "close"],
        instructions=["press the button", "close the drawer"],
        captions=["moving to it", "pushing it", "it is done"],
        episode_success=np.ones(episodes, dtype=bool), episode_task=(np.arange(episodes) % 2).astype(np.int16),
        meta={"seed": seed, "frame_stride": 2, "image_size": 64, "camera": "corner4"})


def test_chunks_hold_at_the_episode_end():
    d = synthetic_demos(episodes=2, frames=12)
    idx = d.chunk_index(8)
    per = ACTION_PERIOD_STEPS // d.frame_stride
    assert idx[0].tolist() == [min(per * k, 11) for k in range(8)]
    assert idx[12].tolist() == [min(12 + per * k, 23) for k in range(8)]  # never the next episode
    assert idx[23].tolist() == [23] * 8


def test_split_holds_out_the_experts_episodes_the_same_with_or_without_driven_ones():
    """Policy-driven episodes (driven) are drawn apart from the expert's, as caption-only ones
    are, whether or not they train actions: the expert's held-out layouts do not change."""
    plain = synthetic_demos(episodes=8, frames=6)
    ep = plain.episode
    driven = np.concatenate([np.zeros(len(plain), bool), np.ones(len(plain), bool)])
    fields = {k: getattr(plain, k) for k in plain.__dataclass_fields__}
    more = Demos(**{**fields, **{k: np.concatenate([v, v]) for k, v in fields.items()
                                 if isinstance(v, np.ndarray) and len(v) == len(plain)},
                    "episode": np.concatenate([ep, ep + 8]),
                    "episode_success": np.ones(16, bool),
                    "episode_task": np.concatenate([plain.episode_task] * 2), "driven": driven})
    _, held_plain = plain.split(0.25, seed=3)
    _, held_more = more.split(0.25, seed=3)
    np.testing.assert_array_equal(held_more[~driven[held_more]], held_plain)
    assert driven[held_more].sum() == 2 * 6  # one driven episode of four per task
    np.testing.assert_array_equal(more.expert_frames, ~driven)
    with pytest.raises(ValueError, match="driven has shape"):
        Demos(**{**fields, "driven": np.zeros(3, bool)})


def test_a_training_step_lowers_the_loss():
    torch.manual_seed(0)
    d = synthetic_demos()
    config = policy_config(**SMALL)
    codec = PromptCodec(config, build_tokenizer(d.instructions + d.captions))
    batch = Batcher(d, codec, norm_stats(d, np.arange(len(d)))).batch(np.arange(8))
    model = init_model(config, seed=0).train().requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)

    def loss() -> torch.Tensor:  # the same noise and times every call: a fixed objective
        return losses(model, batch, torch.Generator().manual_seed(1)).total

    with torch.no_grad():
        before = float(loss())
    for _ in range(10):
        opt.zero_grad()
        loss().backward()
        opt.step()
    with torch.no_grad():
        after = float(loss())
    assert after < 0.7 * before, (before, after)


def test_checkpoint_serves_what_was_trained(tmp_path):
    d = synthetic_demos()
    data = d.save(tmp_path / "demos.npz")
    out = tmp_path / "ck"
    summary = train(data, out, epochs=1, batch_size=8, warmup=2, held_out=0.5, model_kw=SMALL,
                    progress=False, log_every=2)
    assert summary["steps"] >= 1 and (out / "loss.png").is_file() and (out / "loss.csv").is_file()
    assert json.loads((out / "training.json").read_text())["held_out_episodes"]
    # the model as trained, rebuilt from the same seed and steps, is what the folder holds:
    # serve the folder through build_engine (the node's path) and integrate the training
    # forward's velocity by hand from the engine's frame-0 noise
    built = build_engine(ModelSource(checkpoint=str(out)), EngineConfig(mode="isolated", seed=5,
                                                                         memory_every_n_frames=0))
    engine, stats = built.engine, built.norm
    config, tok = engine.model_config, engine.tokenizer
    state = stats.normalize_state(d.state[3])
    served = engine.step(Observation(images=[d.images[3]], state=state,
                                     instruction=d.instructions[0])).actions
    from safetensors.torch import load_file
    from oxygen_ros.engine.families.pi05.checkpoint import to_lerobot_name

    model = init_model(config, seed=0)
    weights = load_file(str(out / "model.safetensors"))
    model.load_state_dict({n: weights[to_lerobot_name(n)] for n, _ in model.state_dict().items()})
    codec = PromptCodec(config, tok)
    prompt = codec.prompt_ids(d.instructions[0], state)
    mem = codec.memory_ids()
    batch = Batch(images_to_model(d.images[3:4]), torch.tensor([prompt]), torch.tensor([len(prompt)]),
                  torch.tensor([mem]), torch.tensor([len(mem)]), torch.full((1, len(mem)), -100),
                  torch.zeros(1, config.action_horizon, config.action_dim))
    with torch.no_grad():
        prefix = run_prefix(model, batch)
        noise = torch.randn(config.action_horizon, config.action_dim,
                            generator=torch.Generator().manual_seed(5 * 1_000_003 + 0))
        mine = euler_sample(lambda x, t: velocity(model, prefix, x[None], torch.tensor([t]))[0],
                            noise, 10)
    np.testing.assert_allclose(served, mine.numpy(), atol=1e-4)
    # and the trained weights are not the initial ones
    init = init_model(config, seed=0)
    assert not torch.equal(init.action_heads[0].action_out_proj.weight,
                           model.action_heads[0].action_out_proj.weight)


@pytest.mark.skipif(importlib.util.find_spec("metaworld") is None,
                    reason="metaworld is not installed (pip install -r requirements-sim.txt): "
                           "the recorder needs the simulator")
def test_recorder_writes_replayable_expert_episodes(tmp_path):
    from oxygen_ros.sim import SimEnv, action_from_target
    from oxygen_ros.sim.demos import layout_seed, record

    demos, summary = record(["handle-press"], episodes=1, seed=0, frame_stride=2, progress=False)
    assert summary["handle-press"]["successes"] == 1
    n = len(demos)
    assert demos.images.shape == (n, 64, 64, 3) and demos.images.dtype == np.uint8
    assert demos.state.shape == demos.target.shape == (n, 4)
    assert np.all(np.diff(demos.step) == 2)
    assert demos.captions[int(demos.caption[-1])] == "the handle is pressed down"
    assert demos.captions[int(demos.caption[0])] != demos.captions[int(demos.caption[-1])]
    loaded = Demos.load(demos.save(tmp_path / "d.npz"))
    assert np.array_equal(loaded.images, demos.images) and loaded.captions == demos.captions
    # the recorded targets are the expert's actions as absolute targets: replayed, the same layout
    env = SimEnv("handle-press")
    try:
        env.reset(layout_seed(0, 0, 0))
        assert np.allclose(env.state(), demos.state[0])
        a = action_from_target(env.state(), demos.target[0])
        assert np.allclose(a, np.clip(env.expert_action(), -1, 1), atol=1e-5)
    finally:
        env.close()


def test_training_is_deterministic_for_a_seed(tmp_path):
    data = synthetic_demos().save(tmp_path / "demos.npz")
    files = []
    for run, seed in (("a", 0), ("b", 0), ("c", 1)):
        train(data, tmp_path / run, epochs=0.5, batch_size=8, warmup=1, held_out=0.5, seed=seed,
              model_kw=SMALL, progress=False)
        files.append((tmp_path / run / "model.safetensors").read_bytes())
    assert files[0] == files[1]
    assert files[0] != files[2]


def test_a_run_stopped_by_time_is_repeated_exactly_by_its_step_count(tmp_path):
    """--max-minutes stops wherever the clock says; --stop-at-step with the steps it reached
    gives the same weights every time, the schedule still the planned run's (18 steps here)."""
    from oxygen_ros.sim.train import main

    data = synthetic_demos(episodes=8).save(tmp_path / "demos.npz")
    small = ["--width", "32", "--expert-width", "32", "--depth", "1", "--patch", "16"]
    base = ["--data", str(data), "--epochs", "2", "--batch-size", "8", "--warmup", "1",
            "--held-out", "0.25", "--no-progress", *small]
    for run in ("cut", "again"):
        assert main([*base, "--out", str(tmp_path / run), "--stop-at-step", "3"]) == 0
    summary = json.loads((tmp_path / "cut" / "training.json").read_text())
    assert summary["steps"] == 3 and summary["stopped_early"] and summary["planned_steps"] == 18
    assert ((tmp_path / "cut" / "model.safetensors").read_bytes()
            == (tmp_path / "again" / "model.safetensors").read_bytes())
    with pytest.raises(SystemExit):
        main([*base, "--out", str(tmp_path / "bad"), "--stop-at-step", "-1"])


def test_the_command_trains_the_chunk_length_it_is_given(tmp_path):
    """--horizon sets the action chunk's steps: the checkpoint's chunk_size / n_action_steps
    (what the node plays) and the model config; the default stays policy.ACTION_HORIZON."""
    from oxygen_ros.sim.policy import ACTION_HORIZON
    from oxygen_ros.sim.train import main

    data = synthetic_demos().save(tmp_path / "demos.npz")
    small = ["--width", "32", "--expert-width", "32", "--depth", "1", "--patch", "16"]
    for name, extra, want in (("h12", ["--horizon", "12"], 12), ("default", [], ACTION_HORIZON)):
        assert main(["--data", str(data), "--out", str(tmp_path / name), "--epochs", "0.25",
                     "--batch-size", "8", "--warmup", "1", "--held-out", "0.5", "--no-progress",
                     *small, *extra]) == 0
        cfg = json.loads((tmp_path / name / "config.json").read_text())
        assert cfg["chunk_size"] == cfg["n_action_steps"] == want
        assert cfg["oxygen_model_config"]["action_horizon"] == want
