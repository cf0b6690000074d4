"""Run one mode at one setting on a shared model, measure it, and return a plain-data row."""
from __future__ import annotations

import gc
import json
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import torch

from ..engine.config import EngineConfig, ModelConfig
from ..engine.core.engine import Engine, FrameOutput
from ..engine.core.request import RequestKind
from ..engine.core.synthetic import SyntheticStream
from ..engine.runner.model_runner import SeqView
from .frame_profile import profile_frame
from .kv_recorder import KVCallRecorder
from .metrics import RunSummary, StageCosts, predict_run_ms, summarize, warmup_frames
from .power import PowerMeter
from .profile import action_path_ms, decode_step_ms
from .registry import child_command
from .timing import peak_rss_bytes, rss_bytes

PROMPT = "Memory: what happened?\n"


@dataclass
class RunSpec:
    preset: str
    mode: str
    k: int
    N: int
    S: int
    frames: int  # measured frames
    warmup: int  # frames before measuring
    arrivals: list[int] = field(default_factory=list)  # requests asked before each frame
    group: str = "grid"  # grid | pattern:<name> | fluctuating
    keep_trace: bool = False
    profile: bool = False  # one extra frame under torch.profiler after the measured ones

    @property
    def total(self) -> int:
        return self.warmup + self.frames


def default_warmup(mode: str, k: int, n: int) -> int:
    """Oxygen ramps its batch up over ceil(N/k)+1 frames (metrics.warmup_frames); the other modes
    finish every request inside its frame, so one frame warms the allocator and kernels."""
    return warmup_frames(k, n) if mode == "oxygen" else 1


@dataclass
class Context:
    model_config: ModelConfig
    model: torch.nn.Module
    tokenizer: Any
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 0
    max_active: int = 32
    attention_backend: str = "auto"
    power: PowerMeter | None = None
    compile_denoise: bool = False
    linear_layout: str = "standard"
    cuda_graphs: bool = False

    def engine(self, mode: str, k: int, n: int, s: int) -> Engine:
        ec = EngineConfig(mode=mode, decode_steps_per_frame=k, max_decode_steps=n, denoise_steps=s,
                          max_active_requests=self.max_active, memory_every_n_frames=0,
                          memory_prompt=PROMPT, seed=self.seed, device=self.device,
                          dtype=self.dtype, attention_backend=self.attention_backend,
                          compile_denoise=self.compile_denoise, linear_layout=self.linear_layout,
                          cuda_graphs=self.cuda_graphs)
        return Engine(self.model_config, ec, model=self.model, tokenizer=self.tokenizer)


def _cuda(device: str) -> bool:
    return device.startswith("cuda") and torch.cuda.is_available()


def run(ctx: Context, spec: RunSpec, on_frame: Callable[[], None] | None = None,
        costs: StageCosts | None = None) -> tuple[dict, RunSummary]:
    """costs: stage costs micro-benchmarked apart from this run (stage_micro); with them the row
    carries the frame latency they predict for this run's frames (predicted_ms, predicted_error)."""
    eng = ctx.engine(spec.mode, spec.k, spec.N, spec.S)
    stream = SyntheticStream(ctx.model_config, seed=ctx.seed)
    arrivals = spec.arrivals or [1] * spec.total
    if len(arrivals) < spec.total:
        raise ValueError("arrivals shorter than warmup + frames")
    cuda = _cuda(ctx.device)
    outs: list[FrameOutput] = []
    rss: list[int] = []
    energy = None
    # oxygen runs: record the KV manager's calls over the measured frames, to replay them back to
    # back afterwards (its cost with hot caches beside its cost inside the frames)
    recorder = KVCallRecorder(eng.kv) if spec.mode == "oxygen" else None
    for i in range(spec.total):
        if i == spec.warmup:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            if ctx.power is not None:
                ctx.power.start()
            if recorder is not None:
                recorder.attach(eng)
        for _ in range(arrivals[i]):
            eng.ask(PROMPT, priority=0, kind=RequestKind.MEMORY, max_new_tokens=spec.N)
        outs.append(eng.step(stream.frame(i)))
        rss.append(rss_bytes())
        if on_frame:
            on_frame()
    if recorder is not None:
        recorder.detach()
    if cuda:
        torch.cuda.synchronize()
    if ctx.power is not None:
        energy = ctx.power.stop()
    measured = outs[spec.warmup:]
    summ = summarize(measured, [o.decode_steps for o in measured], [o.admitted for o in measured])
    d = summ.as_dict()
    r = summ.requests_per_frame
    p_each = summ.stage_ms["vision_prefill"] / ((1 + r) if spec.mode in ("isolated", "parallel") else 1)
    predicted = predict_run_ms(costs, measured) if costs is not None else None
    tokens = sum(o.tokens_this_frame for o in measured)
    row: dict[str, Any] = {
        "preset": spec.preset, "group": spec.group, "mode": spec.mode, "k": spec.k, "N": spec.N,
        "S": spec.S, "warmup": spec.warmup, **d,
        "kv_ms": summ.stage_ms["kv"], "kv_share": summ.stage_ms["kv"] / summ.frame_ms_mean,
        "sched_ms": summ.stage_ms["sched"], "sched_share": summ.stage_ms["sched"] / summ.frame_ms_mean,
        # KVManager calls alone (stage 'kv' also holds the CoW copies and prefix-cache keys)
        "kv_calls_ms": recorder.busy_s * 1e3 / len(measured) if recorder else None,
        "kv_replayed_ms": recorder.replay_s() * 1e3 / len(measured) if recorder else None,
        "max_batch": max(o.batch_size for o in measured),
        # the hidden states the prefill keeps for StarVLA heads (buffers allocated once; 0 else)
        "hidden_bytes": eng.runner.hidden_bytes,
        # from the separately micro-benchmarked stage costs and this run's schedule only
        "predicted_ms": predicted,
        "predicted_error": (abs(summ.frame_ms_mean - predicted) / predicted
                            if predicted else None),
        "prefill_ms_each": p_each,
        "glue_ms": summ.frame_ms_mean - sum(summ.stage_ms.values()),
        "rss_peak_bytes": max(rss[spec.warmup:]), "rss_maxrss_bytes": peak_rss_bytes(),
        "cuda_peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "energy_j": energy,
        "energy_j_per_request": (energy / (tokens / spec.N)) if energy is not None and tokens else None,
        "requests_asked": sum(arrivals[spec.warmup:spec.total]),
        "profile": None,
    }
    if spec.keep_trace:
        row["trace"] = {
            "arrivals": arrivals[:spec.total], "frame_ms": [o.frame_ms for o in outs],
            "batch": [o.batch_size for o in outs], "kv_bytes": [o.kv.bytes_used for o in outs],
            "kv_blocks": [o.kv.blocks_used for o in outs], "rss": rss,
            "tokens": [o.tokens_this_frame for o in outs], "running": [o.num_running for o in outs],
            "waiting": [o.num_waiting for o in outs],
        }
    if spec.profile:  # after everything is read: the profiler's overhead is in no number above
        eng.ask(PROMPT, priority=0, kind=RequestKind.MEMORY, max_new_tokens=spec.N)
        frame = stream.frame(spec.total)
        row["profile"] = profile_frame(lambda: eng.step(frame), cuda)
    del eng, outs
    gc.collect()
    return row, summ


