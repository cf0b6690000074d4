"""Run summaries, the ratio prediction (demo) and each run's frame latency predicted from stage
costs measured apart from it by micro-benchmarks (bench)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..engine.core.engine import FrameOutput


@dataclass(frozen=True)
class RunSummary:
    mode: str
    frames: int
    action_hz: float
    tokens_per_s: float
    frame_ms_mean: float
    frame_ms_p50: float
    frame_ms_p99: float
    mean_batch: float
    stage_ms: dict[str, float]  # mean per frame
    decode_steps_per_frame: float  # mean batched decode steps actually run
    decode_step_ms: float  # mean cost of one batched decode step in this run
    requests_per_frame: float
    kv_peak_bytes: int
    kv_peak_blocks: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def summarize(outputs: Sequence[FrameOutput], decode_steps: Sequence[int],
              admitted: Sequence[int]) -> RunSummary:
    """outputs: the measured frames; decode_steps[i] / admitted[i]: batched decode steps run and
    requests admitted (suffix-prefilled) in frame i."""
    if not outputs:
        raise ValueError("no frames to summarize")
    ms = np.array([o.frame_ms for o in outputs])
    total_s = ms.sum() / 1e3
    tokens = sum(o.tokens_this_frame for o in outputs)
    stages = {k: float(np.mean([o.timings_ms[k] for o in outputs])) for k in outputs[0].timings_ms}
    steps = float(np.sum(decode_steps))
    n_adm = float(np.sum(admitted))
    return RunSummary(
        mode=outputs[0].mode, frames=len(outputs), action_hz=len(outputs) / total_s,
        tokens_per_s=tokens / total_s, frame_ms_mean=float(ms.mean()),
        frame_ms_p50=float(np.percentile(ms, 50)), frame_ms_p99=float(np.percentile(ms, 99)),
        mean_batch=float(np.mean([o.batch_size for o in outputs])), stage_ms=stages,
        decode_steps_per_frame=steps / len(outputs),
        decode_step_ms=(stages["decode"] * len(outputs) / steps) if steps else 0.0,
        requests_per_frame=n_adm / len(outputs),
        kv_peak_bytes=max(o.kv.peak_bytes for o in outputs),
        kv_peak_blocks=max(o.kv.peak_blocks for o in outputs),
    )


def predicted_frame_ms(mode: str, prefill_ms: float, denoise_ms: float, decode_step_ms: float,
                       decode_steps: float, requests_per_frame: float, n: int) -> float:
    """Frame latency the stage costs alone predict (no scheduler, KV or Python glue).

    A request's prompt suffix is processed in its first decode step, so a request of N tokens
    costs N decode steps.
    isolated: P + D + r * (P + N * d1)   — each request prefills again, decodes alone
    shared/oxygen: P + D + steps * d(B)  — one prefill; batched decode steps
    """
    if mode in ("isolated", "parallel"):
        return prefill_ms + denoise_ms + requests_per_frame * (prefill_ms + n * decode_step_ms)
    return prefill_ms + denoise_ms + decode_steps * decode_step_ms


@dataclass(frozen=True)
class StageCosts:
    """Stage costs measured by micro-benchmarks outside any frame (bench.profile): one
    observation prefill, one S-step denoise, one batched decode step by batch size."""

    prefill_ms: float
    denoise_ms: float
    decode_ms: dict[int, float]  # batch size -> ms per batched decode step

    def __post_init__(self) -> None:
        if not self.decode_ms:
            raise ValueError("decode_ms needs at least one batch size")

    def decode_step_ms(self, batch: float) -> float:
        """Piecewise-linear in batch between the measured sizes; beyond them, the nearest
        segment's line (flat when only one size was measured)."""
        xs = sorted(self.decode_ms)
        ys = [self.decode_ms[x] for x in xs]
        if len(xs) == 1:
            return ys[0]
        i = min(max(int(np.searchsorted(xs, batch)), 1), len(xs) - 1)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return max(y0 + (y1 - y0) * (batch - x0) / (x1 - x0), 0.0)


PREFILL_PER_REQUEST = ("isolated", "parallel")  # each request prefills the observation again


def predict_run_ms(costs: StageCosts, outputs: Sequence[FrameOutput]) -> float:
    """Mean frame latency the micro-benchmarked stage costs predict for these frames, from what
    the scheduler did in each (requests admitted, batched decode steps, batch size) and never
    from the frames' own timings:

        frame = P * (1 + admitted if isolated/parallel else 1) + D + decode_steps * d(batch)

    A request's prompt suffix rides in its first decode step, so it adds no step of its own."""
    if not outputs:
        raise ValueError("no frames to predict")
    total = 0.0
    for o in outputs:
        prefills = 1 + o.admitted if o.mode in PREFILL_PER_REQUEST else 1
        decode = o.decode_steps * costs.decode_step_ms(o.batch_size) if o.decode_steps else 0.0
        total += prefills * costs.prefill_ms + costs.denoise_ms + decode
    return total / len(outputs)


def ratio_check(run: RunSummary, iso: RunSummary, n: int) -> dict[str, float]:
    """Measured action-frequency ratio of `run` over isolated, beside the ratio predicted from
    the stage costs the same two runs measured: prefill P and denoise D (both runs), a batch-1
    decode step d1 (isolated), a decode step at the run's mean batch d(B)."""
    prefill = (run.stage_ms["vision_prefill"]
               + iso.stage_ms["vision_prefill"] / (1.0 + iso.requests_per_frame)) / 2
    denoise = (run.stage_ms["denoise"] + iso.stage_ms["denoise"]) / 2
    t_iso = predicted_frame_ms("isolated", prefill, denoise, iso.decode_step_ms, 0.0,
                               iso.requests_per_frame, n)
    t_run = predicted_frame_ms(run.mode, prefill, denoise, run.decode_step_ms,
                               run.decode_steps_per_frame, run.requests_per_frame, n)
    measured = run.action_hz / iso.action_hz
    predicted = t_iso / t_run
    return {
        "ratio_measured": measured,
        "ratio_predicted": predicted,
        "ratio_error": abs(measured - predicted) / predicted,
        "predicted_frame_ms": t_run,
        "predicted_isolated_frame_ms": t_iso,
        "measured_frame_ms": run.frame_ms_mean,
        "measured_isolated_frame_ms": iso.frame_ms_mean,
        # the paper's fig. 6 oracle: every decode step as cheap as a batch-1 step
        "oracle_frame_ms": prefill + denoise + iso.decode_step_ms * run.decode_steps_per_frame,
    }


def warmup_frames(k: int, n: int) -> int:
    """Frames until the active batch reaches its steady state."""
    return math.ceil(n / k) + 1
