import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from oxygen_ros.engine.model import LocalContext, NormStats
from oxygen_ros.engine.families.loader import load_checkpoint
from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint
from oxygen_ros.engine.model.formats import PRE_STATE, POST_STATE
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

PWE = "model.paligemma_with_expert."


def _stats(dim):
    rng = np.random.default_rng(0)
    lo = rng.uniform(-2, 0, dim).astype(np.float32)
    hi = lo + rng.uniform(0.5, 3, dim).astype(np.float32)
    return NormStats.quantiles(lo, hi, lo * 2, hi * 2, extra={"observation.state.mean": (lo + hi) / 2,
                                                    "action.std": np.ones(dim, np.float32)})


def _outputs(model, gen_seed=5):
    g = torch.Generator().manual_seed(gen_seed)
    cfg = model.config
    imgs = torch.rand(2, 3, cfg.vision.image_size, cfg.vision.image_size, generator=g) * 2 - 1
    ids = torch.randint(3, cfg.vocab_size, (12,), generator=g)
    h = torch.cat([model.embed_images(imgs).reshape(-1, cfg.vlm.width), model.embed_tokens(ids)])
    ctx = LocalContext.prefill(model)
    out = model.forward_tokens(0, h, torch.arange(h.shape[0]), ctx)
    x = torch.randn(cfg.action_horizon, cfg.action_dim, generator=g)
    ah = model.action_in(1, x)
    a = model.forward_tokens(1, ah, h.shape[0] + torch.arange(len(x)), ctx.frozen(),
                             model.time_cond(1, 0.6).expand(len(x), -1))
    return model.lm_logits(out), model.action_out(1, a)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tiny_model):
    folder = tmp_path_factory.mktemp("ckpt")
    tok = build_tiny_tokenizer(tiny_model.config.vocab_size)
    save_lerobot_checkpoint(tiny_model, tiny_model.config, folder, tokenizer=tok,
                            norm_stats=_stats(tiny_model.config.action_dim))
    return folder


def test_layout_and_key_names(saved):
    for name in ("config.json", "model.safetensors", "policy_preprocessor.json", PRE_STATE,
                 "policy_postprocessor.json", POST_STATE, "tokenizer.json"):
        assert (saved / name).is_file(), name
    cfg = json.loads((saved / "config.json").read_text())
    assert cfg["type"] == "pi05" and cfg["chunk_size"] == 10
    keys = set(load_file(str(saved / "model.safetensors")))
    for k in (PWE + "paligemma.model.vision_tower.embeddings.patch_embedding.weight",
              PWE + "paligemma.model.vision_tower.post_layernorm.bias",
              PWE + "paligemma.model.multi_modal_projector.linear.bias",
              PWE + "paligemma.model.language_model.layers.1.self_attn.q_proj.weight",
              PWE + "paligemma.model.language_model.layers.0.mlp.gate_proj.weight",
              PWE + "paligemma.model.language_model.layers.0.input_layernorm.weight",
              PWE + "paligemma.model.language_model.norm.weight",
              PWE + "paligemma.model.language_model.embed_tokens.weight",
              PWE + "gemma_expert.model.layers.1.post_attention_layernorm.dense.bias",
              PWE + "gemma_expert.model.norm.dense.weight",
              "model.action_in_proj.weight", "model.action_out_proj.bias", "model.time_mlp_in.weight",
              "model.time_mlp_out.bias"):
        assert k in keys, k
    pre = json.loads((saved / "policy_preprocessor.json").read_text())
    assert pre["steps"][3]["registry_name"] == "normalizer_processor"
    assert load_file(str(saved / PRE_STATE))["observation.state.q01"].shape == (8,)


