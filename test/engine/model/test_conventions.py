"""pi0.5 conventions by the LeRobot version that wrote a checkpoint (engine/model/conventions.py):
tiny checkpoints written in each version's layout (save_lerobot_checkpoint(lerobot_version=...))
against references written from LeRobot's processors (not from our code)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from oxygen_ros.cli.inspect_checkpoint import main as inspect_main
from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.core.observation import Observation
from oxygen_ros.engine.model import NormStats
from oxygen_ros.engine.families.loader import init_model, open_checkpoint
from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint
from oxygen_ros.engine.model.formats import read_checkpoint_files
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer
from oxygen_ros.robot.values import StateMapping, actions_to_model

MC = PRESETS["tiny"]
A = MC.action_dim
TOK = build_tiny_tokenizer(MC.vocab_size)


@pytest.fixture(scope="module")
def model():
    return init_model(MC, seed=0)


def _stats(state_dim: int, action_dim: int) -> NormStats:
    rng = np.random.default_rng(3)
    slo = rng.uniform(-2, 0, state_dim).astype(np.float32)
    alo = rng.uniform(-2, 0, action_dim).astype(np.float32)
    return NormStats.quantiles(slo, slo + 2.5, alo, alo + 1.5)


def _write(model, path, version, state_dim=5, action_dim=A, stats=True, **kw):
    """version None: the writer's plain layout, which names no version."""
    if version is not None:
        kw["lerobot_version"] = version
    return save_lerobot_checkpoint(model, MC, path, tokenizer=TOK,
                                   norm_stats=_stats(state_dim, action_dim) if stats else None, **kw)


# -- which version a folder shows ----------------------------------------------------------------
@pytest.mark.parametrize("version,label,why,pad,bars", [
    ("0.4.4", "0.4.x", "train_config.json lacks cudnn_deterministic", A, -3.0),
    ("0.5.0", ">=0.5.0", "train_config.json has cudnn_deterministic", 0, -1.0),
    ("0.5.1", ">=0.5.1", "delta_actions_processor step", 0, -1.0),
    ("0.6.1", "0.6.1", "README.md model card", 0, -1.0),
    (None, ">=0.5.0 (assumed)", "nothing in the folder names the version", 0, -1.0),
])
def test_version_detected_from_the_folder(model, tmp_path, version, label, why, pad, bars):
    mc, info, _ = read_checkpoint_files(_write(model, tmp_path / "c", version))
    conv = info.conventions
    assert (conv.version, conv.state_prompt_pad, conv.image_pad_value) == (label, pad, bars)
    assert why in conv.sources["version"]
    assert (mc.state_prompt_pad, mc.image_pad_value) == (pad, bars)  # what the engine applies
    assert conv.fp32_vision == ("embeddings" if pad else "tower")


def test_parameter_overrides_detection_and_bad_values_are_refused(model, tmp_path):
    folder = _write(model, tmp_path / "c", "0.6.1")
    mc, info, _ = read_checkpoint_files(folder, lerobot_version="0.4")
    assert (mc.state_prompt_pad, mc.image_pad_value) == (A, -3.0)
    assert info.conventions.sources["version"] == "set by lerobot_version"
    with pytest.raises(ValueError, match="lerobot_version must be 'auto' or a LeRobot version"):
        read_checkpoint_files(folder, lerobot_version="latest")
    from oxygen_ros.node.params import SPECS, validate_value
    assert validate_value(SPECS["model.lerobot_version"], "0.4.4") is None
    assert "lerobot_version" in validate_value(SPECS["model.lerobot_version"], "newest")
    from oxygen_ros.robot.build import ModelSource
    with pytest.raises(ValueError, match="lerobot_version"):
        ModelSource(checkpoint=str(folder), lerobot_version="v-four")


# -- v0.4.x: the padded state in the prompt, -3 bars -----------------------------------------------
def test_v04_prompt_holds_the_state_zero_padded_to_max_state_dim(model, tmp_path):
    """LeRobot v0.4.4 Pi05PrepareStateTokenizerProcessorStep: pad_vector(state, max_state_dim)
    then digitize: the padding's zeros are bin 128 of 256."""
    ck = open_checkpoint(_write(model, tmp_path / "c", "0.4.4"), tokenizer=TOK)
    engine = Engine(ck.config, EngineConfig(memory_every_n_frames=0), model=ck.model, tokenizer=ck.tokenizer)
    state = np.array([-1.2, -0.5, 0.0, 0.3, 0.999], np.float32)  # normalised, 5 values
    bins = "-1 64 128 166 255" + " 128" * (A - 5)
    want = TOK.encode(f"Task: pick the cube, State: {bins};\nAction: ", add_bos=True)
    assert engine.intake.prompt_ids("pick_the cube", state) == want
    # a v0.5+ folder writes the state's own values only
    ck5 = open_checkpoint(_write(model, tmp_path / "c5", "0.5.0"), tokenizer=TOK)
    e5 = Engine(ck5.config, EngineConfig(memory_every_n_frames=0), model=ck5.model, tokenizer=ck5.tokenizer)
    assert e5.intake.prompt_ids("pick the cube", state) == TOK.encode(
        "Task: pick the cube, State: -1 64 128 166 255;\nAction: ", add_bos=True)


