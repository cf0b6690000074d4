"""Qwen3.5's backbone (qwen35.py) equals transformers' Qwen3_5ForConditionalGeneration: a tiny
random model (every weight random, norm gains, decays and conv kernels too) saved by
save_pretrained loads; first-step logits within 1e-4 in float32 on the same images + text; 24
greedy tokens from our chunked prefill + recurrent decode (explicit per-sequence state) equal
transformers' generate; the chunked and recurrent forms agree; a prefix state forked into two
continuations gives the tokens of two fresh prefills."""
from __future__ import annotations

import json

import pytest
import torch
from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

from oxygen_ros.engine.families.qwen35 import gated_delta
from oxygen_ros.engine.families.qwen35.model import LinearState, Qwen35Model, load_qwen35_folder
from oxygen_ros.engine.families.qwen3vl.model import patchify

ATOL = 1e-4
IMAGE = 64  # 4 x 4 patches of 16 -> 2 x 2 merged tokens per image
VOCAB = 300
IMG, START, END = 297, 298, 299


def tiny_config(**text) -> Qwen3_5Config:
    """6 layers [L, L, F] x 2; attention: 4 query / 2 KV heads of 32, a quarter rotary (8 dims,
    MRoPE sections 2/1/1); GDN: 2 key heads, 4 value heads (grouped), dk = dv = 16, kernel 4."""
    t = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
             num_attention_heads=4, num_key_value_heads=2, head_dim=32,
             linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
             linear_num_key_heads=2, linear_num_value_heads=4,
             layer_types=["linear_attention", "linear_attention", "full_attention"] * 2,
             rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                  partial_rotary_factor=0.25, mrope_section=[2, 1, 1],
                                  mrope_interleaved=True))
    t.update(text)
    return Qwen3_5Config(
        text_config=t,
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2,
                           patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
                           out_hidden_size=64, num_position_embeddings=16),
        image_token_id=IMG, vision_start_token_id=START, vision_end_token_id=END,
        tie_word_embeddings=False)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """transformers' model (seeded, every 1-D parameter perturbed so that norms, decays and
    biases matter) and ours loaded from its save_pretrained folder."""
    torch.manual_seed(0)
    hf = Qwen3_5ForConditionalGeneration(tiny_config()).eval()
    with torch.no_grad():
        for p in hf.parameters():
            if p.dim() == 1:
                p.add_(0.3 * torch.randn_like(p))
    folder = tmp_path_factory.mktemp("qwen35")
    hf.save_pretrained(folder)
    _, ours = load_qwen35_folder(folder)
    return hf, ours, folder


def _images(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, IMAGE, IMAGE, generator=g) * 2 - 1


def _ids(ours: Qwen35Model, n_images: int, text: list[int]) -> list[int]:
    image = ours.image_ids(IMAGE)
    return [7, 8, 9] + image * n_images + text


def _hf_inputs(ids: list[int], images: torch.Tensor) -> dict:
    ids_t = torch.tensor([ids])
    side = IMAGE // 16
    return dict(input_ids=ids_t, pixel_values=patchify(images, 16, 2, 2),
                image_grid_thw=torch.tensor([[1, side, side]] * images.shape[0]),
                mm_token_type_ids=(ids_t == IMG).int())


def _greedy(ours: Qwen35Model, ids: list[int], images, steps: int, chunk: int = 64
            ) -> tuple[list[int], torch.Tensor, LinearState]:
    """Our chunked prefill, then ``steps`` - 1 recurrent decode steps: (tokens, every step's
    logits [steps, V], the final state)."""
    ctx, state = ours.new_context(), ours.new_state()
    with torch.no_grad():
        hidden, delta = ours.prefill(ids, images, ctx, state, chunk=chunk)
        logits = [ours.lm_logits(hidden[-1:])[0]]
        tokens = [int(logits[-1].argmax())]
        for i in range(steps - 1):
            logits.append(ours.decode(tokens[-1], len(ids) + i + delta, ctx, state))
            tokens.append(int(logits[-1].argmax()))
    return tokens, torch.stack(logits), state


