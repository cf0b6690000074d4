"""The engine flags that oxygen-demo and oxygen-replay share (model, checkpoint, k/N/S, mode,
memory, device ...) and the EngineConfig they describe: one definition, so the two tools take
the same settings under the same names."""
from __future__ import annotations

import argparse

from .engine.config import (IMAGE_RESIZE, LINEAR_LAYOUTS, MODES, RTC_JACOBIANS, RTC_METHODS,
                            EngineConfig)
from .robot.build import ModelSource


def add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="tiny", help="model preset: tiny, small, balanced, pi05, xr0-tiny, xr0")
    p.add_argument("--model-config", default=None, help="JSON/YAML overriding preset fields")
    p.add_argument("--checkpoint", default=None, help="LeRobot or openpi pi0.5 checkpoint folder to load")
    p.add_argument("--tokenizer", default=None, help="the checkpoint's tokenizer: tokenizer.model / "
                   "tokenizer.json, a folder with one, or a repo id in the local HF cache (default: searched)")
    p.add_argument("--asset-id", default=None, help="openpi checkpoint: statistics of assets/<asset_id>/")
    p.add_argument("--mode", default="oxygen", choices=MODES)
    p.add_argument("--k", type=int, default=4, help="decode steps per frame")
    p.add_argument("--N", type=int, default=12, help="max decode steps per request")
    p.add_argument("--S", type=int, default=10, help="denoising steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--memory-every", type=int, default=1, help="a memory request every M frames (0: none)")
    p.add_argument("--memory-prompt", default="Memory: what happened?\n")
    p.add_argument("--max-active", type=int, default=32, help="max active language requests")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the action expert's denoising step (first frame slower)")
    p.add_argument("--linear-layout", default="standard", choices=LINEAR_LAYOUTS,
                   help="decoder projections for F.linear (standard) or x @ w (transposed)")
    p.add_argument("--image-resize", default="pad", choices=IMAGE_RESIZE,
                   help="camera image -> the model's square input: pad (keep the aspect ratio, "
                   "black bars: as pi0.5 was trained) or stretch")
    # real-time chunking (applies to chunks requested with a previous chunk: oxygen-replay
    # --chunk-blend rtc; docs/rtc.md)
    p.add_argument("--rtc-method", default="guided", choices=RTC_METHODS)
    p.add_argument("--rtc-jacobian", default="identity", choices=RTC_JACOBIANS)
    p.add_argument("--rtc-max-guidance", type=float, default=10.0, help="beta (0 = unguided)")
    p.add_argument("--rtc-execution-horizon", type=int, default=0, help="0 = the whole prior")


def check_engine_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for name in ("k", "N", "S"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")


def engine_config(args: argparse.Namespace, mode: str | None = None) -> EngineConfig:
    return EngineConfig(mode=mode or args.mode, decode_steps_per_frame=args.k,
                        max_decode_steps=args.N, denoise_steps=args.S,
                        max_active_requests=args.max_active,
                        memory_every_n_frames=args.memory_every, memory_prompt=args.memory_prompt,
                        seed=args.seed, device=args.device, dtype=args.dtype,
                        compile_denoise=args.compile, linear_layout=args.linear_layout,
                        image_resize=args.image_resize,
                        rtc_method=args.rtc_method, rtc_jacobian=args.rtc_jacobian,
                        rtc_max_guidance=args.rtc_max_guidance,
                        rtc_execution_horizon=args.rtc_execution_horizon)


def model_source(args: argparse.Namespace) -> ModelSource:
    """The model flags as robot/build.build_engine takes them (as the node's model.* parameters)."""
    return ModelSource(preset=args.preset, checkpoint=args.checkpoint or "",
                       tokenizer=args.tokenizer or "", asset_id=args.asset_id or "",
                       model_config=args.model_config or "", threads=args.threads)
