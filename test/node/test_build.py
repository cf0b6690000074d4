"""Configure-time construction from parameters: checkpoint, tokenizer, cameras and joints by name."""
import numpy as np
import pytest

from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.model import NormStats
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint, save_openpi_checkpoint
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer
from oxygen_ros.node import params as P
from oxygen_ros.node.build import build, check_joints
from oxygen_ros.robot.values import camera_slots
from oxygen_ros.robot.values import place_cameras

CKPT_KEYS = ("observation.images.base_0_rgb", "observation.images.left_wrist_0_rgb")


def _params(**over):
    p = {s.name: s.default for s in P.PARAMETERS}
    p["model.num_threads"] = 1
    p.update({k.replace("__", "."): v for k, v in over.items()})
    return p


@pytest.fixture(scope="module")
def model():
    return init_model(PRESETS["tiny"], seed=3)


@pytest.fixture(scope="module")
def lerobot(model, tmp_path_factory):
    stats = NormStats.quantiles(np.full(6, -2.0), np.full(6, 2.0), np.full(6, -3.0), np.full(6, 3.0))
    return save_lerobot_checkpoint(model, model.config, tmp_path_factory.mktemp("c") / "lr",
                                   norm_stats=stats, tokenizer=build_tiny_tokenizer(512),
                                   camera_keys=list(CKPT_KEYS), n_action_steps=4)


def test_camera_slots_by_name():
    topics = ["/wrist/image", "/base/image"]
    assert camera_slots(topics, [], CKPT_KEYS) == (0, 1)
    assert camera_slots(topics, ["left_wrist_0_rgb", "observation.images.base_0_rgb"], CKPT_KEYS) == (1, 0)
    assert camera_slots(["/wrist"], ["left_wrist_0_rgb"], CKPT_KEYS) == (1,)
    with pytest.raises(ValueError, match=r"camera_keys \['right_wrist_0_rgb'\] are not cameras.*base_0_rgb"):
        camera_slots(["/w"], ["right_wrist_0_rgb"], CKPT_KEYS)
    with pytest.raises(ValueError, match="camera_keys has 1 entries for 2 camera_topics"):
        camera_slots(topics, ["base_0_rgb"], CKPT_KEYS)
    with pytest.raises(ValueError, match="same model camera twice"):
        camera_slots(topics, ["base_0_rgb", "observation.images.base_0_rgb"], CKPT_KEYS)
    with pytest.raises(ValueError, match="3 camera_topics but the model takes at most 2"):
        camera_slots(["/a", "/b", "/c"], [], CKPT_KEYS)


def test_place_cameras_masks_cameras_without_a_topic():
    a, b = np.full((4, 4, 3), 7, np.uint8), np.full((4, 4, 3), 9, np.uint8)
    imgs, valid = place_cameras([a, b], (0, 1))
    assert valid is None and len(imgs) == 2 and imgs[0] is a and imgs[1] is b  # no copy
    imgs, valid = place_cameras([a], (1,))
    assert valid == (False, True) and (imgs[0] == 0).all() and (imgs[1] == 7).all()
    imgs, valid = place_cameras([a, b], (2, 0))
    assert valid == (True, False, True) and (imgs[0] == 9).all() and (imgs[2] == 7).all()


def test_joint_counts_must_fit():
    check_joints(["a"] * 6, 6, 6, 32)
    with pytest.raises(ValueError, match="5 joint_names but the checkpoint's state has 6 values"):
        check_joints(["a"] * 5, 6, 6, 32)
    with pytest.raises(ValueError, match="6 joint_names but the checkpoint's actions have 7 values"):
        check_joints(["a"] * 6, 6, 7, 32)
    with pytest.raises(ValueError, match="action_dim 8"):
        check_joints(["a"] * 9, None, None, 8)


