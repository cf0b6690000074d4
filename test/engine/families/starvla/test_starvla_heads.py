"""StarVLA's action heads (engine/families/starvla/heads.py) against float64 references written here
from the weights alone, in StarVLA's own time convention (tau from 0 = noise to 1, the network
predicting action - noise, Euler steps of +1/S) and one frame at a time without padding; batch
independence; the presets; validation."""
import dataclasses
import math

import pytest
import torch

from oxygen_ros.cli.bench import parse_args
from oxygen_ros.bench.floor import count_params as floor_count_params
from oxygen_ros.engine.config import (PRESETS, RUNNABLE_PRESETS, STARVLA_GR00T, STARVLA_OFT,
                                      STARVLA_PI_V3, STARVLA_TINY_PI_V3, EngineConfig,
                                      ExpertConfig, frame_unsupported_reason, head_names,
                                      noise_rows)
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.config.head_config import CrossAttnHeadConfig, RegressHeadConfig
from oxygen_ros.engine.families.starvla.heads import (CrossAttnHead, build_head, crossattn_memory,
                                                      crossattn_memory_bytes, crossattn_sample,
                                                      crossattn_velocity, init_head,
                                                      kept_hidden_bytes, kept_layers,
                                                      query_positions, regress_chunk)

MC = PRESETS["starvla-tiny-e4"]
PI_V3, GR00T, OFT = MC.action_experts
D = torch.float64
TOL = dict(rtol=2e-4, atol=2e-4)
LENGTHS = (37, 29, 33)  # three frames' prefix lengths, padded to the longest


@pytest.fixture(scope="module")
def heads():
    return [init_head(build_head(e, MC.vlm.width), seed=i + 1) for i, e in
            enumerate(MC.action_experts)]


@pytest.fixture(scope="module")
def prefill():
    """Hidden states of every backbone layer for three frames of different lengths: [depth, B,
    P, W] (zeros past a frame's length) and the valid mask [B, P]."""
    gen = torch.Generator().manual_seed(7)
    p = max(LENGTHS)
    hidden = torch.randn(MC.depth, len(LENGTHS), p, MC.vlm.width, generator=gen)
    valid = torch.arange(p)[None, :] < torch.tensor(LENGTHS)[:, None]
    return hidden * valid[None, :, :, None], valid


# ---- float64 references (plain ops on the state dict, one frame at a time) -------------------
def weights(module):
    return {k: v.to(D) for k, v in module.state_dict().items()}


def lin(w, name, x):
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def norm(x, eps, w=None, name=None):
    mu = x.mean(-1, keepdim=True)
    y = (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    return y if name is None else y * w[name + ".weight"] + w[name + ".bias"]


def silu(x):
    return x / (1 + torch.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def attend(q, k, v, heads):
    """Softmax attention of q [T, W] over k / v [S, W], heads split along W."""
    t, width = q.shape
    d = width // heads
    out = []
    for h in range(heads):
        sl = slice(h * d, (h + 1) * d)
        s = q[:, sl] @ k[:, sl].T / math.sqrt(d)
        p = torch.exp(s - s.max(-1, keepdim=True).values)
        out.append((p / p.sum(-1, keepdim=True)) @ v[:, sl])
    return torch.cat(out, dim=-1)


def sinusoid(value, channels, divisor_shift, cos_first):
    half = channels // 2
    freq = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=D) / (half - divisor_shift))
    arg = value * freq
    return torch.cat((arg.cos(), arg.sin()) if cos_first else (arg.sin(), arg.cos()))


