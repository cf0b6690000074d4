"""The Qwen3-VL backbone equals transformers' Qwen3VLForConditionalGeneration (tiny random
config, float32): prefix hidden states, K/V, logits, rotary positions, the processor's pixel
layout, greedy tokens through the engine in every mode; a save_pretrained folder loads."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from transformers import Qwen3VLForConditionalGeneration

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.qwen3vl.model import Qwen3VLModel, patchify
from oxygen_ros.engine.families.qwen3vl.checkpoint import (backbone_key, hf_config,
                                                           is_qwen3vl_folder, load_qwen3vl_folder,
                                                           save_action_expert)
from oxygen_ros.engine.model.sampler import LocalContext
from oxygen_ros.engine.runner.model_runner import ModelRunner, SeqView
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["xr0-tiny"]
ATOL = 1e-4


@pytest.fixture(scope="module")
def pair(make_qwen3vl_pair):
    """transformers' model with every weight random (norm gains too) and ours holding them."""
    return make_qwen3vl_pair(MC)


def _hf_inputs(ours: Qwen3VLModel, images: torch.Tensor, ids: list[int]) -> dict:
    side = MC.vision.image_size // MC.vision.patch_size
    ids_t = torch.tensor([ids])
    return dict(input_ids=ids_t, pixel_values=patchify(images, MC.vision.patch_size, 2, 2),
                image_grid_thw=torch.tensor([[1, side, side]] * images.shape[0]),
                mm_token_type_ids=(ids_t == MC.qwen.image_token_id).int())


def _images(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, MC.vision.image_size, MC.vision.image_size, generator=g) * 2 - 1


@pytest.mark.parametrize("num_images", [1, 2])
def test_prefix_hidden_kv_logits_positions_equal_transformers(pair, num_images):
    hf, ours = pair
    prompt = [5, 17, 300, 41, 9] + list(MC.qwen.tail_ids)
    images = _images(num_images)
    ctx = LocalContext(MC.depth, ours.attn_scale, record=True, causal=True)
    with torch.no_grad():
        hidden = ours.prefill_prefix(images, prompt, ctx)
        ids = ours.prefix_ids(num_images, prompt)
        inputs = _hf_inputs(ours, images, ids)
        ref = hf(**inputs, use_cache=True, output_hidden_states=True)
        ref_hidden = hf.model(**inputs).last_hidden_state[0]
    assert len(ids) == MC.prefix_tokens(num_images, len(prompt))
    torch.testing.assert_close(hidden, ref_hidden, atol=ATOL, rtol=0)
    torch.testing.assert_close(ours.lm_logits(hidden), ref.logits[0], atol=ATOL, rtol=0)
    for layer in range(MC.depth):
        cache = ref.past_key_values.layers[layer]
        torch.testing.assert_close(ctx.k[layer], cache.keys[0].transpose(0, 1), atol=ATOL, rtol=0)
        torch.testing.assert_close(ctx.v[layer], cache.values[0].transpose(0, 1), atol=ATOL, rtol=0)
    pos, delta = hf.model.get_rope_index(inputs["input_ids"], inputs["mm_token_type_ids"],
                                         inputs["image_grid_thw"])
    assert torch.equal(ours.prefix_positions(ids), pos[:, 0])
    assert int(delta) == MC.rope_offset(num_images)
    assert int(pos.max()) + 1 == len(ids) + MC.rope_offset(num_images)


def test_deepstack_features_change_the_prefix(pair):
    """The DeepStack additions are really applied: without them the hidden states differ."""
    _, ours = pair
    images, prompt = _images(1), [5, 6, 7]
    ctx = LocalContext(MC.depth, ours.attn_scale, record=True, causal=True)
    ids = ours.prefix_ids(1, prompt)
    with torch.no_grad():
        full = ours.prefill_prefix(images, prompt, ctx)
        ids_t = torch.tensor(ids)
        h = ours.embed_tokens(ids_t)
        mask = ids_t == MC.qwen.image_token_id
        feats, _ = ours.embed_images(images)
        h = h.masked_scatter(mask[:, None], feats)
        plain = ours.forward_tokens(0, h, ours.prefix_positions(ids),
                                    LocalContext(MC.depth, ours.attn_scale, record=True, causal=True))
    assert (full - plain)[mask].abs().max() > 1e-3