def test_round_trip_identical_outputs(saved, tiny_model):
    model, cfg, tok, stats = load_checkpoint(saved, "cpu", torch.float32)
    assert cfg == tiny_model.config
    for a, b in zip(_outputs(tiny_model), _outputs(model)):
        assert torch.equal(a, b)
    assert tok.encode("pick up the cube", add_bos=True)[0] == cfg.bos_token_id
    np.testing.assert_array_equal(stats.state.hi, _stats(8).state.hi)
    assert "observation.state.mean" in stats.extra


def _rewrite(saved, tmp_path, fn):
    import shutil
    dst = tmp_path / "ckpt"
    shutil.copytree(saved, dst)
    sd = load_file(str(dst / "model.safetensors"))
    save_file(fn(sd), str(dst / "model.safetensors"))
    return dst


def test_loader_accepts_old_vision_names_time_mlp_rename_and_extras(saved, tmp_path, tiny_model):
    vt = PWE + "paligemma.model.vision_tower."

    def old_form(sd):
        out = {}
        for k, v in sd.items():
            if k.startswith(vt):
                k = vt + "vision_model." + k[len(vt):]
            if k.startswith("model.time_mlp_"):
                k = "model.action_time_mlp_" + k[len("model.time_mlp_"):]
            out[k] = v
        emb = out.pop(PWE + "paligemma.model.language_model.embed_tokens.weight")
        out[PWE + "paligemma.lm_head.weight"] = emb  # tied: only lm_head stored
        out[PWE + "gemma_expert.lm_head.weight"] = torch.zeros(3, 3)  # unused, ignored
        return out

    model, *_ = load_checkpoint(_rewrite(saved, tmp_path, old_form))
    for a, b in zip(_outputs(tiny_model), _outputs(model)):
        assert torch.equal(a, b)


def test_loader_accepts_openpi_names_without_model_prefix(saved, tmp_path, tiny_model):
    model, *_ = load_checkpoint(_rewrite(saved, tmp_path, lambda sd: {k[len("model."):]: v for k, v in sd.items()}))
    assert torch.equal(_outputs(tiny_model)[1], _outputs(model)[1])


def test_loader_rejects_missing_and_unexpected_keys(saved, tmp_path):
    gone = PWE + "gemma_expert.model.layers.0.self_attn.k_proj.weight"

    def drop(sd):
        sd = dict(sd)
        del sd[gone]
        sd["model.surprise.weight"] = torch.zeros(1)
        return sd

    with pytest.raises(ValueError) as err:
        load_checkpoint(_rewrite(saved, tmp_path, drop))
    assert gone in str(err.value) and "model.surprise.weight" in str(err.value)
    assert "missing 1" in str(err.value) and "unexpected 1" in str(err.value)


def test_loader_rejects_wrong_shape(saved, tmp_path):
    key = "model.action_in_proj.weight"
    with pytest.raises(ValueError, match="action_in_proj"):
        load_checkpoint(_rewrite(saved, tmp_path, lambda sd: {**sd, key: torch.zeros(1, 1)}))


def test_bf16_load(saved):
    model, *_ = load_checkpoint(saved, "cpu", "bfloat16")
    assert model.dtype == torch.bfloat16
    logits, act = _outputs(model)
    assert torch.isfinite(act.float()).all()


def test_norm_stats_quantile_convention():
    s = NormStats.quantiles(np.array([0.0, -1.0], np.float32), np.array([2.0, -1.0], np.float32),
                  np.array([-4.0, 1.0], np.float32), np.array([4.0, 3.0], np.float32))
    np.testing.assert_allclose(s.normalize_state([1.0, -1.0]), [0.0, -1.0])  # equal q: eps denom
    np.testing.assert_allclose(s.normalize_state([2.0, -1.0])[0], 1.0)
    np.testing.assert_allclose(s.unnormalize_actions([[-1.0, 1.0, 0.7]]), [[-4.0, 3.0]])  # pad cut
    x = np.array([3.0, 2.0], np.float32)
    np.testing.assert_allclose(s.unnormalize_actions(2 * (x - s.action.lo) / (s.action.hi - s.action.lo) - 1), x,
                               rtol=1e-6)


