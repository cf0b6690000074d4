"""The DiT action expert (Xiaomi-Robotics-0 style) through the paged runner equals a float64
reference written here from the weights alone: [state ; time ; chunk] tokens, DiT layer i
attending over transformers' prefix K/V of backbone layer depth - L + i plus the DiT tokens
before it (causal), rotary positions continuing after the prefix's largest one, Euler steps."""
from __future__ import annotations

import math

import numpy as np
import torch
from transformers import Qwen3VLForConditionalGeneration

from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.families.qwen3vl.model import patchify
from oxygen_ros.engine.families.qwen3vl.checkpoint import backbone_key, hf_config, init_qwen3vl
from oxygen_ros.engine.runner.model_runner import ModelRunner, SeqView

MC = PRESETS["xr0-tiny"]


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _rope(x, pos, d, theta):
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def _reference_velocity(w, x, t, state, positions, prefix_kv):
    """v(x, t) in float64 numpy from the state dict ``w`` (DiT keys without 'experts.0.')."""
    mc, e = MC, MC.action_experts[0]
    width, d, hkv = e.width, mc.head_dim, mc.num_kv_heads
    hq = e.num_heads
    lin = lambda name, v: v @ w[name + ".weight"].T + (w[name + ".bias"] if name + ".bias" in w else 0)
    half = width // 2
    period = 4e-3 * (4.0 / 4e-3) ** np.linspace(0.0, 1.0, half)
    arg = 2 * math.pi / period * t
    temb = np.concatenate([np.sin(arg), np.cos(arg)])
    silu = lambda v: v / (1 + np.exp(-v))
    tok = [lin("state_proj", state).reshape(mc.qwen.state_tokens, width),
           lin("time_mlp_out", silu(lin("time_mlp_in", temb)))[None],
           lin("action_in_proj", x)]
    h = np.concatenate(tok)
    n = h.shape[0]
    for i in range(e.num_layers):
        p = f"layers.{i}."
        a = _rms(h, w[p + "input_layernorm.weight"], mc.rms_eps)
        q = _rms(lin(p + "self_attn.q_proj", a).reshape(n, hq, d), w[p + "self_attn.q_norm.weight"], mc.rms_eps)
        k = _rms(lin(p + "self_attn.k_proj", a).reshape(n, hkv, d), w[p + "self_attn.k_norm.weight"], mc.rms_eps)
        v = lin(p + "self_attn.v_proj", a).reshape(n, hkv, d)
        q, k = _rope(q, positions, d, mc.rope_theta), _rope(k, positions, d, mc.rope_theta)
        pk, pv = prefix_kv[i]
        keys, vals = np.concatenate([pk, k]), np.concatenate([pv, v])
        plen = pk.shape[0]
        group = np.arange(hq) // (hq // hkv)  # the KV head each query head reads
        scores = np.einsum("jhd,shd->hjs", q, keys[:, group]) / math.sqrt(d)
        visible = np.arange(plen + n)[None, :] <= plen + np.arange(n)[:, None]
        scores = np.where(visible[None], scores, -np.inf)
        prob = np.exp(scores - scores.max(-1, keepdims=True))
        prob /= prob.sum(-1, keepdims=True)
        out = np.einsum("hjs,shd->jhd", prob, vals[:, group])
        h = h + lin(p + "self_attn.o_proj", out.reshape(n, -1))
        m = _rms(h, w[p + "post_attention_layernorm.weight"], mc.rms_eps)
        h = h + lin(p + "mlp.down_proj", silu(lin(p + "mlp.gate_proj", m)) * lin(p + "mlp.up_proj", m))
    h = _rms(h, w["norm.weight"], mc.rms_eps)
    return lin("action_out_proj", h[-x.shape[0]:])


def test_dit_denoise_equals_float64_reference():
    torch.manual_seed(1)
    model = init_qwen3vl(MC, seed=3)
    hf = Qwen3VLForConditionalGeneration(hf_config(MC)).eval()
    hf.load_state_dict({k: v for k, v in
                        ((hfk, model.state_dict()[backbone_key(hfk)]) for hfk in hf.state_dict()
                         if backbone_key(hfk) in model.state_dict()) },
                       strict=False)
    if MC.qwen.tie_word_embeddings:
        hf.tie_weights()
    runner = ModelRunner(model, MC, num_blocks=24, block_size=8)
    images = (torch.rand(1, MC.vision.image_size, MC.vision.image_size, 3) * 255).to(torch.uint8)
    prompt = [21, 22, 23, 24] + list(MC.qwen.tail_ids)
    plen = MC.prefix_tokens(1, len(prompt))
    table = list(range(23, 23 - (plen + MC.action_tokens + 7) // 8, -1))
    runner.prefill_observation(images.numpy(), prompt, SeqView(table, plen))
    state = torch.linspace(-1.2, 0.9, MC.action_dim)
    noise = torch.randn(MC.action_horizon, MC.action_dim, generator=torch.Generator().manual_seed(5))
    offset = MC.rope_offset(1)
    got = runner.denoise(SeqView(table, plen, offset), plen, noise, 3, state=state)

    ids = model.prefix_ids(1, prompt)
    ids_t = torch.tensor([ids])
    pix = images.permute(0, 3, 1, 2).float() / 255 * 2 - 1
    side = MC.vision.image_size // MC.vision.patch_size
    with torch.no_grad():
        ref = hf(input_ids=ids_t, pixel_values=patchify(pix, MC.vision.patch_size, 2, 2),
                 image_grid_thw=torch.tensor([[1, side, side]]),
                 mm_token_type_ids=(ids_t == MC.qwen.image_token_id).int(), use_cache=True)
        pos, _ = hf.model.get_rope_index(ids_t, (ids_t == MC.qwen.image_token_id).int(),
                                         torch.tensor([[1, side, side]]))
    first = MC.depth - MC.action_experts[0].num_layers
    kv = [tuple(c.transpose(0, 1).double().numpy() for c in
                (ref.past_key_values.layers[first + i].keys[0],
                 ref.past_key_values.layers[first + i].values[0]))
          for i in range(MC.action_experts[0].num_layers)]
    w = {k[len("experts.0."):]: v.double().numpy() for k, v in model.state_dict().items()
         if k.startswith("experts.0.")}
    positions = int(pos.max()) + 1 + np.arange(MC.action_tokens, dtype=np.float64)
    x = noise.double().numpy()
    for step in range(3):
        x = x - _reference_velocity(w, x, 1.0 - step / 3, state.double().numpy(), positions, kv) / 3
    np.testing.assert_allclose(got.numpy(), x, atol=1e-4, rtol=0)
    assert np.abs(x - noise.numpy()).max() > 0.1  # the expert moved the chunk