def stage_micro(ctx: Context, denoise_steps=(10,), batches=(1, 4, 8, 16, 30), steps: int = 8,
                repeats: int = 5, budget_s: float = 5.0, max_repeats: int = 25) -> dict:
    """Stage costs micro-benchmarked apart from every run, to predict the runs' frame latency:
    one observation prefill and one S-step denoise for each S (bench.profile.action_path_ms), and
    ModelRunner.decode at several batch sizes on a realistic context (the frame prefix plus a
    prompt, each sequence on its own blocks; bench.profile.decode_step_ms: interleaved rounds,
    median per size). Returns plain data: ms per batched decode step by batch size, prefill_ms,
    denoise_ms by S."""
    eng = ctx.engine("oxygen", 1, 30, max(denoise_steps))
    prefill, denoise = action_path_ms(eng, denoise_steps, repeats=max(repeats, 5))
    runner, bs = eng.runner, eng.config.block_size
    ctx_len = ctx.model_config.max_prefix_tokens + 8
    nb = -(-(ctx_len + steps) // bs)
    bmax = min(max(batches), runner.num_blocks // nb)
    # a recurrent-state pool: each sequence its own slot (their content is never read back)
    slots = runner.states.num_slots if runner.states is not None else 0
    if slots:
        bmax = min(bmax, slots)
    seqs = [SeqView(list(range(i * nb, (i + 1) * nb)), ctx_len, state_slot=i if slots else None)
            for i in range(bmax)]
    medians, rounds = decode_step_ms(runner, seqs, [min(b, bmax) for b in batches], steps=steps,
                                     repeats=repeats, budget_s=budget_s, max_repeats=max_repeats)
    out = {str(b): float(ms) for b, ms in medians.items()}
    del eng
    gc.collect()
    return {"context_tokens": ctx_len, "steps": steps, "rounds": rounds, "ms_per_step": out,
            "ratio_30_over_1": out[str(min(30, bmax))] / out["1"], "prefill_ms": prefill,
            "denoise_ms": {str(s): ms for s, ms in denoise.items()}}


def micro_costs(micro: dict, s: int) -> StageCosts | None:
    """The StageCosts of a stage_micro result for S denoise steps (None if S was not measured)."""
    if "prefill_ms" not in micro or str(s) not in micro.get("denoise_ms", {}):
        return None
    return StageCosts(micro["prefill_ms"], micro["denoise_ms"][str(s)],
                      {int(b): ms for b, ms in micro["ms_per_step"].items()})


def probe_in_subprocess(spec: RunSpec, preset: str, model_config: str | None, threads: int,
                        device: str, dtype: str, seed: int, attention_backend: str,
                        timeout: float = 1200, compile_denoise: bool = False,
                        linear_layout: str = "standard", cuda_graphs: bool = False) -> dict:
    """Run one spec in a fresh interpreter (its own model build) so that its peak RSS is its own."""
    payload = {"spec": asdict(spec), "preset": preset, "model_config": model_config,
               "threads": threads, "device": device, "dtype": dtype, "seed": seed,
               "attention_backend": attention_backend, "compile_denoise": compile_denoise,
               "linear_layout": linear_layout, "cuda_graphs": cuda_graphs}
    proc = subprocess.run(child_command("oxygen_ros.bench.probe:child", json.dumps(payload)),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"memory probe failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