def test_patch_layout_equals_the_image_processor():
    from transformers import Qwen2VLImageProcessorPil

    size = MC.vision.image_size
    proc = Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=2,
                                    image_mean=[0.5] * 3, image_std=[0.5] * 3,
                                    min_pixels=size * size, max_pixels=size * size)
    u8 = np.random.default_rng(0).integers(0, 256, size=(2, size, size, 3), dtype=np.uint8)
    res = proc(images=list(u8), return_tensors="pt")
    ours = patchify(torch.from_numpy(u8).permute(0, 3, 1, 2).float() / 255 * 2 - 1, 16, 2, 2)
    side = size // 16
    assert res["image_grid_thw"].tolist() == [[1, side, side]] * 2
    torch.testing.assert_close(ours, res["pixel_values"].float(), atol=1e-5, rtol=0)
    assert MC.image_grid_tokens == side * side // 4


def test_runner_pool_holds_transformers_kv(pair):
    """The paged runner's prefill writes exactly transformers' K/V into the pool's slots."""
    hf, ours = pair
    runner = ModelRunner(ours, MC, num_blocks=32, block_size=4)
    images = (torch.rand(2, MC.vision.image_size, MC.vision.image_size, 3) * 255).to(torch.uint8)
    prompt = [11, 12, 13] + list(MC.qwen.tail_ids)
    n = MC.prefix_tokens(2, len(prompt))
    table = list(range(31, 31 - (n + 3) // 4, -1))  # non-contiguous, descending blocks
    runner.prefill_observation(images.numpy(), prompt, SeqView(table, n))
    pix = images.permute(0, 3, 1, 2).float() / 255 * 2 - 1
    with torch.no_grad():
        ref = hf(**_hf_inputs(ours, pix, ours.prefix_ids(2, prompt)), use_cache=True)
    slots = torch.tensor([table[p // 4] * 4 + p % 4 for p in range(n)])
    for layer in range(MC.depth):
        got = runner.k_cache[layer].view(-1, MC.num_kv_heads, MC.head_dim)[slots]
        want = ref.past_key_values.layers[layer].keys[0].transpose(0, 1)
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("preset", ["xr0-tiny", "starvla-tiny-e4"])
def test_question_sits_in_the_user_turn_as_the_chat_template_lays_it_out(qwen_chat, preset):
    """Both Qwen families: the frame's prefix (images, instruction + state, OFT's queries) and a
    question after it are the ids the chat template gives ONE user turn holding the images, the
    instruction and the question on its own line, followed by the generation prompt; the
    prefix alone is a start of that turn (it ends inside it, before <|im_end|>)."""
    from oxygen_ros.engine.core.intake import Intake
    from oxygen_ros.engine.config.family_registry import family_of as model_family
    from oxygen_ros.engine.model.prompt import format_prompt

    mc = PRESETS[preset]
    make_tokenizer, template_ids = qwen_chat
    tok, fast = make_tokenizer(mc.vocab_size)
    intake = Intake(mc, tok, num_blocks=1 << 20, reserved_blocks=0, device=torch.device("cpu"))
    with torch.device("meta"):
        model = Qwen3VLModel(mc)
    cfg = EngineConfig()
    obs = SyntheticStream(mc).frame(0)
    n = obs.images.shape[0]
    prefix = model.prefix_ids(n, intake.action_prompt(obs, cfg))
    instruction = format_prompt(obs.instruction, obs.state, bins=mc.state_bins) \
        + "<|oft|>" * len(mc.qwen.action_query_ids)
    for question in ("what happened?", "Is the cup on the left?"):
        want = template_ids(fast, n, mc.image_grid_tokens, [instruction, "\n" + question])
        assert prefix + intake.encode_suffix(question) == want
        # the prefix ends before the instruction's trailing space (xr0-tiny; after OFT's
        # queries nothing is carried), which opens the question's text: then "\n", same turn
        carried = tok.encode(model_family(mc).carried_text(mc))
        assert want[:len(prefix)] == prefix
        assert want[len(prefix):len(prefix) + len(carried) + 1] == carried + [2052]


@pytest.fixture(scope="module")
def chat_tokenizer(qwen_chat):
    """The tiny BPE with the chat template's tokens at xr0-tiny's ids: (ours, transformers')."""
    return qwen_chat[0](MC.vocab_size)


def _engine_tokens(model, mode: str, tokenizer, frames: int = 3
                   ) -> tuple[dict[int, list[int]], list, Engine]:
    cfg = EngineConfig(mode=mode, decode_steps_per_frame=2, max_decode_steps=5, denoise_steps=2,
                       max_active_requests=4)
    engine = Engine(MC, cfg, model=model, tokenizer=tokenizer)
    stream = SyntheticStream(MC)
    tokens: dict[int, list[int]] = {}
    actions = []
    for f in range(frames):
        out = engine.step(stream.frame(f))
        actions.append(out.actions)
        for u in out.updates:
            tokens.setdefault(u.id, []).extend(u.new_tokens)
    for out in engine.drain(stream.frame):  # no new requests
        for u in out.updates:
            tokens.setdefault(u.id, []).extend(u.new_tokens)
    return tokens, actions, engine


@pytest.fixture(scope="module")
def isolated_run(pair, chat_tokenizer):
    tokens, actions, _ = _engine_tokens(pair[1], "isolated", chat_tokenizer[0])
    return tokens, actions


@pytest.mark.parametrize("mode", ["isolated", "parallel", "shared", "oxygen"])
def test_engine_greedy_tokens_equal_transformers_generate(pair, isolated_run, chat_tokenizer,
                                                         qwen_chat, mode):
    """Frame 0's memory request: the engine's tokens equal transformers' generate on the ids
    the chat template gives the user turn (images, instruction, the memory prompt) + the
    generation prompt."""
    from oxygen_ros.engine.model.prompt import format_prompt

    hf, ours = pair
    tokens, actions, engine = _engine_tokens(ours, mode, chat_tokenizer[0])
    stream = SyntheticStream(MC)
    obs = stream.frame(0)
    cfg = engine.config
    n = obs.images.shape[0]
    ids = qwen_chat[1](chat_tokenizer[1], n, MC.image_grid_tokens,
                            [format_prompt(obs.instruction, obs.state, bins=MC.state_bins),
                             "\n" + cfg.memory_prompt])
    assert ours.prefix_ids(n, engine.intake.action_prompt(obs, cfg)) \
        + engine.intake.memory_ids(cfg.memory_prompt) == ids
    pix = torch.from_numpy(obs.images).permute(0, 3, 1, 2).float() / 255 * 2 - 1
    with torch.no_grad():
        gen = hf.generate(**_hf_inputs(ours, pix, ids), max_new_tokens=5, do_sample=False,
                          eos_token_id=None, pad_token_id=0)
    want = gen[0, len(ids):].tolist()
    got = tokens[1]  # frame 0's memory request
    assert got == want[:len(got)] and (len(got) == 5 or got[-1] == MC.eos_token_id)
    if mode != "isolated":  # every mode: the same actions and the same tokens as isolated
        ref_tokens, ref_actions = isolated_run
        assert tokens == ref_tokens
        for a, b in zip(actions, ref_actions):
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


def test_save_pretrained_folder_loads_as_the_backbone(pair, tmp_path, caplog):
    hf, ours = pair
    hf.save_pretrained(tmp_path)
    assert is_qwen3vl_folder(tmp_path)
    with caplog.at_level(logging.WARNING):
        mc, loaded = load_qwen3vl_folder(tmp_path, base=MC)
    assert "RANDOM" in caplog.text
    assert (mc.depth, mc.num_heads, mc.num_kv_heads, mc.head_dim) == (4, 4, 2, 128)
    assert mc.qwen.deepstack_visual_indexes == MC.qwen.deepstack_visual_indexes
    prompt, images = [3, 4, 5], _images(1, seed=3)
    outs = []
    for m in (ours, loaded):
        ctx = LocalContext(MC.depth, m.attn_scale, record=True, causal=True)
        with torch.no_grad():
            outs.append(m.lm_logits(m.prefill_prefix(images, prompt, ctx)))
    torch.testing.assert_close(outs[0], outs[1], atol=0, rtol=0)
    # our writer's expert file travels with the folder and loads back exactly
    save_action_expert(ours, tmp_path)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _, again = load_qwen3vl_folder(tmp_path, base=MC)
    assert "RANDOM" not in caplog.text
    for k, v in ours.state_dict().items():
        if k.startswith("experts."):
            assert torch.equal(v, again.state_dict()[k]), k


def test_oxygen_inspect_recognises_a_qwen3vl_folder(pair, tmp_path):
    from oxygen_ros.cli.inspect_checkpoint import inspect

    pair[0].save_pretrained(tmp_path)
    build_tiny_tokenizer(2048).save(tmp_path)
    report = inspect(tmp_path)
    assert report["format"] == "qwen3vl" and not report["problems"], report
    assert "depth 4" in report["model"] and "RANDOM" in report["action_expert"]


def _edited_folder(hf, folder, edit) -> None:
    """``hf`` saved by save_pretrained, then its config.json changed by ``edit(dict)``."""
    import json

    hf.save_pretrained(folder)
    d = json.loads((folder / "config.json").read_text())
    edit(d)
    (folder / "config.json").write_text(json.dumps(d))


def _logits_equal_transformers_from_the_folder(folder) -> float:
    """Our loader's and transformers' from_pretrained logits on one image + prompt; returns the
    largest difference (asserted <= ATOL)."""
    ref = Qwen3VLForConditionalGeneration.from_pretrained(folder).eval()
    mc, ours = load_qwen3vl_folder(folder, base=MC)
    prompt, images = [3, 4, 5, 6], _images(1, seed=4)
    ids = ours.prefix_ids(1, prompt)
    with torch.no_grad():
        ctx = LocalContext(mc.depth, ours.attn_scale, record=True, causal=True)
        got = ours.lm_logits(ours.prefill_prefix(images, prompt, ctx))
        want = ref(**_hf_inputs(ours, images, ids)).logits[0]
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    return float((got - want).abs().max())


def test_tie_flag_read_as_transformers_does(pair, tmp_path):
    """Only the top-level tie_word_embeddings counts (default False): a file whose text_config
    says tie but whose top level says nothing keeps its own lm_head.weight, as transformers."""
    hf, _ = pair
    untied = Qwen3VLForConditionalGeneration(hf_config(MC.replace(
        qwen=MC.qwen.__class__(**{**MC.qwen.__dict__, "tie_word_embeddings": False}))))
    untied.load_state_dict(hf.state_dict(), strict=False)
    with torch.no_grad():
        untied.lm_head.weight.normal_(0.0, 0.1)  # its own head, not the embedding

    def edit(d):
        d.pop("tie_word_embeddings", None)
        d["text_config"]["tie_word_embeddings"] = True

    _edited_folder(untied, tmp_path, edit)
    assert not Qwen3VLForConditionalGeneration.from_pretrained(tmp_path).config.tie_word_embeddings
    _logits_equal_transformers_from_the_folder(tmp_path)


def test_missing_rope_theta_is_transformers_default(pair, tmp_path):
    def edit(d):
        for key in ("rope_parameters", "rope_scaling"):
            d["text_config"].get(key, {}).pop("rope_theta", None)
        d["text_config"].pop("rope_theta", None)

    _edited_folder(pair[0], tmp_path, edit)
    from transformers import Qwen3VLTextConfig

    mc, _ = load_qwen3vl_folder(tmp_path, base=MC)
    assert mc.rope_theta == Qwen3VLTextConfig.default_theta == 500_000.0
    _logits_equal_transformers_from_the_folder(tmp_path)


def test_hidden_act_of_text_mlp_and_vision_tower_follow_the_file(pair, tmp_path):
    """Another activation in config.json computes as transformers does (ACT2FN), where the old
    code silently kept SiLU / GELU-tanh; an unknown or parametric one is refused naming it."""
    def edit(d):
        d["text_config"]["hidden_act"] = "gelu"
        d["vision_config"]["hidden_act"] = "quick_gelu"

    _edited_folder(pair[0], tmp_path, edit)
    _logits_equal_transformers_from_the_folder(tmp_path)
    mc, _ = load_qwen3vl_folder(tmp_path, base=MC)
    assert (mc.qwen.hidden_act, mc.qwen.vision_hidden_act) == ("gelu", "quick_gelu")
    for bad in ("swishy", "prelu"):
        _edited_folder(pair[0], tmp_path, lambda d: d["text_config"].update(hidden_act=bad))
        with pytest.raises(ValueError, match=f"hidden_act '{bad}'"):
            load_qwen3vl_folder(tmp_path, base=MC)