def ref_dit_u(w, e: ExpertConfig, layers, x, bucket, state=None):
    """StarVLA's prediction action - noise for one frame: layers = its hidden states [P, W_vlm]
    per block (the block's own layer, or the last one for every block)."""
    c, heads = e.head, e.num_heads
    temb = lin(w, "time_out", silu(lin(w, "time_in", sinusoid(bucket, c.time_channels, 1, True))))
    a = lin(w, "action_in", x)
    a = torch.cat((a, sinusoid(bucket, e.width, 0, False).expand(c.horizon, -1)), dim=-1)
    a = lin(w, "action_out", silu(lin(w, "action_mix", a))) + w["positions"][: c.horizon]
    toks = [w["future"], a]
    if c.state_dim:
        toks.insert(0, lin(w, "state_out", torch.relu(lin(w, "state_in", state)))[None])
    h = torch.cat(toks)
    j = 0
    for i in range(e.num_layers):
        b = f"blocks.{i}"
        scale, shift = lin(w, b + ".ada", silu(temb)).chunk(2)
        n = norm(h, 1e-5) * (1 + scale) + shift
        self_attn = c.interleave_self_attention and i % 2 == 1
        if self_attn:
            kv = n
        elif c.source == "layerwise":
            kv = lin(w, f"projections.{j}.1", norm(layers[i], 1e-5, w, f"projections.{j}.0"))
            j += 1
        else:
            kv = layers[i]
        att = attend(lin(w, b + ".to_q", n), lin(w, b + ".to_k", kv), lin(w, b + ".to_v", kv),
                     heads)
        h = h + lin(w, b + ".to_out", att)
        h = h + lin(w, b + ".ff_out", gelu_tanh(lin(w, b + ".ff_in", norm(h, 1e-5))))
    if c.output_dim:
        shift, scale = lin(w, "out_ada", silu(temb)).chunk(2)
        h = lin(w, "out_proj", norm(h, 1e-6) * (1 + scale) + shift)
    return lin(w, "decoder_out", torch.relu(lin(w, "decoder_in", h[-c.horizon:])))


def ref_dit_sample(w, e, layers, noise, steps, state=None):
    """StarVLA's sampler: tau_k = k / S, bucket int(tau_k * 1000), x += u / S."""
    x = noise
    for k in range(steps):
        x = x + (1.0 / steps) * ref_dit_u(w, e, layers, x, int(k / steps * e.head.time_buckets),
                                          state)
    return x


def frame_layers(e, hidden, f):
    """One frame's (unpadded) hidden states per block, as its head reads them."""
    n = LENGTHS[f]
    if e.head.source == "last":
        return [hidden[-1, f, :n].to(D)] * e.num_layers
    return [hidden[MC.depth - e.num_layers + i, f, :n].to(D) for i in range(e.num_layers)]


def head_input(e, hidden):
    return hidden[-1] if e.head.source == "last" else hidden[MC.depth - e.num_layers:]


# ---- the DiT heads ------------------------------------------------------------------------
@pytest.mark.parametrize("which, steps", [(0, 4), (0, 5), (1, 4)], ids=["pi_v3-S4", "pi_v3-S5",
                                                                         "gr00t-S4"])
def test_dit_head_samples_as_the_float64_reference(heads, prefill, which, steps):
    """PI_v3 (layer-wise projected, all cross) and GR00T (last hidden, interleaved self-attention,
    state token, output projection): the project's Euler sampler (t = 1 -> 0, v = -u) lands where
    StarVLA's (tau = 0 -> 1) does, per frame, from a padded batch; S = 5 passes tau = 0.2, the
    bucket float rounding would miss."""
    e, head = MC.action_experts[which], heads[which]
    hidden, valid = prefill
    gen = torch.Generator().manual_seed(11)
    noise = torch.randn(len(LENGTHS), e.head.horizon, e.head.action_dim, generator=gen)
    state = torch.randn(len(LENGTHS), e.head.state_dim, generator=gen) if e.head.state_dim \
        else None
    memory = crossattn_memory(head, head_input(e, hidden), valid)
    got = crossattn_sample(head, memory, noise, steps, state)
    w = weights(head)
    for f in range(len(LENGTHS)):
        ref = ref_dit_sample(w, e, frame_layers(e, hidden, f), noise[f].to(D), steps,
                             None if state is None else state[f].to(D))
        torch.testing.assert_close(got[f].to(D), ref, **TOL)
    assert got.abs().mean() > 0.1  # not a degenerate chunk


def test_velocity_is_minus_starvlas_prediction_at_one_minus_t(heads, prefill):
    e, head = PI_V3, heads[0]
    hidden, valid = prefill
    x = torch.randn(len(LENGTHS), 16, 7, generator=torch.Generator().manual_seed(3))
    memory = crossattn_memory(head, head_input(e, hidden), valid)
    v = crossattn_velocity(head, memory, x, 0.75)  # tau 0.25: bucket 250
    w = weights(head)
    for f in range(len(LENGTHS)):
        ref = ref_dit_u(w, e, frame_layers(e, hidden, f), x[f].to(D), 250)
        torch.testing.assert_close(v[f].to(D), -ref, **TOL)


# ---- the OFT head -------------------------------------------------------------------------
def ref_regress(w, e, queries):
    x = torch.relu(lin(w, "fc_in", norm(queries, 1e-5, w, "norm_in")))
    for i in range(e.num_layers):
        x = x + torch.relu(lin(w, f"blocks.{i}.1", norm(x, 1e-5, w, f"blocks.{i}.0")))
    return lin(w, "fc_out", norm(x, 1e-5, w, "norm_out"))