# ---- tokenizer refusal, openpi layout, real config fields, lean reading --------------------------
from oxygen_ros.engine.model import FeatureNorm
from oxygen_ros.engine.families.pi05.checkpoint import describe_checkpoint
from oxygen_ros.engine.families.loader import open_checkpoint
from oxygen_ros.engine.families.pi05.writer import save_openpi_checkpoint
from oxygen_ros.engine.families.pi05 import checkpoint as ckpt_mod  # noqa: E402


def test_no_findable_tokenizer_is_refused_with_what_to_do(tiny_model, tmp_path, hf_home, sp_model,
                                                          sp_trainer):
    folder = save_lerobot_checkpoint(tiny_model, tiny_model.config, tmp_path / "c",
                                     norm_stats=_stats(8), tokenizer_name="acme/tok")
    with pytest.raises(ValueError) as err:
        load_checkpoint(folder)
    for part in (str(folder), "acme/tok", "model.tokenizer", "tokenizer.model"):
        assert part in str(err.value), part
    ck = open_checkpoint(folder, tokenizer=sp_model)  # given explicitly: a file
    assert ck.tokenizer.vocab_size == 512 and ck.tokenizer_source == str(sp_model)
    small = tmp_path / "small.model"
    sp_trainer(small, 200)
    with pytest.raises(ValueError, match="200 tokens but the checkpoint's embedding has 512 rows"):
        load_checkpoint(folder, tokenizer=small)


def test_named_repo_found_in_local_hf_cache(tiny_model, tmp_path, add_to_hf_cache, sp_model):
    folder = save_lerobot_checkpoint(tiny_model, tiny_model.config, tmp_path / "c", tokenizer_name="acme/tok")
    add_to_hf_cache("acme/tok", {"tokenizer.model": sp_model})
    ck = open_checkpoint(folder)
    assert "acme/tok" in ck.tokenizer_source and ck.info.tokenizer_repos == ("acme/tok",)


def _openpi_stats(dim, rng):
    q01 = rng.uniform(-2, 0, dim)
    return {"mean": q01 + 1, "std": rng.uniform(0.1, 1, dim), "q01": q01, "q99": q01 + rng.uniform(0.5, 3, dim)}


def test_openpi_layout_loads_with_chosen_asset(tiny_model, tmp_path):
    rng = np.random.default_rng(1)
    tok = build_tiny_tokenizer(512)
    folder = tmp_path / "openpi"
    s1 = {"state": _openpi_stats(7, rng), "actions": _openpi_stats(7, rng)}
    save_openpi_checkpoint(tiny_model, tiny_model.config, folder, s1, asset_id="acme/arm", tokenizer=tok)
    keys = set(load_file(str(folder / "model.safetensors")))
    assert "paligemma_with_expert.paligemma.lm_head.weight" in keys and not any(k.startswith("model.") for k in keys)
    assert any(".vision_tower.vision_model.encoder." in k for k in keys)
    assert json.loads((folder / "config.json").read_text())["action_horizon"] == 10
    ck = open_checkpoint(folder)
    assert ck.info.format == "openpi" and ck.info.asset_id == "acme/arm"
    assert (ck.info.state_dim, ck.info.action_dim) == (7, 7)
    assert ck.info.camera_keys == ("base_0_rgb", "left_wrist_0_rgb")  # tiny: 2 cameras
    for a, b in zip(_outputs(tiny_model), _outputs(ck.model)):
        assert torch.equal(a, b)
    # openpi's quantile convention: (x - q01) / (q99 - q01 + 1e-6) * 2 - 1, and back
    q01, q99 = np.float32(s1["state"]["q01"]), np.float32(s1["state"]["q99"])
    x = np.float32(rng.uniform(-3, 3, 7))
    np.testing.assert_array_equal(ck.norm_stats.normalize_state(x),
                                  (x - q01) / (q99 - q01 + np.float32(1e-6)) * np.float32(2) - np.float32(1))
    a = np.float32(rng.uniform(-1, 1, (3, 32)))
    aq01, aq99 = np.float32(s1["actions"]["q01"]), np.float32(s1["actions"]["q99"])
    np.testing.assert_array_equal(ck.norm_stats.unnormalize_actions(a),
                                  (a[:, :7] + 1) / 2 * (aq99 - aq01 + np.float32(1e-6)) + aq01)
    # a second asset: the choice becomes explicit
    s2 = {"state": {k: v for k, v in _openpi_stats(6, rng).items() if k in ("mean", "std")},
          "actions": {k: v for k, v in _openpi_stats(6, rng).items() if k in ("mean", "std")}}
    save_openpi_checkpoint(tiny_model, tiny_model.config, folder, s2, asset_id="other", tokenizer=tok)
    with pytest.raises(ValueError, match=r"\['acme/arm', 'other'\].*asset_id"):
        describe_checkpoint(folder)
    with pytest.raises(ValueError, match="nope/norm_stats.json not found"):
        describe_checkpoint(folder, asset_id="nope")
    st = describe_checkpoint(folder, asset_id="other").norm_stats
    assert st.state.kind == "mean_std" and st.state_dim == 6  # no quantiles: mean/std
    m, sd = np.float32(s2["state"]["mean"]), np.float32(s2["state"]["std"])
    np.testing.assert_array_equal(st.normalize_state(x[:6]), (x[:6] - m) / (sd + np.float32(1e-6)))