def test_config_folder_and_layers(pair):
    hf, ours, folder = pair
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_5"
    assert ours.layer_types == tuple(hf.config.text_config.layer_types)
    assert (ours.num_linear_layers, ours.num_attention_layers, ours.rotary_dims) == (4, 2, 8)
    assert not hasattr(ours.visual, "deepstack_merger_list")  # no DeepStack in Qwen3.5
    conv, rec = ours.state_shapes()
    assert conv == (2 * 2 * 16 + 4 * 16, 4) and rec == (4, 16, 16)


@pytest.mark.parametrize("n_images", [1, 2])
def test_first_step_logits_equal_transformers(pair, n_images):
    hf, ours, _ = pair
    images = _images(n_images)
    ids = _ids(ours, n_images, [11, 12, 13, 14, 15, 16, 17])
    with torch.no_grad():
        hidden, delta = ours.prefill(ids, images, ours.new_context(), ours.new_state())
        ref = hf(**_hf_inputs(ids, images))
        pos, ref_delta = hf.model.get_rope_index(**{k: v for k, v in _hf_inputs(ids, images).items()
                                                    if k != "pixel_values"})
    got = ours.lm_logits(hidden)
    torch.testing.assert_close(got, ref.logits[0], atol=ATOL, rtol=0)
    assert delta == int(ref_delta) and torch.equal(ours.positions(ids, IMAGE)[0], pos[:, 0])


def test_greedy_24_tokens_equal_transformers_generate(pair):
    hf, ours, _ = pair
    images = _images(2, seed=1)
    ids = _ids(ours, 2, [21, 22, 23, 24, 25])
    tokens, logits, _ = _greedy(ours, ids, images, 24)
    with torch.no_grad():
        out = hf.generate(**_hf_inputs(ids, images), max_new_tokens=24, do_sample=False,
                          eos_token_id=None, pad_token_id=0, output_logits=True,
                          return_dict_in_generate=True)
    assert tokens == out.sequences[0, len(ids):].tolist()
    torch.testing.assert_close(logits, torch.cat(out.logits), atol=ATOL, rtol=0)


def test_chunked_and_recurrent_forms_agree(pair):
    """One chunked pass (chunks of 8: several) over prefix + 24 tokens gives the logits and the
    state of a prefill followed by 24 one-token recurrent steps, to ~1e-5; and the two kernels
    alone agree on random inputs with a carried-in state."""
    _, ours, _ = pair
    images = _images(1, seed=2)
    ids = _ids(ours, 1, [31, 32, 33])
    tokens, stepped, state = _greedy(ours, ids, images, 25)
    full_ctx, full_state = ours.new_context(), ours.new_state()
    with torch.no_grad():
        hidden, _ = ours.prefill(ids + tokens[:-1], images, full_ctx, full_state, chunk=8)
    whole = ours.lm_logits(hidden[len(ids) - 1:])
    torch.testing.assert_close(whole, stepped, atol=1e-5, rtol=0)
    for a, b in zip(full_state.recurrent + full_state.conv, state.recurrent + state.conv):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    g = torch.Generator().manual_seed(3)
    t, h, dk, dv = 70, 3, 16, 8
    q = torch.nn.functional.normalize(torch.randn(t, h, dk, generator=g), dim=-1) * dk ** -0.5
    k = torch.nn.functional.normalize(torch.randn(t, h, dk, generator=g), dim=-1)
    v, s0 = torch.randn(t, h, dv, generator=g), torch.randn(h, dk, dv, generator=g)
    decay, beta = -torch.rand(t, h, generator=g), torch.rand(t, h, generator=g)
    ref_out, ref_state = gated_delta.recurrent(q, k, v, decay, beta, s0)
    for chunk in (64, 16, 5):
        out, state_c = gated_delta.chunked(q, k, v, decay, beta, s0, chunk)
        torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
        torch.testing.assert_close(state_c, ref_state, atol=1e-5, rtol=0)


