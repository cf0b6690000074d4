"""Bimanual demonstrations: deterministic per seed, captions that never claim a success the
cameras do not show, relabelling, merging recordings, and training batches with three cameras."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from oxygen_ros.sim import unavailable_reason

_missing = [m for m in ("gym_aloha", "dm_control", "mujoco") if importlib.util.find_spec(m) is None]
pytestmark = [pytest.mark.skipif(bool(_missing), reason=f"{_missing} not installed"),
              pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))]


@pytest.fixture(scope="module")
def recorded():
    from oxygen_ros.sim.aloha.demos import record

    demos, summary = record(["transfer-cube"], episodes=1, seed=0, frame_stride=2, image_size=16, after=6)
    return demos, summary


def test_an_episode_is_recorded_with_three_cameras_and_14_values(recorded):
    demos, summary = recorded
    assert summary["transfer-cube"]["successes"] == 1
    assert demos.images.shape[1:] == (3, 16, 16, 3) and demos.state.shape[1] == 14
    assert demos.num_cameras == 3 and demos.action_period_steps == 2
    assert demos.meta["cameras"] == ["top", "left_wrist", "right_wrist"]


def test_a_success_the_cameras_do_not_show_keeps_the_stage_before_it(recorded):
    """transfer-cube's success is the left finger's first touch, the gripper still open: the
    frames after it (6 periods here) are labelled with the stage before it, never the success
    caption, so the memory never learns to claim a contact it cannot see."""
    demos, summary = recorded
    success_step = summary["transfer-cube"]["success_step_min_median_max"][0]
    after = demos.step >= success_step
    assert after.sum() > 0
    assert {demos.captions[c] for c in demos.caption[after]} == {"handing the cube over"}
    assert "the cube is handed over" not in {demos.captions[c] for c in demos.caption}


def test_the_hand_over_is_labelled_done_where_the_left_gripper_alone_holds_the_cube():
    """Recorded 150 periods past success (docs/aloha.md's recipe): layout 0's cube ends in the
    left gripper alone and those frames, 1.8 s after gym-aloha's success, say it is handed
    over; layout 1's cube falls after the success: its frames say what the scene shows from then
    on ("reaching for the cube") and are caption-only (the expert's motion goes on with nothing
    in hand); no frame is labelled done before the simulator's success."""
    from oxygen_ros.sim.aloha.demos import record

    d, summary = record(["transfer-cube"], episodes=2, seed=0, frame_stride=2, image_size=16, after=150)
    assert summary["transfer-cube"]["successes"] == 2
    done = d.captions.index("the cube is handed over")
    success = summary["transfer-cube"]["success_step_min_median_max"]
    kept, dropped = (d.episode == 0), (d.episode == 1)
    first_done = d.step[kept & (d.caption == done)].min()
    assert first_done >= success[2] + 60  # the left gripper closed, the right one let go
    assert not d.caption_only[kept].any() and d.step[kept].max() >= first_done + 40
    assert not (dropped & (d.caption == done)).any()
    fell = dropped & d.caption_only
    assert fell.sum() > 10 and {d.captions[c] for c in d.caption[fell]} == {"reaching for the cube"}
    assert d.step[fell].min() > d.step[dropped & ~d.caption_only].max()  # from the drop on


def test_relabel_refuses_a_recording_labelled_by_the_physics(recorded, tmp_path, capsys):
    """Version 4 captions come from the cameras' view of the physics (success_shown): a relabel
    from the caption alone would take its shown hand-overs away, so it is refused."""
    from oxygen_ros.sim.aloha.demos import main

    recorded[0].save(tmp_path / "v4.npz")
    with pytest.raises(SystemExit):
        main(["--relabel", str(tmp_path / "v4.npz"), "--out", str(tmp_path / "out.npz")])
    assert "nothing to relabel" in capsys.readouterr().err and not (tmp_path / "out.npz").exists()


def test_relabel_applies_the_memory_labels_to_an_older_recording(recorded):
    from oxygen_ros.sim.aloha.demos import RECORDER_VERSION
    from oxygen_ros.sim.aloha.tasks import get_task
    from oxygen_ros.sim.dataset import Demos
    from oxygen_ros.sim.demos import relabel

    d = recorded[0]
    done, before = d.captions.index("the cube is handed over"), d.captions.index("handing the cube over")
    fields = {k: getattr(d, k) for k in d.__dataclass_fields__}
    old = Demos(**{**fields, "caption": np.where(d.caption == before, done, d.caption).astype(np.int16)})
    new, changed = relabel(old, get_task, RECORDER_VERSION)
    np.testing.assert_array_equal(new.caption, d.caption)
    assert changed == {"transfer-cube": int((d.caption == before).sum())} and changed["transfer-cube"] > 0
    assert new.meta["recorder_version"] == RECORDER_VERSION


def test_recording_is_deterministic_per_seed(recorded):
    from oxygen_ros.sim.aloha.demos import record

    again, _ = record(["transfer-cube"], episodes=1, seed=0, frame_stride=2, image_size=16, after=6)
    np.testing.assert_array_equal(again.target, recorded[0].target)
    np.testing.assert_array_equal(again.images, recorded[0].images)


def test_merge_renumbers_episodes_and_tasks(recorded):
    from oxygen_ros.sim.aloha.demos import merge

    d = recorded[0]
    m = merge([d, d])
    assert len(m) == 2 * len(d) and list(np.unique(m.episode)) == [0, 1]
    assert m.tasks == ["transfer-cube"] and list(m.episode_task) == [0, 0]


def test_training_batches_carry_three_cameras_and_the_loss_is_finite(recorded):
    import torch

    from oxygen_ros.engine.families.loader import init_model
    from oxygen_ros.sim.dataset import Batcher, norm_stats
    from oxygen_ros.sim.policy import PromptCodec, build_tokenizer, policy_config
    from oxygen_ros.sim.train_forward import losses, run_prefix

    d = recorded[0]
    cfg = policy_config(width=32, expert_width=32, depth=1, vision_width=32, vision_depth=1, horizon=4,
                        patch=8, num_cameras=3, action_dim=14, image_size=16, max_prompt_tokens=128)
    tok = build_tokenizer(d.instructions + d.captions, cfg.vocab_size)
    frames = np.arange(len(d))
    batcher = Batcher(d, PromptCodec(cfg, tok), norm_stats(d, frames))
    batch = batcher.batch(frames[:4])
    assert tuple(batch.images.shape) == (4, 3, 3, 16, 16) and tuple(batch.actions.shape) == (4, 4, 14)
    # a chunk's targets are action_period_steps (2) control periods apart: consecutive frames here
    np.testing.assert_array_equal(d.chunk_index(4)[0], [0, 1, 2, 3])
    model = init_model(cfg, seed=0)
    out = losses(model, batch, torch.Generator().manual_seed(0))
    assert torch.isfinite(out.total)
    # the prefix holds every camera's tokens in camera order, as the engine's prefill does
    per_cam = model.embed_images(batch.images[:, 2])
    prefix = run_prefix(model, batch)
    n = per_cam.shape[1]
    assert int(prefix.prefix_len[0]) == 3 * n + int(batch.prompt_len[0])


def test_near_misses_are_caption_only_from_the_hand_over_on_and_merge_keeps_them(recorded):
    from oxygen_ros.sim.aloha.demos import MISS_FROM_STEP, merge, record

    misses, summary = record(["insertion"], episodes=0, miss_episodes=1, seed=0, frame_stride=2,
                             image_size=16, after=6)
    assert summary["insertion"]["miss_episodes"] == 1 and summary["insertion"]["successes"] == 0
    assert len(misses) > 0 and misses.caption_only.all() and misses.step.min() >= MISS_FROM_STEP
    said = {misses.captions[c] for c in misses.caption}
    # insertion's success is never shown (success_shown None): no near-miss frame is labelled
    # with it, and this one never succeeds
    assert "the peg is inserted" not in said and not misses.episode_success[0]
    both = merge([recorded[0], misses])
    assert both.caption_only.sum() == len(misses) and not both.caption_only[:len(recorded[0])].any()
    assert list(both.episode_success) == [True, bool(misses.episode_success[0])]
    assert both.tasks == ["transfer-cube", "insertion"]
