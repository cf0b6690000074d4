"""Stage-cost micro-benchmarks on the engine's own runner: prefill, denoise, and one batched
decode step at several batch sizes. `python -m oxygen_ros.bench.profile --preset balanced`.

`--linear`: the widest projection as F.linear ([out, in] weight) and as x @ w ([in, out] copy),
at 1 and 30 tokens (EngineConfig.linear_layout).

`--kv`: the KV manager's cost inside real frames (oxygen mode, k=1, one request per frame, so
the batch reaches N) beside the cost of replaying exactly the same calls from the same state
back to back, i.e. with the interpreter's data hot in the CPU caches instead of evicted by the
model's kernels between calls."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence

import torch

from ..engine.config import EngineConfig, load_model_config, noise_rows
from ..engine.core.engine import Engine
from ..engine.core.synthetic import SyntheticStream
from ..engine.core.frame_ops import pad_state
from ..engine.runner.model_runner import ModelRunner, SeqView
from .args import add_bench_args
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m oxygen_ros.bench.profile", description=__doc__)
    # --S, --device, --dtype (and --N below) from their engine knobs; --preset, --threads:
    # bench/args.py
    add_bench_args(p, ("denoise_steps", "device", "dtype"), preset="tiny", threads=2, S=10)
    p.add_argument("--model-config", default=None)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--kv", action="store_true",
                   help="KV manager cost in real frames vs the same calls replayed back to back")
    add_bench_args(p, ("max_decode_steps",), N=30)  # --kv: tokens per request (= the batch)
    p.add_argument("--frames", type=int, default=20, help="--kv: measured frames")
    p.add_argument("--linear", action="store_true",
                   help="the VLM's widest projection (fused gate/up) in both linear layouts")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    mc = load_model_config(args.preset, args.model_config)
    if args.linear:
        r = linear_layouts(mc.vlm.width, 2 * mc.vlm.mlp_dim, repeats=max(args.repeats, 20))
        for m in (1, 30):
            r[f"standard_over_transposed_m{m}"] = r[f"standard_m{m}_ms"] / r[f"transposed_m{m}_ms"]
        print(json.dumps({"width": mc.vlm.width, "out": 2 * mc.vlm.mlp_dim,
                          **{k: round(v, 4) for k, v in r.items()}}))
        return 0
    if args.kv:
        engine = Engine(mc, EngineConfig(mode="oxygen", decode_steps_per_frame=1,
                                         max_decode_steps=args.N, denoise_steps=args.S,
                                         max_active_requests=args.N + 2, device=args.device,
                                         dtype=args.dtype))
        engine.warmup()
        stream = SyntheticStream(mc, seed=0)
        for _ in range(args.N + 1):  # until the batch is full
            engine.ask("what happened?", max_new_tokens=args.N)
            engine.step(stream.frame(engine.frame))
        r = kv_replay(engine, frames=args.frames, repeats=args.repeats)
        r["in_frame_share"] = r["in_frame_us"] / 1e3 / r["frame_ms"]
        r["replayed_share"] = r["replayed_us"] / 1e3 / r["frame_ms"]
        r["in_frame_over_replayed"] = r["in_frame_us"] / r["replayed_us"]
        # 4 significant digits, not 4 decimals: a share of a slow frame can be below 5e-5
        print(json.dumps({k: float(f"{v:.4g}") for k, v in r.items()}))
        return 0
    engine = Engine(mc, EngineConfig(denoise_steps=args.S, max_active_requests=32,
                                     device=args.device, dtype=args.dtype))
    costs = stage_costs(engine, repeats=args.repeats)
    costs["decode_b16_over_b1"] = costs["decode_b16_ms"] / costs["decode_b1_ms"]
    costs["decode_b30_over_b1"] = costs["decode_b30_ms"] / costs["decode_b1_ms"]
    print(json.dumps({k: round(v, 3) for k, v in costs.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
