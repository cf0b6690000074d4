import math
import time

import pytest
import torch

from oxygen_ros.engine.model import LocalContext, euler_sample, model_velocity, sample_actions
from oxygen_ros.engine.families.loader import init_model


def _prefix(model, gen, n_text=30, n_img=2):
    cfg = model.config
    imgs = torch.rand(n_img, 3, cfg.vision.image_size, cfg.vision.image_size, generator=gen) * 2 - 1
    ids = torch.randint(3, cfg.vocab_size, (n_text,), generator=gen)
    img = model.embed_images(imgs)
    assert img.shape == (n_img, cfg.vision.tokens_per_image, cfg.vlm.width)
    return torch.cat([img.reshape(-1, cfg.vlm.width), model.embed_tokens(ids)])


def _two_phase(model, pre_h, valid, x, t, expert=1):
    """Prefill the prefix (recording K/V), then the action expert over the frozen prefix."""
    pos = torch.cumsum(valid.long(), 0) - 1
    ctx = LocalContext.prefill(model, new_valid=valid)
    pre_out = model.forward_tokens(0, pre_h, pos, ctx)
    apos = int(valid.sum()) + torch.arange(x.shape[0])
    vel = model_velocity(model, expert, ctx.frozen, apos)(x, t)
    return pre_out, vel, ctx