def prompt_ids(gen):
    """Three prompts whose action queries end at different places, one with a stray
    placeholder earlier (the last H count)."""
    p, qid, h = max(LENGTHS), OFT.head.query_token_id, OFT.head.horizon
    ids = torch.randint(0, 2000, (len(LENGTHS), p), generator=gen)
    for f, n in enumerate(LENGTHS):
        ids[f, n - h - 2:n - 2] = qid
    ids[1, 3] = qid
    return ids


def test_regress_head_matches_the_float64_reference(heads, prefill):
    hidden, _ = prefill
    ids = prompt_ids(torch.Generator().manual_seed(5))
    pos = query_positions(ids, OFT.head.query_token_id, OFT.head.horizon)
    h = OFT.head.horizon
    for f, n in enumerate(LENGTHS):
        assert pos[f].tolist() == list(range(n - h - 2, n - 2))
    got = regress_chunk(heads[2], hidden[-1], pos)
    w = weights(heads[2])
    for f, n in enumerate(LENGTHS):
        ref = ref_regress(w, OFT, hidden[-1, f, n - h - 2:n - 2].to(D))
        torch.testing.assert_close(got[f].to(D), ref, **TOL)


# ---- batch independence -------------------------------------------------------------------
def test_a_frames_output_does_not_depend_on_the_other_frames(heads, prefill):
    """Frame 1 alone (unpadded) == frame 1 in the padded batch, and changing frames 0 and 2
    (their hidden states, noise and state) changes nothing of frame 1's chunk."""
    hidden, valid = prefill
    gen = torch.Generator().manual_seed(9)
    n = LENGTHS[1]
    other = hidden.clone()
    other[:, [0, 2]] = torch.randn_like(other[:, [0, 2]])
    for e, head in zip((PI_V3, GR00T), heads):
        noise = torch.randn(3, e.head.horizon, e.head.action_dim, generator=gen)
        state = torch.randn(3, e.head.state_dim, generator=gen) if e.head.state_dim else None
        noise2 = noise.clone()
        noise2[[0, 2]] = torch.randn_like(noise2[[0, 2]])
        out = []
        for hid, nz in ((hidden, noise), (other, noise2)):
            mem = crossattn_memory(head, head_input(e, hid), valid)
            out.append(crossattn_sample(head, mem, nz, 4, state)[1])
        mem1 = crossattn_memory(head, head_input(e, hidden[:, 1:2, :n]))
        alone = crossattn_sample(head, mem1, noise[1:2], 4, None if state is None else state[1:2])
        torch.testing.assert_close(out[0], out[1], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out[0], alone[0], rtol=1e-5, atol=1e-5)
    ids = prompt_ids(gen)
    pos = query_positions(ids, OFT.head.query_token_id, OFT.head.horizon)
    batch = regress_chunk(heads[2], hidden[-1], pos)[1]
    alone = regress_chunk(heads[2], hidden[-1, 1:2, :n], pos[1:2])[0]
    torch.testing.assert_close(batch, alone, rtol=1e-5, atol=1e-5)


# ---- full-size shapes ---------------------------------------------------------------------
def test_full_size_pi_v3_has_starvlas_parameter_count():
    """QwenPI_v3's docstring: action_model 538,678,305 + project_layers 94,593,024 parameters
    on Qwen3-VL-4B with a 1024-wide DiT. Ours plus what StarVLA builds but never runs at
    inference (the DiT's output norm projections, 1024 -> 2048 and 1024 -> 26, and a state
    encoder 7 -> 1024 -> 1024, the state being in the prompt) is exactly that."""
    with torch.device("meta"):
        head = CrossAttnHead(STARVLA_PI_V3, PRESETS["starvla"].vlm.width)
    ours = sum(p.numel() for p in head.parameters())
    unused = (1024 * 2048 + 2048) + (1024 * 26 + 26) + (7 * 1024 + 1024) + (1024 * 1024 + 1024)
    assert ours + unused == 538_678_305 + 94_593_024
    assert sum(p.numel() for p in head.projections.parameters()) == 94_593_024


def test_full_size_heads_build_with_starvlas_shapes():
    with torch.device("meta"):
        gr00t = build_head(STARVLA_GR00T, 2560)
        oft = build_head(STARVLA_OFT, 2560)
    assert gr00t.cross_blocks == tuple(range(0, 16, 2)) and gr00t.tokens == 1 + 32 + 8
    assert gr00t.blocks[0].to_k.weight.shape == (768, 2560)  # cross-attends at the VLM width
    assert gr00t.blocks[1].to_k.weight.shape == (768, 768)  # self-attention
    assert oft.fc_in.weight.shape == (5120, 2560) and len(oft.blocks) == 2


