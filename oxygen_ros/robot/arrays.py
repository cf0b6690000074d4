"""Whole-array checks for the control tick's small vectors (a robot's few dozen joints).

`ndarray.all()` goes through numpy's generic reduction, ~1.5 us on 30 values; counting the
True values is ~0.5 us. The tick makes about ten such checks 200-500 times a second on the
thread whose interpreter-lock time the model's thread waits for (docs/node.md), so they are
written once here. Both are exact: no value is summed or rounded.
"""
from __future__ import annotations

import numpy as np


def all_true(mask: np.ndarray) -> bool:
    """Whether every element of a boolean array is True (True for an empty one, as .all())."""
    return np.count_nonzero(mask) == mask.size


def all_finite(values: np.ndarray) -> bool:
    """Whether every element is finite (no NaN, no inf)."""
    return np.count_nonzero(np.isfinite(values)) == np.size(values)
