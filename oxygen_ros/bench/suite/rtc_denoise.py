"""Cost and effect of real-time chunking in the engine: denoise ms unguided / identity / vjp (and
inpaint) per preset, and the seam error of each on a simulated chunk stream.

    source scripts/env.sh && oxygen-bench rtc-denoise --presets tiny small balanced \
        --frames 30 | tee benchmarks/results/rtc/denoise.txt

Per preset, one Engine (random weights, seed 0, S = 10, oxygen mode, memory off, 2 threads) per
setting runs the same --frames synthetic observations, the settings interleaved frame by frame. Frame f is an inference started `--every`
control steps after frame f-1 (50 Hz control), so with RTC its prior is the previous chunk's
plan from that step on (ActionPrior(actions=prev[every:], delay=--delay)); unguided frames get
no prior. Reported: the engine's denoise stage per frame (median, ms) and the seam error (mean
absolute difference of the new chunk's first 4 steps and the previous chunk's steps at the
same times, robot/seam.py, over all action dims), and the error at steps < d (weight 1) and
at d..3 (the ramp). The first 3 frames are warm-up and not timed.
The machine may be shared with other work: times are comparable only within one run.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch


def run(preset: str, settings: dict[str, dict], frames: int, every: int, delay: int) -> dict:
    """Every setting's engine steps frame f before any steps f + 1 (interleaved: a change of
    machine load hits all settings alike)."""
    from oxygen_ros.engine.config import PRESETS, EngineConfig
    from oxygen_ros.engine.core.engine import Engine
    from oxygen_ros.engine.model.rtc import ActionPrior
    from oxygen_ros.engine.core.synthetic import SyntheticStream

    mc = PRESETS[preset]
    stream = SyntheticStream(mc, seed=0)
    dt = 1.0 / 50.0
    state = {}
    for name, setting in settings.items():
        rtc = dict(setting)
        guided = rtc.pop("guided")
        state[name] = {"engine": Engine(mc, EngineConfig(memory_every_n_frames=0, seed=0, **rtc)),
                       "guided": guided, "prev": None, "ms": [], "seam": [], "inside": [],
                       "ramp": []}
    for f in range(frames):
        base = stream.frame(f)
        for st in state.values():
            prev = st["prev"]
            prior = (ActionPrior(prev[every:], delay)
                     if st["guided"] and prev is not None and prev.shape[0] > every else None)
            obs = type(base)(**{**base.__dict__, "stamp": f * every * dt, "prior": prior})
            out = st["engine"].step(obs)
            a = out.actions
            if f >= 3:
                st["ms"].append(out.timings_ms["denoise"])
            if prev is not None:
                n = min(4, a.shape[0], prev.shape[0] - every)
                err = np.abs(a[:n] - prev[every:every + n])
                st["seam"].append(err.mean())
                st["inside"].append(err[:delay].mean())
                st["ramp"].append(err[delay:n].mean())
            st["prev"] = a
    out = {}
    for name, st in state.items():
        assert np.all(np.isfinite(st["prev"]))
        out[name] = {"ms": float(np.median(st["ms"])), "seam": float(np.mean(st["seam"])),
                     "inside": float(np.mean(st["inside"])), "ramp": float(np.mean(st["ramp"]))}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["tiny", "small", "balanced"])
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--every", type=int, default=2, help="control steps between inferences")
    ap.add_argument("--delay", type=int, default=2, help="d given to the engine")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    settings = {
        "unguided": {"guided": False},
        "identity": {"guided": True, "rtc_jacobian": "identity"},
        "vjp": {"guided": True, "rtc_jacobian": "vjp"},
        "inpaint": {"guided": True, "rtc_method": "inpaint"},
    }
    print(f"S=10, {args.frames} frames, an inference every {args.every} control steps, d={args.delay}, "
          f"{args.threads} threads; load average {os.getloadavg()[0]:.2f} at start (shared machine)")
    print(f"{'preset':>9} {'setting':>9} {'denoise ms':>11} {'x unguided':>11} {'seam':>8} "
          f"{'seam i<d':>9} {'seam d..3':>10}")
    for preset in args.presets:
        t0 = time.perf_counter()
        res = run(preset, settings, args.frames, args.every, args.delay)
        base = res["unguided"]["ms"]
        for name, r in res.items():
            print(f"{preset:>9} {name:>9} {r['ms']:>11.2f} {r['ms'] / base:>11.2f} {r['seam']:>8.4f} "
                  f"{r['inside']:>9.4f} {r['ramp']:>10.4f}", flush=True)
        print(f"  ({preset}: {time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0
