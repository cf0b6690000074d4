"""The last check of a command before it is published (the control loop's guard). Pure numpy.

It does not trust the shaper: whatever state the shaper is in, a command that is not finite,
outside the joint limits or a step beyond the velocity limit for the elapsed time is refused
here, and the control loop sends the last good command again instead.
"""
from __future__ import annotations

import numpy as np

from .arrays import all_true

GUARD_TOL = 1e-9  # slack for float rounding of position + step (rad)


def command_problem(values: np.ndarray, previous: np.ndarray | None, elapsed: float,
                    lower: np.ndarray | None, upper: np.ndarray | None,
                    velocity: np.ndarray | None) -> tuple[int, str] | None:
    """The last check before a command is sent: None when `values` may go out; else (joint, what
    is wrong). Refused: a non-finite value; a value outside [lower, upper], unless `previous` was
    outside on that joint too and this one is not further out (coming back in after a live limit
    change); a step from `previous` (the last command sent, or at the first command the measured
    pose) beyond velocity x elapsed (`velocity`: the shaper's first-order limit per command, inf
    where none; a velocity command's is its acceleration limit). Written so that a NaN anywhere
    (limits included) refuses."""
    v = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(v)
    if v.ndim != 1 or not all_true(finite):
        j = int(np.argmin(finite)) if v.ndim == 1 else -1
        return j, f"non-finite value {v[j] if j >= 0 else v!r}"
    prev = None if previous is None else np.asarray(previous, dtype=np.float64)
    for bound, sign, name in ((lower, -1.0, "lower"), (upper, 1.0, "upper")):
        if bound is None:
            continue
        # every value within the bound (a NaN bound compares False): nothing to explain. The
        # common case, checked in one comparison (this runs on every control tick)
        if all_true(v >= bound if sign < 0 else v <= bound):
            continue
        out = sign * (v - bound)  # > 0: beyond this bound
        ok = out <= 0.0
        if prev is not None:
            ok |= out <= sign * (prev - bound) + GUARD_TOL  # not further out than before
        if not ok.all():
            j = int(np.argmin(ok))
            return j, f"{v[j]:.4f} beyond the {name} joint limit {bound[j]:g}"
    if velocity is not None and prev is not None:
        step = np.abs(v - prev)
        elapsed = max(float(elapsed), 0.0)
        if elapsed > 0.0:  # inf x elapsed is inf: no inf x 0 to keep out (the usual tick)
            allowed = velocity * elapsed
        else:
            with np.errstate(invalid="ignore"):  # inf x 0: a command this limit does not bound
                allowed = np.where(np.isinf(velocity), np.inf, velocity * elapsed)
        allowed = allowed + GUARD_TOL * (1.0 + np.abs(v))
        ok = step <= allowed
        if not all_true(ok):
            j = int(np.argmin(ok))
            return j, (f"a step of {step[j]:.4f} rad in {elapsed * 1e3:.1f} ms "
                       f"(velocity limit {velocity[j]:g} rad/s allows {allowed[j]:.4f})")
    return None