def test_build_lerobot_checkpoint_by_name(lerobot):
    built = build(_params(model__checkpoint=str(lerobot), camera_topics=["/wrist"],
                                 camera_keys=["left_wrist_0_rgb"]))
    assert built.camera_slots == (1,) and built.n_action_steps == 4 and built.tokenizer_source == str(lerobot)
    assert built.norm.state_dim == 6
    with pytest.raises(ValueError, match="7 joint_names but the checkpoint's state has 6"):
        build(_params(model__checkpoint=str(lerobot), joint_names=[f"j{i}" for i in range(7)]))


def test_openpi_without_tokenizer_refused_then_given_by_repo_id(model, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("OPENPI_DATA_HOME", str(tmp_path / "openpi"))
    stats = {"state": {"q01": np.full(6, -1.0), "q99": np.ones(6)},
             "actions": {"q01": np.full(6, -1.0), "q99": np.ones(6)}}
    folder = save_openpi_checkpoint(model, model.config, tmp_path / "op", stats, asset_id="arm")
    with pytest.raises(ValueError) as err:
        build(_params(model__checkpoint=str(folder)))
    assert "no tokenizer found" in str(err.value) and "model.tokenizer" in str(err.value)
    rev = "f" * 40
    snap = tmp_path / "hf" / "hub" / "models--acme--tiny" / "snapshots" / rev
    build_tiny_tokenizer(512).save(snap)
    (tmp_path / "hf" / "hub" / "models--acme--tiny" / "refs").mkdir()
    (tmp_path / "hf" / "hub" / "models--acme--tiny" / "refs" / "main").write_text(rev)
    built = build(_params(model__checkpoint=str(folder), model__tokenizer="acme/tiny",
                                 model__asset_id="arm", camera_keys=["left_wrist_0_rgb"]))
    assert "acme/tiny" in built.tokenizer_source and built.camera_slots == (1,)
    with pytest.raises(ValueError, match="model.tokenizer applies to model.checkpoint"):
        build(_params(model__tokenizer="acme/tiny"))


def test_lerobot_checkpoint_with_paligemma_named_tokenizer_from_cache_speaks_its_words(model, tmp_path,
                                                                                       monkeypatch):
    """The user flow: a LeRobot folder without a tokenizer whose processor names
    google/paligemma-3b-pt-224, that repo's tokenizer.model in the local HF cache: actions in
    joint units and text decoded by that SentencePiece model."""
    import sentencepiece as spm

    from oxygen_ros.engine.core.observation import Observation

    sys_path = tmp_path / "tokenizer.model"
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghij"), 5)) for _ in range(800)]
    lines = [" ".join(rng.choice(words, 12)) for _ in range(300)]
    lines += [f"Task: pick up the cube, State: {' '.join(str(n) for n in rng.integers(0, 256, 6))};\nAction: "
              for _ in range(300)]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines),
                                   model_prefix=str(sys_path.with_suffix("")), vocab_size=512, pad_id=0,
                                   eos_id=1, bos_id=2, unk_id=3, minloglevel=2, model_type="bpe")
    rev = "a" * 40
    repo = tmp_path / "hf" / "hub" / "models--google--paligemma-3b-pt-224"
    (repo / "snapshots" / rev).mkdir(parents=True)
    (repo / "snapshots" / rev / "tokenizer.model").write_bytes(sys_path.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    stats = NormStats.quantiles(np.full(6, -2.0), np.full(6, 2.0), np.full(6, -3.0), np.full(6, 3.0))
    folder = save_lerobot_checkpoint(model, model.config, tmp_path / "lr", norm_stats=stats,
                                     tokenizer_name="google/paligemma-3b-pt-224")
    built = build(_params(model__checkpoint=str(folder), max_decode_steps=6, decode_steps_per_frame=3))
    assert "google/paligemma-3b-pt-224" in built.tokenizer_source
    sp = spm.SentencePieceProcessor(model_file=str(sys_path))
    tokens: dict[int, list[int]] = {}
    finals = []
    for i in range(4):
        out = built.engine.step(Observation(images=np.zeros((1, 32, 32, 3), np.uint8),
                                            state=np.zeros(6, np.float32), instruction="pick up the cube",
                                            stamp=float(i)))
        assert out.actions.shape[1] >= 6 and np.isfinite(out.actions).all()
        for up in out.updates:
            tokens.setdefault(up.id, []).extend(up.new_tokens)
            if up.is_final:
                ids = [t for t in tokens[up.id] if t != 1]
                assert up.text == sp.decode(ids) and up.text
                finals.append(up.text)
    assert finals


def test_xr0_tiny_preset_builds():
    """The node's configure path serves the Qwen3-VL family's CPU preset (random weights;
    test/engine/families/qwen3vl/test_qwen3vl.py steps it in every mode)."""
    built = build(_params(model__preset="xr0-tiny", max_active_requests=2))
    assert built.engine.model_config.family == "qwen3vl"
    assert built.engine.model.family == "qwen3vl"


LIBERO_STATE = ["eef_x", "eef_y", "eef_z", "eef_rx", "eef_ry", "eef_rz", "finger_l", "finger_r"]
LIBERO_COMMANDS = ["eef_x", "eef_y", "eef_z", "eef_rx", "eef_ry", "eef_rz", "gripper"]


@pytest.fixture(scope="module")
def libero(model, tmp_path_factory):
    """A LeRobot checkpoint shaped like LIBERO's pi0.5: 8 state values, 7 actions."""
    stats = NormStats.quantiles(np.full(8, -1.0), np.ones(8), np.full(7, -0.5), np.full(7, 0.5))
    return save_lerobot_checkpoint(model, model.config, tmp_path_factory.mktemp("c") / "libero",
                                   norm_stats=stats, tokenizer=build_tiny_tokenizer(512),
                                   camera_keys=list(CKPT_KEYS))


def test_a_robot_whose_state_and_actions_differ_configures(libero):
    """Issue 38, item 2: an 8-value state and 7 actions used to be refused (joint_names had to
    be both); state_names and command_names now say each, and a mismatch still says which."""
    built = build(_params(model__checkpoint=str(libero), state_names=LIBERO_STATE,
                          command_names=LIBERO_COMMANDS, command_type="float64_array",
                          command_kinds=["velocity"] * 6 + ["position"]))
    assert built.norm.state_dim == 8 and built.norm.action_dim == 7
    with pytest.raises(ValueError, match="6 command_names but the checkpoint's actions have 7"):
        build(_params(model__checkpoint=str(libero), state_names=LIBERO_STATE,
                      command_names=LIBERO_COMMANDS[:6]))
    with pytest.raises(ValueError, match="6 joint_names but the checkpoint's state has 8 values"):
        build(_params(model__checkpoint=str(libero), command_names=LIBERO_COMMANDS))
    with pytest.raises(ValueError, match="mix positions and velocities"):
        build(_params(model__checkpoint=str(libero), state_names=LIBERO_STATE,
                      command_names=LIBERO_COMMANDS, command_kinds=["velocity"] * 6 + ["position"]))


def test_default_threads_leave_a_core_and_configure_is_timed():
    """model.num_threads at its default (0) gives the model every usable core but one, where it
    used to leave torch's default (every core); the count and the configure times are reported."""
    import torch

    from oxygen_ros.robot.threads import resolve_threads, usable_cores

    before = torch.get_num_threads()
    try:
        p = _params()
        p["model.num_threads"] = 0
        built = build(p)
        assert built.threads == torch.get_num_threads() == max(1, usable_cores() - 1)
        assert built.warnings == () and built.load_s > 0 and built.warmup_s > 0
        p["model.num_threads"] = usable_cores()
        if usable_cores() > 1:
            built = build(p)
            assert built.threads == usable_cores()
            assert built.warnings == (resolve_threads(usable_cores())[1],)
    finally:
        torch.set_num_threads(before)
