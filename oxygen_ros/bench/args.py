"""The arguments benchmarks share, from one place: each engine knob's flag as its Knob declares
it (engine/config/knobs.py: name, type, choices, help, range; add_knob_args, which oxygen-demo and
oxygen-replay use too through cli/engine_args.py), with the benchmark's own default where it
differs, plus --preset and --threads."""
from __future__ import annotations

import argparse
from typing import Any, Iterable, Sequence

from ..engine.config import KNOBS
from ..engine.config.knobs import Knob, range_text
from ..engine.config.presets import PRESETS


def add_bench_args(p: argparse.ArgumentParser, knobs: Iterable[str] = (),
                   preset: str | None = None, presets: Sequence[str] | None = None,
                   threads: int | None = None, **defaults: Any) -> None:
    """Flags for the engine knobs `knobs` (EngineConfig field names) with `defaults` (by flag
    destination: S=4, device="cuda") overriding the knob's; --preset with `preset` as default
    (choices: `presets`, else every preset) when given; --threads when given."""
    add_knob_args(p, knobs)
    if preset is not None:
        p.add_argument("--preset", default=preset, choices=tuple(presets or PRESETS),
                       help="model preset (default: %(default)s)")
    if threads is not None:
        p.add_argument("--threads", type=int, default=threads,
                       help="torch CPU threads (default: %(default)s)")
    known = {a.dest for a in p._actions}
    unknown = sorted(set(defaults) - known)
    if unknown:
        raise ValueError(f"defaults for arguments this benchmark does not have: {unknown}")
    p.set_defaults(**defaults)


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
