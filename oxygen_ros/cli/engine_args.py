"""The engine flags that oxygen-demo and oxygen-replay share (model, checkpoint, k/N/S, mode,
memory, device ...) and the EngineConfig they describe: one definition, so the two tools take
the same settings under the same names. The engine knobs' flags (name, default, choices, help,
range) come from their Knob (engine/config/engine_config.py ENGINE_KNOBS); oxygen-bench takes some of them
through add_knob_args."""
from __future__ import annotations

import argparse
from typing import Iterable

from ..engine import ENGINE_KNOBS, KNOBS, PRESETS, EngineConfig, Knob, range_text
from ..robot.build import ModelSource

FLAG_KNOBS: tuple[Knob, ...] = tuple(k for k in ENGINE_KNOBS if k.flag)


def dest(knob: Knob) -> str:
    """The argparse attribute of a knob's flag (--max-active -> max_active)."""
    return knob.flag.lstrip("-").replace("-", "_")


def _help(knob: Knob) -> str:
    sym = f"{knob.symbol}: " if knob.symbol else ""
    unit = f" [{knob.unit}]" if knob.unit else ""
    rng = f"; {range_text(knob.range)}" if knob.range else ""
    return f"{sym}{knob.description}{unit}{rng}".replace("%", "%%") + " (default: %(default)r)"


def add_knob_args(p: argparse.ArgumentParser, fields: Iterable[str]) -> None:
    """A flag per engine knob in `fields`, as its Knob declares it."""
    for field in fields:
        k = KNOBS[field]
        if k.type is bool:
            p.add_argument(k.flag, dest=dest(k), action="store_true", default=k.default,
                           help=_help(k))
        else:
            p.add_argument(k.flag, dest=dest(k), type=k.type, default=k.default,
                           choices=k.choices, help=_help(k))


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