# ---- an independent float64 joint MoT forward (both experts per layer, explicit mask) ----------
def _rms(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _rope(x, pos, theta):
    d = x.shape[-1]
    z = torch.complex(x[..., : d // 2], x[..., d // 2:])
    f = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = z * torch.polar(torch.ones(len(pos), d // 2, dtype=torch.float64), pos.double()[:, None] * f)[:, None]
    return torch.cat((z.real, z.imag), -1)


def _joint_reference(model, pre_h, valid, x, t):
    cfg = model.config
    H, KV, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    W = lambda lin: lin.weight.double()  # noqa: E731
    B = lambda lin: lin.bias.double()  # noqa: E731
    head = model.action_heads[0]
    P, A = pre_h.shape[0], x.shape[0]
    h0 = pre_h.double()
    h1 = x.double() @ W(head.action_in_proj).T + B(head.action_in_proj)
    w = cfg.action_experts[0].width
    frac = torch.linspace(0, 1, w // 2, dtype=torch.float64)
    arg = 2 * math.pi / (4e-3 * 1000 ** frac) * float(torch.tensor(t, dtype=torch.float32))
    temb = torch.cat([arg.sin(), arg.cos()]).float().double()
    silu = torch.nn.functional.silu
    cond = silu(silu(temb @ W(head.time_mlp_in).T + B(head.time_mlp_in)) @ W(head.time_mlp_out).T
                + B(head.time_mlp_out))
    pos = torch.cat([torch.cumsum(valid.long(), 0) - 1, int(valid.sum()) + torch.arange(A)])
    allowed = torch.zeros(P + A, P + A, dtype=torch.bool)
    allowed[:, :P] = valid[None, :]
    allowed[P:, P:] = True
    allowed |= torch.eye(P + A, dtype=torch.bool)

    def ada(norm, h):
        s, sh, g = (cond @ W(norm.dense).T + B(norm.dense)).chunk(3)
        return _rms(h) * (1 + s) + sh, g

    for layer in range(cfg.depth):
        L0, L1 = model.experts[0].layers[layer], model.experts[1].layers[layer]
        n0 = _rms(h0) * (1 + L0.input_norm.weight.double())
        n1, g1 = ada(L1.input_norm, h1)
        q = torch.cat([n0 @ W(L0.q_proj).T, n1 @ W(L1.q_proj).T]).view(-1, H, D)
        k = torch.cat([n0 @ W(L0.k_proj).T, n1 @ W(L1.k_proj).T]).view(-1, KV, D)
        v = torch.cat([n0 @ W(L0.v_proj).T, n1 @ W(L1.v_proj).T]).view(-1, KV, D)
        q, k = _rope(q, pos, cfg.rope_theta), _rope(k, pos, cfg.rope_theta)
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        s = torch.einsum("thd,shd->hts", q, k) / math.sqrt(D)
        att = torch.einsum("hts,shd->thd", s.masked_fill(~allowed, -math.inf).softmax(-1), v).reshape(P + A, -1)
        h0 = h0 + att[:P] @ W(L0.o_proj).T
        h1 = h1 + (att[P:] @ W(L1.o_proj).T) * g1

        def mlp(m_, n):
            return (torch.nn.functional.gelu(n @ W(m_.gate_proj).T, approximate="tanh")
                    * (n @ W(m_.up_proj).T)) @ W(m_.down_proj).T

        h0 = h0 + mlp(L0.mlp, _rms(h0) * (1 + L0.post_norm.weight.double()))
        n1, g1 = ada(L1.post_norm, h1)
        h1 = h1 + mlp(L1.mlp, n1) * g1
    out0 = _rms(h0) * (1 + model.experts[0].norm.weight.double())
    out1, _ = ada(model.experts[1].norm, h1)
    return out0, out1 @ W(head.action_out_proj).T + B(head.action_out_proj)


def test_two_phase_matches_joint_float64_reference(tiny_model, gen):
    cfg = tiny_model.config
    pre_h = _prefix(tiny_model, gen)
    valid = torch.ones(pre_h.shape[0], dtype=torch.bool)
    valid[cfg.vision.tokens_per_image: 2 * cfg.vision.tokens_per_image] = False  # masked 2nd camera
    valid[-3:] = False  # padded text
    x = torch.randn(cfg.action_horizon, cfg.action_dim, generator=gen)
    pre_out, vel, _ = _two_phase(tiny_model, pre_h, valid, x, 0.7)
    ref_pre, ref_vel = _joint_reference(tiny_model, pre_h, valid, x, 0.7)
    torch.testing.assert_close(pre_out[valid].double(), ref_pre[valid], atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(vel.double(), ref_vel, atol=2e-4, rtol=1e-4)
    assert vel.abs().max() > 0.05  # not a degenerate all-zero output


@pytest.mark.parametrize("layout", ["standard", "transposed"])
def test_fused_layouts_match_the_float64_reference(tiny_cfg, gen, layout):
    """The engine's fused projections, [out, in] for F.linear or [in, out] for x @ w, compute the
    same model as the plain modules (the reference reads the original weights)."""
    model = init_model(tiny_cfg, seed=0).fuse_projections(layout)
    assert (model.experts[0].layers[0].o_weight_t is not None) == (layout == "transposed")
    pre_h = _prefix(model, gen)
    valid = torch.ones(pre_h.shape[0], dtype=torch.bool)
    x = torch.randn(tiny_cfg.action_horizon, tiny_cfg.action_dim, generator=gen)
    pre_out, vel, _ = _two_phase(model, pre_h, valid, x, 0.3)
    ref_pre, ref_vel = _joint_reference(model, pre_h, valid, x, 0.3)
    torch.testing.assert_close(pre_out.double(), ref_pre, atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(vel.double(), ref_vel, atol=2e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="linear layout"):
        model.fuse_projections("columns")


def test_action_tokens_never_change_prefix(tiny_model, gen):
    cfg = tiny_model.config
    pre_h = _prefix(tiny_model, gen)
    valid = torch.ones(pre_h.shape[0], dtype=torch.bool)
    pos = torch.arange(pre_h.shape[0])
    alone = tiny_model.forward_tokens(0, pre_h, pos, LocalContext.prefill(tiny_model))
    pre_out, vel, ctx = _two_phase(tiny_model, pre_h, valid, torch.randn(10, cfg.action_dim), 0.4)
    k_before = [k.clone() for k in ctx.k]
    x2 = torch.randn(cfg.action_horizon, cfg.action_dim, generator=gen)
    apos = pre_h.shape[0] + torch.arange(cfg.action_horizon)
    euler_sample(model_velocity(tiny_model, 1, ctx.frozen, apos), x2, 3)
    assert torch.equal(pre_out, alone)
    assert ctx.num_tokens == pre_h.shape[0]
    assert all(torch.equal(a, b) for a, b in zip(k_before, ctx.k))


def test_prefix_is_bidirectional_and_actions_see_each_other(tiny_model, gen):
    cfg = tiny_model.config
    pre_h = _prefix(tiny_model, gen)
    valid = torch.ones(pre_h.shape[0], dtype=torch.bool)
    x = torch.randn(cfg.action_horizon, cfg.action_dim, generator=gen)
    out_a, vel_a, _ = _two_phase(tiny_model, pre_h, valid, x, 0.5)
    pre_b = pre_h.clone()
    pre_b[-1] += 1.0  # change the LAST text token
    out_b, vel_b, _ = _two_phase(tiny_model, pre_b, valid, x, 0.5)
    assert (out_a[0] - out_b[0]).abs().max() > 1e-4  # the first image token sees it
    assert (vel_a - vel_b).abs().max() > 1e-4  # the actions see the prefix
    x_c = x.clone()
    x_c[-1] += 1.0
    _, vel_c, _ = _two_phase(tiny_model, pre_h, valid, x_c, 0.5)
    assert (vel_a[0] - vel_c[0]).abs().max() > 1e-4  # first action sees the last
    _, vel_t, _ = _two_phase(tiny_model, pre_h, valid, x, 0.9)
    assert (vel_a - vel_t).abs().max() > 1e-4  # the time conditioning matters


def test_masked_camera_equals_no_camera(tiny_model, gen):
    cfg = tiny_model.config
    n = cfg.vision.tokens_per_image
    pre_h = _prefix(tiny_model, gen)  # cam0, cam1, text
    x = torch.randn(cfg.action_horizon, cfg.action_dim, generator=gen)
    valid = torch.ones(pre_h.shape[0], dtype=torch.bool)
    valid[n: 2 * n] = False
    out_m, vel_m, _ = _two_phase(tiny_model, pre_h, valid, x, 0.3)
    dropped = torch.cat([pre_h[:n], pre_h[2 * n:]])
    out_d, vel_d, _ = _two_phase(tiny_model, dropped, torch.ones(dropped.shape[0], dtype=torch.bool), x, 0.3)
    torch.testing.assert_close(vel_m, vel_d, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out_m[valid], out_d, atol=1e-5, rtol=1e-5)
    # and the masked camera's content is irrelevant
    pre_h2 = pre_h.clone()
    pre_h2[n: 2 * n] = torch.randn(n, cfg.vlm.width, generator=gen) * 10
    _, vel_m2, _ = _two_phase(tiny_model, pre_h2, valid, x, 0.3)
    torch.testing.assert_close(vel_m, vel_m2, atol=1e-5, rtol=1e-5)


def test_embeddings_and_logits(tiny_model):
    cfg = tiny_model.config
    ids = torch.tensor([0, 5, 511])
    emb = tiny_model.embed_tokens(ids)
    torch.testing.assert_close(emb, tiny_model.token_embedding.weight[ids] * math.sqrt(cfg.vlm.width))
    h = torch.randn(2, cfg.vlm.width)
    torch.testing.assert_close(tiny_model.lm_logits(h), h @ tiny_model.token_embedding.weight.T)
    assert tiny_model.time_cond(1, 0.5).shape == (cfg.action_experts[0].width,)
    with pytest.raises(ValueError):
        tiny_model.action_in(0, torch.zeros(1, cfg.action_dim))
    with pytest.raises(ValueError):
        tiny_model.forward_tokens(1, torch.zeros(2, 64), torch.arange(2), LocalContext(2, 1.0))


def test_several_action_experts(tiny_cfg, gen):
    from oxygen_ros.engine.config import ExpertConfig
    cfg = tiny_cfg.replace(action_experts=(ExpertConfig(64, 128), ExpertConfig(32, 64)))
    m = init_model(cfg, seed=3)
    pre_h = _prefix(m, gen, n_text=5, n_img=1)
    valid = torch.ones(pre_h.shape[0], dtype=torch.bool)
    x = torch.randn(cfg.action_horizon, cfg.action_dim, generator=gen)
    _, v1, ctx = _two_phase(m, pre_h, valid, x, 0.5, expert=1)
    _, v2, _ = _two_phase(m, pre_h, valid, x, 0.5, expert=2)
    assert v1.shape == v2.shape == x.shape and not torch.allclose(v1, v2)
    assert m.expert_width(2) == 32


def test_init_is_deterministic(tiny_cfg):
    a, b, c = init_model(tiny_cfg, seed=7), init_model(tiny_cfg, seed=7), init_model(tiny_cfg, seed=8)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["token_embedding.weight"], sc["token_embedding.weight"])


def test_bfloat16_frame_is_close_to_float32(tiny_cfg, gen):
    m32 = init_model(tiny_cfg, seed=0)
    m16 = init_model(tiny_cfg, seed=0, dtype=torch.bfloat16)
    pre_h = _prefix(m32, gen)
    valid = torch.ones(pre_h.shape[0], dtype=torch.bool)
    x = torch.randn(tiny_cfg.action_horizon, tiny_cfg.action_dim, generator=gen)
    _, v32, _ = _two_phase(m32, pre_h, valid, x, 0.5)
    _, v16, _ = _two_phase(m16, pre_h.to(torch.bfloat16), valid, x.to(torch.bfloat16), 0.5)
    assert v16.dtype == torch.bfloat16 and torch.isfinite(v16).all()
    assert (v16.float() - v32).abs().max() < 0.15 * v32.abs().max()


def test_whole_tiny_frame_time(tiny_model, gen):
    """2 images + ~30 text tokens prefill, 10 denoise steps, one CPU thread."""
    cfg = tiny_model.config
    imgs = torch.rand(2, 3, cfg.vision.image_size, cfg.vision.image_size, generator=gen) * 2 - 1
    ids = torch.randint(3, cfg.vocab_size, (30,), generator=gen)
    noise = torch.randn(cfg.action_horizon, cfg.action_dim, generator=gen)

    def frame():
        with torch.inference_mode():
            h = torch.cat([tiny_model.embed_images(imgs).reshape(-1, cfg.vlm.width),
                           tiny_model.embed_tokens(ids)])
            ctx = LocalContext.prefill(tiny_model)
            tiny_model.forward_tokens(0, h, torch.arange(h.shape[0]), ctx)
            apos = ctx.num_valid + torch.arange(cfg.action_horizon)
            return sample_actions(tiny_model, 1, ctx.frozen, noise, 10, apos)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        frame()
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            out = frame()
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    median = sorted(times)[len(times) // 2]
    print(f"tiny frame (1 thread): median {median * 1e3:.1f} ms, min {min(times) * 1e3:.1f} ms")
    assert out.shape == noise.shape and torch.isfinite(out).all()
    assert median < 0.2


@pytest.mark.parametrize("layout", ["standard", "transposed"])
def test_fusing_holds_no_weight_twice(layout):
    """After fuse_projections the original parameters are views into the fused tensors: same
    state dict, no extra bytes, and loading weights afterwards writes through to the fused ones."""
    from oxygen_ros.engine.config import PRESETS
    from oxygen_ros.engine.families.loader import init_model

    model = init_model(PRESETS["tiny"], seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    model.fuse_projections(layout)
    after = model.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(before[k], after[k]) for k in before)
    storages = {}
    for p in model.parameters():
        storages[p.untyped_storage().data_ptr()] = p.untyped_storage().nbytes()
    for layer in model.experts[0].layers:
        for t in (layer.qkv_weight, layer.gate_up_weight, layer.o_weight_t, layer.down_weight_t):
            if t is not None:
                storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    assert sum(storages.values()) == param_bytes
    model.load_state_dict({k: v * 2 if k.endswith("k_proj.weight") else v for k, v in before.items()})
    layer = model.experts[1].layers[0]
    fused = layer.qkv_weight.t() if layout == "transposed" else layer.qkv_weight
    q_rows, k_rows = layer.q_proj.weight.shape[0], layer.k_proj.weight.shape[0]
    assert torch.equal(fused[q_rows:q_rows + k_rows], 2 * before["experts.1.layers.0.k_proj.weight"])