def test_lerobot_mean_std_mode_and_feature_fields(tiny_model, tmp_path):
    rng = np.random.default_rng(2)
    mean, std = np.float32(rng.uniform(-1, 1, 5)), np.float32(rng.uniform(0.1, 2, 5))
    stats = NormStats(FeatureNorm("mean_std", mean, std, source="MEAN_STD"),
                      FeatureNorm("range", mean - 1, mean + 1, source="QUANTILES"))
    cams = ["observation.images.base_0_rgb", "observation.images.left_wrist_0_rgb"]
    folder = save_lerobot_checkpoint(tiny_model, tiny_model.config, tmp_path / "c", norm_stats=stats,
                                     tokenizer=build_tiny_tokenizer(512), camera_keys=cams, n_action_steps=4)
    ck = describe_checkpoint(folder)
    assert ck.info.camera_keys == tuple(cams) and ck.info.n_action_steps == 4
    assert (ck.info.state_dim, ck.info.action_dim) == (5, 5) and ck.tokenizer is not None
    x = np.float32(rng.uniform(-3, 3, 5))
    np.testing.assert_array_equal(ck.norm_stats.normalize_state(x), (x - mean) / (std + np.float32(1e-8)))
    cfg = json.loads((folder / "config.json").read_text())
    cfg["image_resolution"] = [64, 64]
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="image_resolution"):
        describe_checkpoint(folder)


