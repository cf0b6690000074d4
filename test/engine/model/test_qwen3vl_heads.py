"""The Qwen3-VL backbone with StarVLA heads (starvla-tiny-e4: PI_v3, GR00T, OFT): the prefill
keeps exactly the hidden states transformers' ``output_hidden_states`` gives, in buffers
allocated once."""
from __future__ import annotations

import torch

from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.model.qwen3vl import patchify, prefill_kept_layers
from oxygen_ros.engine.model.qwen3vl_checkpoint import init_qwen3vl
from oxygen_ros.engine.model.sampler import LocalContext
from oxygen_ros.engine.model.starvla_heads import CrossAttnHead, RegressHead

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