# ---- presets and refusals -----------------------------------------------------------------
def test_presets_construct_and_run():
    expect = {"starvla-tiny": ["hidden-crossattn"],
              "starvla-tiny-e3": ["hidden-crossattn"] * 2,
              "starvla-tiny-e4": ["hidden-crossattn"] * 2 + ["regress"],
              "starvla": ["hidden-crossattn"]}
    for name, kinds in expect.items():
        mc = PRESETS[name]
        assert [e.kind for e in mc.action_experts] == kinds and mc.num_experts == 1 + len(kinds)
        assert mc.replace() == mc  # through plain data (JSON / YAML) and back
        assert name in RUNNABLE_PRESETS and frame_unsupported_reason(mc) is None
        assert parse_args(["--preset", name]).preset == [name]
        # every StarVLA preset's prompt carries OFT's 9 action queries, whatever heads run
        assert mc.qwen.action_query_ids == (mc.qwen.action_query_ids[0],) * 9
    assert frame_unsupported_reason(PRESETS["xr0-tiny"]) is None
    # a kv-layerwise expert beside StarVLA heads: StarVLA is a named family, so the config
    # itself is refused (before the engine or the bandwidth floor could be given it), under
    # either Qwen3-VL family
    for family in ("starvla", "qwen3vl"):
        with pytest.raises(ValueError, match="not both"):
            PRESETS["starvla-tiny"].replace(
                family=family,
                action_experts=(PRESETS["xr0-tiny"].action_experts[0], STARVLA_TINY_PI_V3))
    # E = 2, 3, 4 share one backbone (and so one prefill)
    backbone = {k: v for k, v in PRESETS["starvla-tiny"].to_dict().items()
                if k not in ("name", "action_experts")}
    for name in ("starvla-tiny-e3", "starvla-tiny-e4"):
        assert {k: v for k, v in PRESETS[name].to_dict().items()
                if k not in ("name", "action_experts")} == backbone


def test_head_names_and_noise_rows():
    assert head_names(PRESETS["starvla-tiny-e4"]) == ("pi_v3", "gr00t", "oft")
    assert noise_rows(PRESETS["starvla-tiny-e4"]) == 16 + 8  # the DiT heads' chunks
    assert head_names(PRESETS["xr0-tiny"]) == ("action",)
    assert noise_rows(PRESETS["xr0-tiny"]) == PRESETS["xr0-tiny"].action_horizon
    two = PRESETS["starvla-tiny"].replace(action_experts=(STARVLA_TINY_PI_V3,) * 2)
    assert head_names(two) == ("pi_v3", "pi_v3_2")


def test_a_regress_head_needs_its_queries_in_the_prompt():
    mc = PRESETS["starvla-tiny-e4"]
    with pytest.raises(ValueError, match="action_query_ids"):
        mc.replace(qwen=dataclasses.replace(mc.qwen, action_query_ids=(2056,) * 8))
    with pytest.raises(ValueError, match="action_dim"):
        mc.replace(action_dim=8)


def test_kept_hidden_states(heads, prefill):
    """PI_v3 keeps all 4 tiny layers (GR00T's last one among them), OFT only its query rows;
    the K/V a DiT head computes once per frame is what crossattn_memory_bytes says."""
    hidden, valid = prefill
    for e, head in zip((PI_V3, GR00T), heads):
        mem = crossattn_memory(head, head_input(e, hidden), valid)
        assert mem.nbytes == len(LENGTHS) * crossattn_memory_bytes(e, max(LENGTHS), 4)
    assert kept_layers(PRESETS["starvla-tiny"]) == kept_layers(MC) == (0, 1, 2, 3)
    assert kept_hidden_bytes(MC, 100, 4) == (4 * 100 + 9) * 256 * 4
    full = PRESETS["starvla"]
    assert kept_layers(full) == tuple(range(36))
    assert kept_hidden_bytes(full, 221, 2) == 36 * 221 * 2560 * 2