def test_lerobot_own_fields_give_the_pi05_shape(tmp_path):
    cfg = {"type": "pi05", "paligemma_variant": "gemma_2b", "action_expert_variant": "gemma_300m",
           "chunk_size": 15, "n_action_steps": 8, "max_action_dim": 32, "tokenizer_max_length": 200,
           "image_resolution": [224, 224],
           "input_features": {"observation.images.base_0_rgb": {"type": "VISUAL", "shape": [3, 224, 224]},
                              "observation.images.wrist_0_rgb": {"type": "VISUAL", "shape": [3, 224, 224]},
                              "observation.state": {"type": "STATE", "shape": [8]}},
           "output_features": {"action": {"type": "ACTION", "shape": [8]}}}
    tmp_path.joinpath("config.json").write_text(json.dumps(cfg))
    ck = describe_checkpoint(tmp_path)
    assert ck.config.vocab_size == 257152 and ck.config.num_cameras == 2 and ck.config.action_horizon == 15
    assert ck.info.n_action_steps == 8 and (ck.info.state_dim, ck.info.action_dim) == (8, 8)
    assert ck.info.tokenizer_repos == ("google/paligemma-3b-pt-224",) and ck.tokenizer is None
    assert "google/paligemma-3b-pt-224" in ck.tokenizer_source  # why none was found
    cfg["empty_cameras"] = 1  # LeRobot's masked extra camera, when the features do not list it yet
    tmp_path.joinpath("config.json").write_text(json.dumps(cfg))
    ck = describe_checkpoint(tmp_path)
    assert ck.config.num_cameras == 3 and ck.info.camera_keys[-1] == "observation.images.empty_camera_0"
    cfg["paligemma_variant"] = "gemma_7b"
    tmp_path.joinpath("config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="variants"):
        describe_checkpoint(tmp_path)


@pytest.mark.parametrize("file_dtype", [torch.float32, torch.bfloat16])
def test_lean_read_in_blocks_matches_a_plain_cast(tiny_model, tmp_path, monkeypatch, file_dtype):
    monkeypatch.setattr(ckpt_mod, "_SLICE_BYTES", 4096)  # every big tensor in row blocks
    monkeypatch.setattr(ckpt_mod, "_BATCH_BYTES", 16384)  # the file reopened many times
    import copy
    folder = save_lerobot_checkpoint(copy.deepcopy(tiny_model).to(file_dtype), tiny_model.config,
                                     tmp_path / "c", tokenizer=build_tiny_tokenizer(512))
    model, *_ = load_checkpoint(folder, "cpu", torch.bfloat16, progress=False)
    ref = tiny_model.state_dict()
    # the vision tower, projector and norms stay float32 in bf16 (LeRobot's convention since
    # v0.5.0: test_conventions.py); every other tensor is the plain cast
    from oxygen_ros.engine.model.formats import read_checkpoint_files
    keep = read_checkpoint_files(folder)[1].conventions.keeps_fp32
    for name, t in model.state_dict().items():
        want = torch.float32 if keep(name) else torch.bfloat16
        assert t.dtype == want, name
        assert torch.equal(t, ref[name].to(file_dtype).to(want)), name


def test_lerobot_train_config_names_the_action_rate(saved, tmp_path):
    """A LeRobot training run saves train_config.json next to config.json; its env.fps is the
    rate of the chunk's steps (the node's chunk_rate_hz 0 takes it); none without it."""
    import shutil

    from oxygen_ros.engine.model.formats import read_checkpoint_files

    assert read_checkpoint_files(saved)[1].fps is None
    folder = tmp_path / "c"
    shutil.copytree(saved, folder)
    (folder / "train_config.json").write_text(json.dumps({"env": {"type": "aloha", "fps": 50}}))
    assert read_checkpoint_files(folder)[1].fps == 50.0
    (folder / "train_config.json").write_text(json.dumps({"env": None, "dataset": {}}))
    assert read_checkpoint_files(folder)[1].fps is None
    (folder / "train_config.json").write_text(json.dumps({"env": {"fps": -3}}))
    with pytest.raises(ValueError, match="env.fps"):
        read_checkpoint_files(folder)


def test_tokenizer_with_an_added_token_past_the_rows_loads(tiny_model, tmp_path,
                                                           image_token_tokenizer):
    """A LeRobot checkpoint served with a PaliGemma-like tokenizer.json (<image> one past the
    embedding's rows) loads, given or found next to the checkpoint."""
    folder = save_lerobot_checkpoint(tiny_model, tiny_model.config, tmp_path / "c",
                                     norm_stats=_stats(8))
    ck = open_checkpoint(folder, tokenizer=image_token_tokenizer)
    assert ck.tokenizer.vocab_size == 513 and ck.tokenizer.encode("<image>") == [512]
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((image_token_tokenizer / name).read_bytes())
    assert load_checkpoint(folder)[2].vocab_size == 513