def test_state_lives_where_the_caller_put_it(pair):
    """A LinearState made of views into preallocated per-layer pools (slot 1 of 3, as a state
    pool would hand out) is written in place: the same tokens as a fresh state, the slot's
    storage holds the final state, the other slots are untouched."""
    _, ours, _ = pair
    (conv, rec), n = ours.state_shapes(), ours.num_linear_layers
    conv_pool, rec_pool = torch.zeros(n, 3, *conv), torch.zeros(n, 3, *rec)
    state = LinearState([conv_pool[i, 1] for i in range(n)], [rec_pool[i, 1] for i in range(n)])
    images = _images(1, seed=5)
    ids = _ids(ours, 1, [71, 72, 73])
    ctx = ours.new_context()
    with torch.no_grad():
        hidden, delta = ours.prefill(ids, images, ctx, state)
        tokens = [int(ours.lm_logits(hidden[-1:])[0].argmax())]
        for i in range(5):
            tokens.append(int(ours.decode(tokens[-1], len(ids) + i + delta, ctx, state).argmax()))
    want, _, fresh = _greedy(ours, ids, images, 6)
    assert tokens == want
    for i in range(n):
        assert state.conv[i].data_ptr() == conv_pool[i, 1].data_ptr()
        assert torch.equal(conv_pool[i, 1], fresh.conv[i]) and torch.equal(rec_pool[i, 1], fresh.recurrent[i])
        assert not conv_pool[i, [0, 2]].any() and not rec_pool[i, [0, 2]].any()
    assert state.nbytes == n * 4 * (conv[0] * conv[1] + rec[0] * rec[1] * rec[2])


def test_forked_prefix_state_gives_two_fresh_prefills_tokens(pair):
    """A prefix's state (K/V context + linear state) snapshotted once, each of two questions
    continued from its own copy: the same 8 greedy tokens and logits as two fresh prefills of
    prefix + question; the snapshot itself is left as it was."""
    _, ours, _ = pair
    images = _images(2, seed=4)
    prefix = _ids(ours, 2, [41, 42])
    questions = ([51, 52, 53, 54], [61, 62])
    ctx, state = ours.new_context(), ours.new_state()
    with torch.no_grad():
        _, delta = ours.prefill(prefix, images, ctx, state)
    snapshot = state.clone()
    for q in questions:
        fork_ctx, fork_state = ctx.appending(), state.clone()
        n = len(prefix)
        with torch.no_grad():
            hidden = ours.forward_tokens(ours.language_model.embed_tokens(torch.tensor(q)),
                                         torch.arange(n, n + len(q)) + delta, fork_ctx, fork_state)
            logits = [ours.lm_logits(hidden[-1:])[0]]
            tokens = [int(logits[-1].argmax())]
            for i in range(7):
                logits.append(ours.decode(tokens[-1], n + len(q) + i + delta, fork_ctx, fork_state))
                tokens.append(int(logits[-1].argmax()))
        fresh_tokens, fresh_logits, _ = _greedy(ours, prefix + q, images, 8)
        assert tokens == fresh_tokens
        torch.testing.assert_close(torch.stack(logits), fresh_logits, atol=1e-5, rtol=0)
    for a, b in zip(state.recurrent + state.conv, snapshot.recurrent + snapshot.conv):
        assert torch.equal(a, b)


def test_weights_that_do_not_fit_the_config_are_refused(pair, tmp_path):
    import shutil

    _, _, folder = pair
    for f in folder.iterdir():
        shutil.copy(f, tmp_path / f.name)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["text_config"]["intermediate_size"] = 96
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="do not fit its Qwen3.5 config"):
        load_qwen35_folder(tmp_path)


def test_what_is_not_implemented_is_refused(tmp_path):
    with pytest.raises(ValueError, match="hidden_act 'prelu'"):
        Qwen35Model(tiny_config(hidden_act="prelu"))
    bad = tiny_config()
    bad.text_config.rope_parameters["rope_type"] = "yarn"
    with pytest.raises(ValueError, match="rope_type 'yarn'"):
        Qwen35Model(bad)