# ---- validation ---------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, words", [
    (dict(kind="nosuch"), "kind must be one of"),
    (dict(kind="kv-layerwise", head=RegressHeadConfig()), "takes no head"),
    (dict(kind="regress"), "needs a RegressHeadConfig"),
    (dict(kind="hidden-crossattn", head=RegressHeadConfig()), "needs a CrossAttnHeadConfig"),
    (dict(kind="hidden-crossattn", head=CrossAttnHeadConfig(), num_layers=2, num_heads=3),
     "dividing its width"),
    (dict(kind="hidden-crossattn", head=CrossAttnHeadConfig(), num_layers=0, num_heads=2),
     "num_layers >= 1"),
    (dict(kind="hidden-crossattn", head={"source": "middle"}, num_layers=2, num_heads=2),
     "source must be one of"),
])
def test_expert_config_is_validated(kwargs, words):
    with pytest.raises(ValueError, match=words):
        ExpertConfig(64, 128, **{"num_layers": 2, **kwargs})


@pytest.mark.parametrize("kwargs, words", [
    (dict(horizon=0), "horizon must be an integer >= 1"),
    (dict(horizon=20, max_positions=16), "learned positions"),
    (dict(time_channels=7), "even"),
    (dict(interleave_self_attention=1), "true or false"),
    (dict(state_dim=-1), "state_dim"),
])
def test_head_config_is_validated(kwargs, words):
    with pytest.raises(ValueError, match=words):
        CrossAttnHeadConfig(**kwargs)


def test_model_config_checks_the_heads():
    with pytest.raises(ValueError, match="family starvla only"):  # StarVLA is named
        PRESETS["tiny"].replace(action_experts=(ExpertConfig(
            64, 128, num_layers=2, num_heads=2, kind="hidden-crossattn", head=CrossAttnHeadConfig()),))
    with pytest.raises(ValueError, match="last layers"):
        MC.replace(action_experts=(ExpertConfig(128, 256, num_layers=5, num_heads=2,
                                                kind="hidden-crossattn",
                                                head=CrossAttnHeadConfig()),))
    with pytest.raises(ValueError, match="width must be the VLM's"):
        MC.replace(action_experts=(ExpertConfig(128, 256, num_layers=2, kind="regress",
                                                head=RegressHeadConfig()),))
    with pytest.raises(ValueError, match="outside vocab"):
        MC.replace(vocab_size=2056)  # the OFT placeholder is id 2056


def test_head_inputs_are_validated(heads, prefill):
    pi, gr, oft = heads
    hidden, valid = prefill
    with pytest.raises(ValueError, match="last 4 layers"):
        crossattn_memory(pi, hidden[1:])
    with pytest.raises(ValueError, match=r"\[B, P, 256\]"):
        crossattn_memory(pi, hidden[..., :128])
    with pytest.raises(ValueError, match="not a list"):
        crossattn_memory(gr, list(hidden))
    with pytest.raises(ValueError, match="valid must be bool"):
        crossattn_memory(gr, hidden[-1], valid[:, :5])
    none = valid.clone()
    none[0] = False
    with pytest.raises(ValueError, match="at least one valid"):
        crossattn_memory(gr, hidden[-1], none)
    mem = crossattn_memory(gr, hidden[-1], valid)
    state = torch.zeros(3, 7)
    with pytest.raises(ValueError, match=r"x must be \[3, 8, 7\]"):
        crossattn_velocity(gr, mem, torch.zeros(3, 16, 7), 0.5, state)
    with pytest.raises(ValueError, match="takes a state"):
        crossattn_velocity(gr, mem, torch.zeros(3, 8, 7), 0.5)
    with pytest.raises(ValueError, match=r"t must be in \[0, 1\]"):
        crossattn_velocity(gr, mem, torch.zeros(3, 8, 7), 1.5, state)
    with pytest.raises(ValueError, match="num_steps"):
        crossattn_sample(gr, mem, torch.zeros(3, 8, 7), 0, state)
    pmem = crossattn_memory(pi, hidden[-4:], valid)
    with pytest.raises(ValueError, match="no state token"):
        crossattn_velocity(pi, pmem, torch.zeros(3, 16, 7), 0.5, state)
    with pytest.raises(ValueError, match="needs 9 action-query tokens"):
        query_positions(torch.zeros(3, 20, dtype=torch.long), 2056, 9)
    with pytest.raises(ValueError, match="must be in"):
        regress_chunk(oft, hidden[-1], torch.full((3, 9), 99))
    with pytest.raises(ValueError, match=r"positions must be \[3, 9\]"):
        regress_chunk(oft, hidden[-1], torch.zeros(3, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="no StarVLA head"):
        build_head(PRESETS["xr0-tiny"].action_experts[0], 256)
    with pytest.raises(ValueError, match="hidden-crossattn expert"):
        CrossAttnHead(OFT, 256)
