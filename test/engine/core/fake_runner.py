"""A torch-free stand-in for the ModelRunner's compute, for tests of the engine's bookkeeping
over thousands of frames (the KV manager, scheduler and engine run for real; only the model's
arithmetic is replaced). Tokens are a deterministic function of the request's position."""
from __future__ import annotations

import torch


def fake_compute(engine, vocab: int = 50, eos: int | None = None) -> None:
    """Replace engine.runner's compute methods in place (instance attributes)."""
    runner = engine.runner
    mc = engine.model_config
    actions = torch.zeros(mc.action_horizon, mc.action_dim)

    def generate(seqs, inputs, steps, read_only=None):
        toks, mars = [], []
        for s, seg, n in zip(seqs, inputs, steps):
            base = s.length + len(seg)
            t = [3 + (base + i) % vocab for i in range(n)]
            if eos is not None and base % 7 == 0:
                t[-1] = eos
            toks.append(t)
            mars.append([1.0] * n)
        return toks, mars

    runner.prefill_observation = lambda images, prompt_ids, seq, keep_hidden=False: seq.length
    runner.denoise = lambda seq, plen, noise, steps, expert=1, guide=None, state=None: actions
    runner.copy_blocks = lambda copies: None
    runner.generate = generate