def test_v04_training_folder_written_by_hand_gets_the_padded_prompt(model, tmp_path):
    """A LeRobot v0.4.x training run leaves a train_config.json without cudnn_deterministic
    (written here by hand beside the writer's plain layout)."""
    folder = _write(model, tmp_path / "c", None)
    (folder / "train_config.json").write_text(json.dumps({"policy": {"type": "pi05"}, "seed": 1000,
                                                          "batch_size": 32, "steps": 30000}))
    ck = open_checkpoint(folder, tokenizer=TOK)
    engine = Engine(ck.config, EngineConfig(memory_every_n_frames=0), model=ck.model, tokenizer=ck.tokenizer)
    state = np.zeros(5, np.float32)
    want = TOK.encode("Task: go, State: " + " ".join(["128"] * A) + ";\nAction: ", add_bos=True)
    assert engine.intake.prompt_ids("go", state) == want


def test_v04_bars_are_minus_three(model, tmp_path):
    """v0.4.4 resize_with_pad_torch padded [0, 1] images with -1, then x * 2 - 1."""
    ck = open_checkpoint(_write(model, tmp_path / "c", "0.4.4"), tokenizer=TOK)
    engine = Engine(ck.config, EngineConfig(memory_every_n_frames=0), model=ck.model, tokenizer=ck.tokenizer)
    size = MC.vision.image_size
    cam = np.full((480, 640, 3), 200, np.uint8)  # 4:3 -> bars of size / 8 rows top and bottom
    pix = engine.runner.prepare_images([cam]).permute(0, 2, 3, 1).numpy()[0]
    bar = size // 8
    assert (pix[:bar] == -3.0).all() and (pix[size - bar:] == -3.0).all()
    np.testing.assert_allclose(pix[bar:size - bar], 200 / 255 * 2 - 1, atol=1e-6)
    obs = Observation(images=[cam], state=np.zeros(5, np.float32), instruction="go")
    assert np.isfinite(engine.step(obs).actions).all()


# -- v0.5.1+: relative actions ---------------------------------------------------------------------
NAMES = [f"joint_{i}" for i in range(A - 1)] + ["left_gripper.pos"]


@pytest.mark.parametrize("version", ["0.5.1", "0.6.1"])
def test_relative_actions_add_the_raw_state_back_except_excluded_names(model, tmp_path, version):
    """LeRobot's postprocessor: unnormalize (QUANTILES), then AbsoluteActionsProcessorStep adds
    state[:dims] * mask, the mask false where "gripper" is part of the action's name."""
    stats = _stats(A, A)
    folder = save_lerobot_checkpoint(model, MC, tmp_path / "c", tokenizer=TOK, norm_stats=stats,
                                     lerobot_version=version, relative_actions=True, action_names=NAMES)
    _, info, norm = read_checkpoint_files(folder)
    assert info.conventions.relative.mask == (True,) * (A - 1) + (False,)
    model_actions = np.random.default_rng(0).uniform(-1, 1, (4, A)).astype(np.float32)
    state = np.linspace(-1, 2, A).astype(np.float32)  # robot units (raw)
    lo, hi = stats.action.lo.astype(np.float64), stats.action.hi.astype(np.float64)
    want = (model_actions + 1.0) * (hi - lo) / 2.0 + lo
    want[:, : A - 1] += state[: A - 1]
    mapping = StateMapping(A, norm=norm)
    got = mapping.to_robot(model_actions, state)
    np.testing.assert_allclose(got, want, atol=1e-5)
    with pytest.raises(ValueError, match="relative to the state"):
        mapping.to_robot(model_actions)
    # real-time chunking hands executed steps back relative to the new observation's state
    np.testing.assert_allclose(actions_to_model(mapping, got, state), model_actions, atol=1e-5)
    # without action names every dim is relative (LeRobot's _build_mask)
    folder = save_lerobot_checkpoint(model, MC, tmp_path / "n", tokenizer=TOK, norm_stats=stats,
                                     lerobot_version=version, relative_actions=True)
    assert read_checkpoint_files(folder)[1].conventions.relative.mask == (True,) * A


