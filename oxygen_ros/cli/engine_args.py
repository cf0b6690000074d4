"""The engine flags that oxygen-demo and oxygen-replay share (model, checkpoint, k/N/S, mode,
memory, device ...) and the EngineConfig they describe: one definition, so the two tools take
the same settings under the same names. The engine knobs' flags (name, default, choices, help,
range) come from their Knob (engine/config/engine_config.py ENGINE_KNOBS) through
bench/args.py add_knob_args, which oxygen-bench and the benchmarks use too."""
from __future__ import annotations

import argparse
from ..bench.args import add_knob_args, dest
from ..engine import ENGINE_KNOBS, PRESETS, EngineConfig, Knob
from ..robot.build import ModelSource

FLAG_KNOBS: tuple[Knob, ...] = tuple(k for k in ENGINE_KNOBS if k.flag)


def add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="tiny", choices=tuple(PRESETS), help="model preset")
    p.add_argument("--model-config", default=None, help="JSON/YAML overriding preset fields")
    p.add_argument("--checkpoint", default=None, help="checkpoint folder to load: LeRobot or openpi pi0.5, or "
                   "Qwen3-VL + our action expert / StarVLA head files (docs/checkpoints.md)")
    p.add_argument("--tokenizer", default=None, help="the checkpoint's tokenizer: tokenizer.model / "
                   "tokenizer.json, a folder with one, or a repo id in the local HF cache (default: searched)")
    p.add_argument("--asset-id", default=None, help="openpi checkpoint: statistics of assets/<asset_id>/")
    p.add_argument("--lerobot-version", default="auto", help="LeRobot version whose pi0.5 conventions "
                   "the checkpoint follows (auto: what the folder shows; e.g. 0.4 for a v0.4.x fine-tune)")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    add_knob_args(p, (k.field for k in FLAG_KNOBS))


def check_engine_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Each knob flag against its Knob's range (a clear usage error, not a traceback later)."""
    from oxygen_ros.engine import check_version_param
    try:
        check_version_param(getattr(args, "lerobot_version", "auto"))
    except ValueError as err:
        p.error(f"--lerobot-version: {err}")
    for k in FLAG_KNOBS:
        if hasattr(args, dest(k)):
            reason = k.reason(getattr(args, dest(k)))
            if reason:
                p.error(f"{k.flag}: {reason}")


def engine_config(args: argparse.Namespace, mode: str | None = None) -> EngineConfig:
    values = {k.field: getattr(args, dest(k)) for k in FLAG_KNOBS}
    if mode:
        values["mode"] = mode
    return EngineConfig(**values)


def model_source(args: argparse.Namespace) -> ModelSource:
    """The model flags as robot/build.build_engine takes them (as the node's model.* parameters)."""
    return ModelSource(preset=args.preset, checkpoint=args.checkpoint or "",
                       tokenizer=args.tokenizer or "", asset_id=args.asset_id or "",
                       model_config=args.model_config or "", threads=args.threads,
                       lerobot_version=args.lerobot_version)
