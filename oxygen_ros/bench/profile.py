"""Stage-cost micro-benchmarks on the engine's own runner: prefill, denoise, and one batched
decode step at several batch sizes; the KV manager's calls replayed; the two linear layouts.
The sweep uses them for its stage costs; `oxygen-bench profile` (bench/suite/profile.py) runs
them alone."""
from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch

from ..engine.config import noise_rows
from ..engine.core.engine import Engine
from ..engine.core.synthetic import SyntheticStream
from ..engine.core.frame_ops import pad_state
from ..engine.runner.model_runner import ModelRunner, SeqView
from .kv_recorder import KVCallRecorder
from .timing import median_ms


def decode_step_ms(runner: ModelRunner, seqs: Sequence[SeqView], batches: Sequence[int],
                   steps: int = 1, repeats: int = 5, budget_s: float = 0.0,
                   max_repeats: int = 25) -> tuple[dict[int, float], int]:
    """Median ms of one batched decode step at each batch size b (the first b of `seqs`, each
    advanced `steps` tokens per call). Rounds are interleaved (every size once per round), at
    least `repeats` of them and more while `budget_s` lasts: a passing disturbance on a shared
    machine then hits all sizes alike instead of skewing one ratio. Returns (medians, rounds)."""
    cuda = runner.device.type == "cuda"
    sizes = sorted(set(batches))

    def once(b: int) -> float:
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        runner.generate(seqs[:b], [[5]] * b, [steps] * b)
        if cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / steps

    for b in sizes:  # warm every shape first
        once(b)
    times: dict[int, list[float]] = {b: [] for b in sizes}
    start, rounds = time.perf_counter(), 0
    while rounds < repeats or (rounds < max_repeats and time.perf_counter() - start < budget_s):
        for b in sizes:
            times[b].append(once(b))
        rounds += 1
    return {b: statistics.median(t) for b, t in times.items()}, rounds


def action_path_ms(engine: Engine, denoise_steps: Sequence[int], repeats: int = 7
                   ) -> tuple[float, dict[int, float]]:
    """Median ms of one observation prefill (vision + prompt, a synthetic frame) and of one
    S-step denoise on that prefix for each S, on this engine's weights and pool, outside any
    frame. Returns (prefill_ms, {S: denoise_ms})."""
    mc = engine.model_config
    obs = SyntheticStream(mc, seed=0).frame(0)
    prompt = engine.intake.action_prompt(obs, engine.config)
    images = obs.valid_images()
    n_prefix = engine.prefix_tokens(images, prompt)
    kv, runner = engine.kv, engine.runner
    seq = 10_000_000
    kv.create(seq)
    blocks = kv.append(seq, list(range(n_prefix)), reserve=mc.action_tokens, cacheable=False)
    if blocks is None:
        raise ValueError("KV pool too small for the prefill micro-benchmark")
    view = SeqView(blocks.block_ids, n_prefix, mc.rope_offset(len(images)), blocks.state_slot)
    try:
        prefill = median_ms(lambda: runner.prefill_observation(images, prompt, view,
                                                                keep_hidden=True), repeats)
        noise = torch.randn(noise_rows(mc), mc.action_dim)
        state = pad_state(obs.state, mc.action_dim)
        # the frame's whole action stage (every StarVLA head in turn), as FrameOps.denoise runs
        # it; a family whose stage reads no state ignores it
        denoise = {s: median_ms(lambda: runner.action_chunks(
            view, n_prefix, noise, s, state=state,
            num_images=len(images), prompt_ids=prompt), repeats)
                   for s in sorted(set(denoise_steps))}
    finally:
        kv.free(seq)
    return prefill, denoise


def stage_costs(engine: Engine, batches: tuple[int, ...] = (1, 4, 16, 30), repeats: int = 7,
                context: int = 100) -> dict[str, float]:
    """Median ms of each stage on this engine's weights and pool."""
    ec = engine.config
    kv, runner = engine.kv, engine.runner
    prefill, denoise = action_path_ms(engine, [ec.denoise_steps], repeats)
    out = {"prefix_tokens": float(engine.prefix_tokens(*_frame_prefix(engine))),
           "prefill_ms": prefill, "denoise_ms": denoise[ec.denoise_steps]}
    seq = 10_000_000
    seqs = []
    for b in range(max(batches)):
        kv.create(seq + 1 + b)
        got = kv.append(seq + 1 + b, [], reserve=context + 2, cacheable=False)
        if got is None:
            raise ValueError("KV pool too small for the decode micro-benchmark")
        seqs.append(SeqView(got.block_ids, context, state_slot=got.state_slot))
    decode, _ = decode_step_ms(runner, seqs, batches, steps=1, repeats=repeats)
    out.update({f"decode_b{b}_ms": ms for b, ms in decode.items()})
    for b in range(max(batches)):
        kv.free(seq + 1 + b)
    return out


def _frame_prefix(engine: Engine):
    obs = SyntheticStream(engine.model_config, seed=0).frame(0)
    return obs.valid_images(), engine.intake.action_prompt(obs, engine.config)


def kv_replay(engine: Engine, frames: int = 20, repeats: int = 5) -> dict[str, float]:
    """Run `frames` engine frames (one new request each) recording every KVManager call, then
    replay the calls back to back. Microseconds per frame: in-frame (the calls timed where the
    engine made them) and replayed (median of `repeats` replays from the same start state)."""
    stream = SyntheticStream(engine.model_config, seed=engine.config.seed)
    frame_ms = []
    with KVCallRecorder(engine.kv).attach(engine) as rec:
        for _ in range(frames):
            engine.ask("what happened?", max_new_tokens=engine.config.max_decode_steps)
            frame_ms.append(engine.step(stream.frame(engine.frame)).frame_ms)
    return {"frames": float(frames), "calls_per_frame": len(rec.calls) / frames,
            "frame_ms": statistics.mean(frame_ms), "in_frame_us": rec.busy_s / frames * 1e6,
            "replayed_us": rec.replay_s(repeats) / frames * 1e6}


def linear_layouts(width: int, out: int, tokens: tuple[int, ...] = (1, 30), repeats: int = 20,
                   dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """Median ms of one projection [tokens, width] -> [tokens, out] as F.linear with an
    [out, in] weight (nn.Linear, layout "standard") and as x @ w with an [in, out] copy
    ("transposed"), for each token count."""
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(out, width, generator=gen, dtype=dtype)
    w_t = w.t().contiguous()
    res: dict[str, float] = {}
    for m in tokens:
        x = torch.randn(m, width, generator=gen, dtype=dtype)
        res[f"standard_m{m}_ms"] = median_ms(lambda: torch.nn.functional.linear(x, w), repeats)
        res[f"transposed_m{m}_ms"] = median_ms(lambda: x @ w_t, repeats)
    return res