def test_relative_actions_off_or_absent_stay_absolute(model, tmp_path):
    for version in ("0.6.1", "0.4.4"):
        _, info, norm = read_checkpoint_files(_write(model, tmp_path / version, version, state_dim=A))
        assert info.conventions.relative is None and norm.relative is None


def test_relative_actions_need_a_state_as_long_as_the_actions(model, tmp_path):
    folder = save_lerobot_checkpoint(model, MC, tmp_path / "c", tokenizer=TOK, norm_stats=_stats(3, A),
                                     lerobot_version="0.6.1", relative_actions=True)
    with pytest.raises(ValueError, match="the state has 3"):
        read_checkpoint_files(folder)


# -- a base model without statistics: no normalisation ------------------------------------------
def test_folder_without_statistics_is_not_normalised_even_with_joint_limits(model, tmp_path):
    _, info, norm = read_checkpoint_files(_write(model, tmp_path / "c", None, stats=False))
    mapping = StateMapping(3, lower=np.zeros(3), upper=np.full(3, 4.0), norm=norm)
    state = np.array([0.5, 3.0, 7.0], np.float32)
    np.testing.assert_array_equal(mapping.to_model(state), state)  # not (state - 0) / 4 * 2 - 1
    actions = np.random.default_rng(1).uniform(-1, 1, (2, A)).astype(np.float32)
    np.testing.assert_array_equal(mapping.to_robot(actions), actions[:, :3])
    assert info.conventions.identity_norm


# -- bf16: float32 norms and vision, as LeRobot keeps them --------------------------------------
@pytest.mark.parametrize("version", [None, "0.4.4"])
def test_bf16_keeps_norms_and_vision_float32(model, tmp_path, version):
    ck = open_checkpoint(_write(model, tmp_path / "c", version), dtype="bfloat16", tokenizer=TOK)
    dtypes = {n: p.dtype for n, p in ck.model.named_parameters()}
    f32 = {n for n, d in dtypes.items() if d == torch.float32}
    norms = {n for n in dtypes if ".input_norm." in n or ".post_norm." in n or n.startswith("experts.") and ".norm." in n}
    emb = {n for n in dtypes if "patch_embedding" in n or "position_embedding" in n}
    vision = {n for n in dtypes if n.startswith("vision.")}
    assert norms and any(".dense." in n for n in norms)  # the adaRMS norms' dense layers too
    assert f32 == (norms | (emb if version == "0.4.4" else vision))
    assert ck.model.token_embedding.weight.dtype == torch.bfloat16 and ck.model.dtype == torch.bfloat16
    engine = Engine(ck.config, EngineConfig(dtype="bfloat16", memory_every_n_frames=0),
                    model=ck.model, tokenizer=ck.tokenizer)
    assert engine.runner.prepare_images([np.zeros((8, 8, 3), np.uint8)]).dtype == torch.float32
    out = engine.step(Observation(images=[np.full((48, 64, 3), 90, np.uint8)],
                                  state=np.zeros(5, np.float32), instruction="go"))
    assert np.isfinite(out.actions).all()


# -- oxygen-inspect says what it will apply and why -----------------------------------------------
def test_inspect_prints_the_conventions_and_where_they_come_from(model, tmp_path, capsys):
    folder = _write(model, tmp_path / "c", "0.4.4")
    assert inspect_main([str(folder)]) == 0
    out = capsys.readouterr().out
    for part in ("conv. version", "0.4.x (train_config.json lacks cudnn_deterministic",
                 f"state zero-padded to {A} values", "conv. image bars", "-3",
                 "vision patch / position embeddings and every norm", "absolute"):
        assert part in out, part
    assert inspect_main([str(folder), "--lerobot-version", "0.6.1", "--json"]) == 0
    conv = json.loads(capsys.readouterr().out)["conventions"]
    assert "set by lerobot_version" in conv["version"] and conv["image bars"].startswith("-1 ")
    with pytest.raises(SystemExit):
        inspect_main([str(folder), "--lerobot-version", "four"])


# -- the node's model.lerobot_version reaches the engine -------------------------------------------
def test_model_source_version_reaches_the_engine_and_a_preset_refuses_it(model, tmp_path):
    from oxygen_ros.robot.build import ModelSource, build_engine

    folder = _write(model, tmp_path / "c", "0.6.1")
    source = ModelSource(checkpoint=str(folder), lerobot_version="0.4.4", progress=False)
    built = build_engine(source, EngineConfig(memory_every_n_frames=0))
    assert (built.engine.model_config.state_prompt_pad, built.engine.model_config.image_pad_value) == (A, -3.0)
    with pytest.raises(ValueError, match="a random preset has no checkpoint conventions"):
        build_engine(ModelSource(lerobot_version="0.4"), EngineConfig())
