"""The Qwen3-VL backbone with StarVLA heads (starvla-tiny-e4: PI_v3, GR00T, OFT): the prefill
keeps exactly the hidden states transformers' ``output_hidden_states`` gives, in buffers
allocated once; the engine's frame (one prefill, each head in turn, batched language) gives the
same tokens and chunks in every mode, and the chunks the heads give on those hidden states."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from oxygen_ros.engine.config import PRESETS, EngineConfig, head_names
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.qwen3vl.model import patchify, prefill_kept_layers
from oxygen_ros.engine.families.qwen3vl.checkpoint import init_qwen3vl
from oxygen_ros.engine.model.sampler import LocalContext
from oxygen_ros.engine.families.starvla.heads import (CrossAttnHead, RegressHead, crossattn_memory,
                                                      crossattn_sample, query_positions,
                                                      regress_chunk)
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["starvla-tiny-e4"]


def test_heads_are_built_and_initialised_by_init_head_rules():
    model = init_qwen3vl(MC, seed=0)
    pi, gr, oft = (model.head(i) for i in (1, 2, 3))
    assert isinstance(pi, CrossAttnHead) and isinstance(gr, CrossAttnHead)
    assert isinstance(oft, RegressHead)
    assert [model.expert_kind(i) for i in range(4)] == ["lm", "hidden-crossattn",
                                                        "hidden-crossattn", "regress"]
    assert float(pi.future.std()) > 0.5  # learned tokens ~ N(0, 1), not the backbone's zeros
    assert float(pi.blocks[0].to_q.bias.abs().max()) > 0  # biases ~ N(0, 0.1)
    other = init_qwen3vl(MC, seed=1)
    assert not torch.equal(other.head(1).future, pi.future)  # the seed reaches the heads
    # PI_v3 reads all 4 layers (its 4 blocks), GR00T and OFT the last
    assert prefill_kept_layers(MC) == (0, 1, 2, 3)
    assert prefill_kept_layers(PRESETS["xr0-tiny"]) == ()


def test_kept_hidden_states_equal_transformers_output_hidden_states(make_qwen3vl_pair):
    hf, ours = make_qwen3vl_pair(MC)
    rows = MC.max_prefix_tokens
    keep = {i: torch.full((rows, MC.vlm.width), float("nan")) for i in ours.kept_layers}
    prompt = [5, 17, 300] + [MC.action_experts[2].head.query_token_id] * 9 + list(MC.qwen.tail_ids)
    side = MC.vision.image_size // MC.vision.patch_size
    for n_img in (2, 1):  # the same buffers for a longer, then a shorter prefix
        images = torch.rand(n_img, 3, MC.vision.image_size, MC.vision.image_size,
                            generator=torch.Generator().manual_seed(n_img)) * 2 - 1
        ids = ours.prefix_ids(n_img, prompt)
        ctx = LocalContext(MC.depth, ours.attn_scale, record=True, causal=True)
        ids_t = torch.tensor([ids])
        with torch.no_grad():
            out = ours.prefill_prefix(images, prompt, ctx, keep=keep)
            ref = hf(input_ids=ids_t, pixel_values=patchify(images, MC.vision.patch_size, 2, 2),
                     image_grid_thw=torch.tensor([[1, side, side]] * n_img),
                     mm_token_type_ids=(ids_t == MC.qwen.image_token_id).int(),
                     output_hidden_states=True).hidden_states
        p = len(ids)
        assert len(ref) == MC.depth + 1
        for layer, buf in keep.items():
            torch.testing.assert_close(buf[:p], ref[layer + 1][0], atol=1e-4, rtol=0)
        torch.testing.assert_close(keep[MC.depth - 1][:p], out, atol=0, rtol=0)
        assert all(buf.shape == (rows, MC.vlm.width) for buf in keep.values())


# ---- the frame: one prefill, each head in turn, batched language --------------------------
def _run(mc, mode: str, model, frames: int = 3):
    cfg = EngineConfig(mode=mode, decode_steps_per_frame=2, max_decode_steps=5, denoise_steps=4,
                       max_active_requests=4, memory_every_n_frames=1)
    engine = Engine(mc, cfg, model=model, tokenizer=build_tiny_tokenizer(2048))
    stream = SyntheticStream(mc)
    tokens: dict[int, list[int]] = {}
    chunks = []
    for f in range(frames):
        out = engine.step(stream.frame(f))
        chunks.append(out.chunks)
        assert out.actions is out.chunks[head_names(mc)[0]]  # the node's commands: the first head
        for u in out.updates:
            tokens.setdefault(u.id, []).extend(u.new_tokens)
    for out in engine.drain(stream.frame):
        for u in out.updates:
            tokens.setdefault(u.id, []).extend(u.new_tokens)
    return tokens, chunks, engine


@pytest.mark.parametrize("preset", ["starvla-tiny", "starvla-tiny-e3", "starvla-tiny-e4"])
def test_every_mode_gives_the_same_tokens_and_chunks_for_every_head(preset):
    mc = PRESETS[preset]
    model = init_qwen3vl(mc, seed=0)
    ref_tokens, ref_chunks, _ = _run(mc, "isolated", model)
    assert ref_tokens and all(len(t) for t in ref_tokens.values())
    for frame in ref_chunks:
        assert tuple(frame) == head_names(mc)
        for name, e in zip(head_names(mc), mc.action_experts):
            assert frame[name].shape == (e.head.horizon, e.head.action_dim)
            assert np.isfinite(frame[name]).all()
    assert not np.allclose(ref_chunks[0]["pi_v3"], ref_chunks[1]["pi_v3"])  # frames differ
    for mode in ("parallel", "shared", "oxygen"):
        tokens, chunks, _ = _run(mc, mode, model)
        assert tokens == ref_tokens, mode
        for got, want in zip(chunks, ref_chunks):
            assert tuple(got) == tuple(want)
            for name in want:
                np.testing.assert_allclose(got[name], want[name], atol=1e-5, rtol=0,
                                           err_msg=f"{mode} {name}")


def test_engine_chunks_equal_the_heads_on_the_prefill_hidden_states():
    """Frame 0's chunks from the engine equal starvla_heads' functions called directly on a
    prefill of the same observation and prompt (unpaged, with its own buffers), with the
    frame's noise split by head and its state; the prompt (the prefix) ends with OFT's queries."""
    mc = PRESETS["starvla-tiny-e4"]
    model = init_qwen3vl(mc, seed=3)
    _, chunks, engine = _run(mc, "oxygen", model, frames=1)
    obs = SyntheticStream(mc).frame(0)
    prompt = engine.intake.action_prompt(obs, engine.config)
    q = mc.qwen
    assert prompt[-9:] == list(q.action_query_ids)  # the prefix ends inside the user turn
    assert engine.runner.hidden_bytes == 4 * mc.max_prefix_tokens * mc.vlm.width * 4
    keep = {i: torch.zeros(mc.max_prefix_tokens, mc.vlm.width) for i in model.kept_layers}
    pix = torch.from_numpy(obs.images).permute(0, 3, 1, 2).float() / 255 * 2 - 1
    with torch.no_grad():
        model.prefill_prefix(pix, prompt, LocalContext(mc.depth, model.attn_scale, record=True,
                                                       causal=True), keep=keep)
        ids = model.prefix_ids(len(pix), prompt)
        p = len(ids)
        hidden = [keep[i][:p][None] for i in range(mc.depth)]
        noise = engine.ops._noise(0, engine.config)
        state = torch.as_tensor(obs.state, dtype=torch.float32)[None]
        pi, gr, oft = (model.head(i) for i in (1, 2, 3))
        want = {
            "pi_v3": crossattn_sample(pi, crossattn_memory(pi, hidden), noise[None, :16], 4)[0],
            "gr00t": crossattn_sample(gr, crossattn_memory(gr, hidden[-1]), noise[None, 16:24], 4,
                                      state)[0],
            "oft": regress_chunk(oft, hidden[-1], query_positions(
                torch.tensor([ids]), mc.action_experts[2].head.query_token_id, 9))[0]}
    for name, w in want.items():
        np.testing.assert_allclose(chunks[0][name], w.numpy(), atol=1e-5, rtol=0, err_msg=name)
    # the query positions are the 9 placeholders ending the prefix
    assert query_positions(torch.tensor([ids]), 2056, 9)[0].tolist() == list(range(p - 9, p))


def test_action_head_picks_the_commanded_chunk_and_nothing_else():
    """EngineConfig.action_head: FrameOutput.actions is that head's chunk; every head's chunk is
    the same as with the default (the choice changes what is commanded, not what is computed);
    a head the model lacks is refused when the engine is built, naming its heads; it is fixed
    while the engine runs; a one-expert model's head is "action"."""
    mc = PRESETS["starvla-tiny-e4"]
    model = init_qwen3vl(mc, seed=0)
    stream = SyntheticStream(mc)
    outs = {}
    for head in ("", "oft"):
        cfg = EngineConfig(decode_steps_per_frame=2, max_decode_steps=3, denoise_steps=2,
                           action_head=head)
        engine = Engine(mc, cfg, model=model, tokenizer=build_tiny_tokenizer(2048))
        outs[head] = engine.step(stream.frame(0))
    assert outs["oft"].actions is outs["oft"].chunks["oft"] and outs["oft"].actions.shape == (9, 7)
    assert outs[""].actions is outs[""].chunks["pi_v3"]
    for name in head_names(mc):
        np.testing.assert_array_equal(outs["oft"].chunks[name], outs[""].chunks[name])
    with pytest.raises(ValueError, match="action_head cannot change"):
        engine.update_config(action_head="gr00t")
    with pytest.raises(ValueError, match=r"'gr00t_2' is not a head .*pi_v3, gr00t, oft"):
        Engine(mc, EngineConfig(action_head="gr00t_2"), model=model,
               tokenizer=build_tiny_tokenizer(2048))
    tiny = PRESETS["xr0-tiny"]
    assert Engine(tiny, EngineConfig(action_head="action")).config.action_head == "action"
    with pytest.raises(ValueError, match="its heads are action"):
        Engine(tiny, EngineConfig(action_head="pi_v3"))
