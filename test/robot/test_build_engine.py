"""One build_engine (robot/build.py) for the node, oxygen-replay and oxygen-demo: a preset and a
checkpoint folder both build; mistakes are refused with one reason, spelled in the caller's names."""
from __future__ import annotations

import numpy as np
import pytest

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.model import NormStats
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer
from oxygen_ros.robot.build import ModelSource, build_engine

KEYS = ("observation.images.base_0_rgb", "observation.images.left_wrist_0_rgb")
CONFIG = EngineConfig(max_decode_steps=4, decode_steps_per_frame=2, denoise_steps=1,
                      memory_every_n_frames=0)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    model = init_model(PRESETS["tiny"], seed=3)
    stats = NormStats.quantiles(np.full(6, -2.0), np.full(6, 2.0), np.full(6, -3.0), np.full(6, 3.0))
    return save_lerobot_checkpoint(model, model.config, tmp_path_factory.mktemp("c") / "lr",
                                   norm_stats=stats, tokenizer=build_tiny_tokenizer(512),
                                   camera_keys=list(KEYS), n_action_steps=4)


@pytest.fixture()
def broken(checkpoint, tmp_path):
    """The checkpoint with one tensor missing from its weights."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "broken"
    shutil.copytree(checkpoint, folder)
    tensors = load_file(folder / "model.safetensors")
    del tensors[sorted(tensors)[0]]
    save_file(tensors, folder / "model.safetensors")
    return folder


def test_preset_builds_with_random_weights():
    b = build_engine(ModelSource(preset="tiny", threads=1), CONFIG)
    assert b.model_name == "preset:tiny" and b.norm is None and b.n_action_steps == 0
    assert b.camera_keys == ("camera0", "camera1") == tuple(
        f"camera{i}" for i in range(b.engine.model_config.num_cameras))
    assert (b.state_dim, b.action_dim) == (None, None)
    assert b.engine.config.denoise_steps == 1 and b.engine.tokenizer is not None


def test_checkpoint_folder_builds_with_its_statistics_cameras_and_steps(checkpoint):
    b = build_engine(ModelSource(checkpoint=str(checkpoint)), CONFIG, warmup=True)
    assert b.model_name == str(checkpoint) and b.camera_keys == KEYS and b.n_action_steps == 4
    assert b.norm.state_dim == 6 and (b.state_dim, b.action_dim) == (6, 6)
    assert b.tokenizer_source == str(checkpoint)
    assert b.engine.model_config.name == PRESETS["tiny"].name


def test_mistakes_are_refused_in_the_callers_names(checkpoint):
    with pytest.raises(ValueError, match="--tokenizer applies to --checkpoint"):
        build_engine(ModelSource(tokenizer="acme/tiny"), CONFIG)
    with pytest.raises(ValueError, match="model.asset_id applies to model.checkpoint"):
        build_engine(ModelSource(asset_id="arm", names=("model.checkpoint", "model.tokenizer",
                                                        "model.asset_id")), CONFIG)
    with pytest.raises(ValueError, match="--checkpoint brings its own configuration"):
        build_engine(ModelSource(checkpoint=str(checkpoint), model_config="over.yaml"), CONFIG)
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        build_engine(ModelSource(preset="huge"), CONFIG)
    with pytest.raises(ValueError, match="threads must be >= 0"):
        ModelSource(threads=-1)


def test_node_replay_and_demo_build_through_it_and_refuse_a_broken_checkpoint_alike(broken, capsys):
    from oxygen_ros.cli import demo
    from oxygen_ros.cli import replay as replay_cli
    from oxygen_ros.node import build as node_build
    from oxygen_ros.node import params as P
    from oxygen_ros.robot import build as robot_build

    assert node_build.build_engine is replay_cli.build_engine is demo.build_engine is robot_build.build_engine
    with pytest.raises(ValueError) as err:
        build_engine(ModelSource(checkpoint=str(broken)), CONFIG)
    reason = str(err.value)
    assert "does not match 'tiny': missing 1" in reason
    p = {s.name: s.default for s in P.PARAMETERS}
    p.update({"model.checkpoint": str(broken), "model.num_threads": 1})
    with pytest.raises(ValueError) as node_err:
        node_build.build(p)
    assert str(node_err.value) == reason  # what the node says when configure fails
    assert demo.main(["--checkpoint", str(broken), "--threads", "1", "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == f"oxygen-demo: {reason}"
