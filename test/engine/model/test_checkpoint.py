import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from oxygen_ros.engine.model import (LocalContext, NormStats, load_checkpoint,
                                     save_lerobot_checkpoint)
from oxygen_ros.engine.model.checkpoint import PRE_STATE, POST_STATE
from oxygen_ros.engine.tokenizer import build_tiny_tokenizer

PWE = "model.paligemma_with_expert."


def _stats(dim):
    rng = np.random.default_rng(0)
    lo = rng.uniform(-2, 0, dim).astype(np.float32)
    hi = lo + rng.uniform(0.5, 3, dim).astype(np.float32)
    return NormStats(lo, hi, lo * 2, hi * 2, extra={"observation.state.mean": (lo + hi) / 2,
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
    np.testing.assert_array_equal(stats.state_q99, _stats(8).state_q99)
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
    s = NormStats(np.array([0.0, -1.0], np.float32), np.array([2.0, -1.0], np.float32),
                  np.array([-4.0, 1.0], np.float32), np.array([4.0, 3.0], np.float32))
    np.testing.assert_allclose(s.normalize_state([1.0, -1.0]), [0.0, -1.0])  # equal q: eps denom
    np.testing.assert_allclose(s.normalize_state([2.0, -1.0])[0], 1.0)
    np.testing.assert_allclose(s.unnormalize_actions([[-1.0, 1.0, 0.7]]), [[-4.0, 3.0]])  # pad cut
    x = np.array([3.0, 2.0], np.float32)
    np.testing.assert_allclose(s.unnormalize_actions(2 * (x - s.action_q01) / (s.action_q99 - s.action_q01) - 1), x,
                               rtol=1e-6)
