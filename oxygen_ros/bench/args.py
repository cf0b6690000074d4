"""The arguments benchmarks share, from one place: each engine knob's flag as its Knob declares
it (engine/config/knobs.py, through engine_args.add_knob_args: name, type, choices, help, range), with
the benchmark's own default where it differs, plus --preset and --threads."""
from __future__ import annotations

import argparse
from typing import Any, Iterable, Sequence

from ..engine.config.presets import PRESETS
from ..cli.engine_args import add_knob_args


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
