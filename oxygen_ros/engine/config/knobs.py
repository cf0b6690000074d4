"""What an engine knob is: its EngineConfig field, type, default, range or choices, unit,
meaning, whether a running engine takes a change (Engine.update_config), and the names the
ROS node and the command-line tools give it.

The knobs themselves are one table, ENGINE_KNOBS in engine/config.py beside the lists they
choose from; EngineConfig takes its defaults and its range checks from it, the node's
parameters (node/params.py), the oxygen-demo / oxygen-replay / oxygen-bench flags
(cli/engine_args.py), config/oxygen.yaml and the docs' parameter table are generated from it.
Pure Python: the node imports it without torch.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

Range = tuple[float, float | None]  # inclusive; None: no upper bound

_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


@dataclass(frozen=True)
class Knob:
    field: str  # the EngineConfig field
    type: type  # bool | int | float | str
    default: Any
    description: str
    range: Range | None = None  # what EngineConfig accepts
    choices: tuple[Any, ...] | None = None
    unit: str = ""
    live: bool = True  # False: fixed once the engine is built (Engine.validate_changes refuses)
    symbol: str = ""  # the paper's letter (k, N, S, M), named in messages
    # Text the node refuses when empty where it enters. The engine checks texts by their
    # tokens instead (Engine.validate_changes), so EngineConfig does not.
    nonempty: bool = False
    param: str | None = None  # the node's parameter name; None: not a node parameter
    # The node's narrower range (the descriptor's slider): what a robot is run with; None: range
    param_range: Range | None = None
    flag: str | None = None  # oxygen-demo / oxygen-replay / oxygen-bench flag; None: none

    def __post_init__(self) -> None:
        if self.type not in _TYPE_WORDS:
            raise ValueError(f"knob {self.field}: type must be bool, int, float or str")
        if self.range is not None and self.choices is not None:
            raise ValueError(f"knob {self.field}: a range or choices, not both")
        reason = self.reason(self.default)
        if reason:
            raise ValueError(f"knob {self.field}: default refused: {reason}")

    @property
    def label(self) -> str:
        return f"{self.field} ({self.symbol})" if self.symbol else self.field

    def reason(self, value: Any) -> str | None:
        """Why EngineConfig refuses `value` for this knob (type, range, choices), else None."""
        if not _is(self.type, value):
            return f"{self.label} must be {_TYPE_WORDS[self.type]}, got {value!r}"
        if self.range is not None and not in_range(value, self.range):
            unit = f" {self.unit}" if self.unit else ""
            return f"{self.label} must be {range_text(self.range)}{unit}, got {value!r}"
        if self.choices is not None and value not in self.choices:
            return f"{self.label} must be one of {self.choices}, got {value!r}"
        return None


def _is(kind: type, value: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    return isinstance(value, kind)


def in_range(value: float, r: Range) -> bool:
    lo, hi = r
    return lo <= value and (hi is None or value <= hi)  # NaN: False


def num_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def range_text(r: Range) -> str:
    lo, hi = r
    return f">= {num_text(lo)}" if hi is None else f"in [{num_text(lo)}, {num_text(hi)}]"


def knob_table(knobs: tuple[Knob, ...]) -> dict[str, Knob]:
    """field -> Knob, refusing a field, parameter or flag declared twice."""
    out: dict[str, Knob] = {}
    for attr in ("field", "param", "flag"):
        names = [getattr(k, attr) for k in knobs if getattr(k, attr) is not None]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"knob {attr}s declared twice: {twice}")
    for k in knobs:
        out[k.field] = k
    return out
