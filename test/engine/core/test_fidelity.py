"""The method changes scheduling, never results: all four modes give the same greedy tokens for
every request and the same action chunks, for several seeds, (k, N, S) and arrival patterns."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from oxygen_ros.bench.compare import collect_requests
from oxygen_ros.bench.compare import compare_runs
from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.model import LocalContext, sample_actions
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MODES = ("oxygen", "shared", "isolated", "parallel")
PROMPTS = ["What is on the table?\n", "Describe the gripper.\n",
           "Is the red cube inside the bowl now, or is it still on the table next to it?\n",
           "Memory: what happened?\n"]


@pytest.fixture(scope="module")
def tiny():
    return PRESETS["tiny"], build_tiny_tokenizer(512)


def arrivals(pattern: str, frames: int, seed: int) -> dict[int, list[tuple[str, int]]]:
    """frame -> [(prompt, priority)] questions asked before that frame."""
    rng = np.random.default_rng(seed)
    out: dict[int, list[tuple[str, int]]] = {}
    for f in range(frames):
        if pattern == "every_frame":
            n = 1
        elif pattern == "bursty":
            n = 4 if f % 4 == 1 else 0
        elif pattern == "poisson":
            n = int(rng.poisson(1.2))
        else:
            raise ValueError(pattern)
        out[f] = [(PROMPTS[int(rng.integers(len(PROMPTS)))], int(rng.integers(0, 3)))
                  for _ in range(n)]
    return out


def run(model, mc, tok, mode: str, k: int, n: int, s: int, seed: int, pattern: str,
        frames: int = 5, memory_every: int = 2, max_active: int = 32, num_blocks: int = 0) -> dict:
    cfg = EngineConfig(mode=mode, decode_steps_per_frame=k, max_decode_steps=n, denoise_steps=s,
                       max_active_requests=max_active, memory_every_n_frames=memory_every,
                       seed=seed, num_blocks=num_blocks)
    engine = Engine(mc, cfg, model=model, tokenizer=tok)
    stream = SyntheticStream(mc, seed=seed)
    plan = arrivals(pattern, frames, seed)
    outputs = []
    for f in range(frames):
        for prompt, prio in plan.get(f, []):
            engine.ask(prompt, priority=prio)
        outputs.append(engine.step(stream.frame(f)))
    outputs += engine.drain(stream.frame, max_frames=200)
    assert not engine.has_unfinished(), "requests never finished"
    out_frames = [{"frame": out.frame, "actions": out.actions.tolist()} for out in outputs]
    assert engine.kv.usage().blocks_used == 0, "KV blocks leaked after every request finished"
    requests = collect_requests(outputs)
    return {
        "requests": requests,
        "frames": out_frames,
        "waited": sum(r["admitted_frame"] > r["frame"] for r in requests),
    }


CASES = [
    # seed, k, N, S, pattern
    (0, 4, 12, 10, "every_frame"),
    (1, 5, 12, 5, "poisson"),  # k does not divide N
    (2, 8, 3, 4, "bursty"),  # k > N
    (3, 3, 1, 2, "every_frame"),  # N = 1
    (4, 1, 6, 3, "poisson"),
]


@pytest.mark.parametrize("seed,k,n,s,pattern", CASES)
def test_modes_are_output_identical(tiny, seed, k, n, s, pattern):
    mc, tok = tiny
    model = init_model(mc, seed=seed)
    runs = {m: run(model, mc, tok, m, k, n, s, seed, pattern) for m in MODES}
    ref = runs["isolated"]
    assert len(ref["requests"]) >= 3
    assert all(len(r["tokens"]) >= 1 for r in ref["requests"])
    for mode in ("oxygen", "shared", "parallel"):
        result = compare_runs(ref, runs[mode], tie=1e-4, atol=1e-5)
        for rid, pos, margin in result.near_tie_flips:  # accepted, but never silently
            print(f"{mode} vs isolated: near-tie flip, request {rid} token {pos} margin {margin:.3g}")
        assert result.ok, f"{mode} vs isolated: {result.summary()}\n" + "\n".join(result.mismatches)
        assert result.identical + len(result.near_tie_flips) == result.requests


def test_outputs_are_not_degenerate(tiny):
    """Guards the fidelity test itself: different prompts and frames give different tokens."""
    mc, tok = tiny
    model = init_model(mc, seed=0)
    res = run(model, mc, tok, "oxygen", 4, 12, 4, 0, "every_frame")
    seqs = {tuple(r["tokens"]) for r in res["requests"]}
    assert len(seqs) >= len(res["requests"]) // 2
    assert len({t for r in res["requests"] for t in r["tokens"]}) > 10


def test_compare_detects_a_real_difference(tiny):
    mc, tok = tiny
    model = init_model(mc, seed=0)
    a = run(model, mc, tok, "oxygen", 4, 6, 2, 0, "every_frame", frames=2)
    b = {"requests": [dict(r) for r in a["requests"]], "frames": list(a["frames"])}
    b["requests"][0] = {**b["requests"][0], "tokens": [t + 1 for t in b["requests"][0]["tokens"]]}
    b["frames"][0] = {"frame": 0, "actions": (np.asarray(a["frames"][0]["actions"]) + 1e-3).tolist()}
    result = compare_runs(a, b)
    assert not result.ok and len(result.mismatches) == 2


def test_capacity_short_requests_wait_and_finish_identically(tiny):
    """A pool too small, or a low max_active: requests wait, finish later, same tokens."""
    mc, tok = tiny
    model = init_model(mc, seed=5)
    ref = run(model, mc, tok, "isolated", 2, 8, 2, 5, "bursty", frames=4)
    for limits in ({"max_active": 2}, {"num_blocks": Engine.frame_blocks(mc, EngineConfig()) + 12}):
        small = run(model, mc, tok, "oxygen", 2, 8, 2, 5, "bursty", frames=4, **limits)
        assert small["waited"] > 0, f"{limits}: nothing had to wait; the test proves nothing"
        result = compare_runs(ref, small)
        assert result.ok, f"{limits}: {result.summary()}"


# -- the paged runner against the model's own unpaged path ---------------------------------------
def reference_frame(engine: Engine, obs, question_ids: list[int], n_tokens: int):
    """The frame computed by the model alone (contiguous LocalContext, no pool, no paging):
    prefix prefill, pi0.5 Euler sampling of the action chunk with the engine's noise, and greedy
    decoding of a question after the prefix. Returns (actions, first logits, tokens, margins)."""
    model, mc = engine.model, engine.model_config
    images = obs.valid_images()
    prompt_ids = engine.intake.action_prompt(obs, engine.config)
    with torch.inference_mode():
        pix = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float()
        pix = pix / 255.0 * 2.0 - 1.0  # uint8 RGB -> [-1, 1]
        hidden = torch.cat([model.embed_images(pix).reshape(-1, mc.vlm.width),
                            model.embed_tokens(torch.as_tensor(prompt_ids))])
        plen = hidden.shape[0]
        ctx = LocalContext.prefill(model)
        model.forward_tokens(0, hidden, torch.arange(plen), ctx)
        noise = torch.randn(mc.action_horizon, mc.action_dim, generator=torch.Generator()
                            .manual_seed(engine.config.seed * 1_000_003 + 0))
        actions = sample_actions(model, 1, ctx.frozen, noise, engine.config.denoise_steps,
                                 plen + torch.arange(mc.action_horizon))
        lang = ctx.appending(causal=True)
        ids, pos = list(question_ids), plen
        tokens, margins, first = [], [], None
        for _ in range(n_tokens):
            out = model.forward_tokens(0, model.embed_tokens(torch.as_tensor(ids)),
                                       pos + torch.arange(len(ids)), lang)
            logits = model.lm_logits(out[-1:]).float()[0]
            first = logits if first is None else first
            top = torch.topk(logits, 2)
            tokens.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
            pos += len(ids)
            ids = [tokens[-1]]
    return actions.numpy(), first, tokens, margins


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_matches_the_unpaged_reference(tiny, mode, monkeypatch):
    mc, tok = tiny
    model = init_model(mc, seed=7)
    engine = Engine(mc, EngineConfig(mode=mode, decode_steps_per_frame=3, max_decode_steps=6,
                                     denoise_steps=4, memory_every_n_frames=0, seed=7),
                    model=model, tokenizer=tok)
    obs = SyntheticStream(mc, seed=7).frame(0)
    question = PROMPTS[2]
    q_ids = tok.encode(question)
    first_logits: list[torch.Tensor] = []
    real = model.lm_logits

    def spy(hidden):
        out = real(hidden)
        if not first_logits:
            first_logits.append(out.float()[0].clone())
        return out

    monkeypatch.setattr(model, "lm_logits", spy)
    rid = engine.ask(question)
    outputs = [engine.step(obs), *engine.drain(SyntheticStream(mc, seed=7).frame)]
    monkeypatch.undo()
    actions, logits, tokens, margins = reference_frame(engine, obs, q_ids, 6)
    np.testing.assert_allclose(outputs[0].actions, actions, atol=1e-5, rtol=0)
    torch.testing.assert_close(first_logits[0], logits, atol=1e-4, rtol=0)
    [req] = [r for r in collect_requests(outputs) if r["id"] == rid]
    assert req["tokens"] == tokens
    np.testing.assert_allclose(req["margins"], margins, atol=1e-4)
