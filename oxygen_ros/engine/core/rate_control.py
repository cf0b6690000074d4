"""Action-rate target: choose k (decode steps this frame) so the frame fits 1/target.

Beyond the paper, which fixes k. From the stage costs measured so far the controller predicts a
frame at batch B and k decode steps as

    T(k, B) = P + D + O + k * d(B)

P: the frame's prefills, D: denoise, O: everything else in the frame (KV, scheduling, detokenize,
glue), each a running estimate (EWMA); d(B): one batched decode step, a line a + b*B fitted by
exponentially weighted least squares over (batch, ms per step) samples, so that a cost measured at
one batch size still predicts another. It then takes the largest k in [k_min, k_max] with

    T(k, B) <= (1 - headroom) / target + credit

so that language advances as fast as the action rate allows. k is whole and one decode step can
be 10-20% of the period, so a fixed k would leave up to a step of every period unused and run the
actions that much faster than asked. The credit carries that rest over: after each frame it gains
(1 - headroom) / target minus the frame's measured time, held within one decode step either way
(error diffusion). k then alternates between the two whole values around the ideal fractional one,
the mean frame time settles at (1 - headroom) / target (achieved rate = target / (1 - headroom)),
and measured errors of the cost model are fed back too. The price: a single frame may run over
1/target by less than one decode step (as predicted; noise comes on top), which the next frames
pay back. The credit starts at zero and resets when the target changes or is infeasible.
`strict` choices use no credit: every frame is predicted to fit by itself, at the price of the
unused rest of the period.

When even k_min does not fit, the decision says so (feasible False) and k_min is run, so language
never starves. Pure Python, no torch; fixed-size state whatever the number of frames.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


class Ewma:
    """Exponentially weighted mean; None until the first sample."""

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self.value: float | None = None

    def add(self, x: float) -> None:
        self.value = x if self.value is None else self.value + self.alpha * (x - self.value)


class EwmaLine:
    """y ~ a + b*x by exponentially weighted least squares (recent samples weigh more).

    With too little spread in x to tell a slope (every recent frame at the same batch) the line is
    flat at the weighted mean, which is exact at that batch. The slope is clamped at >= 0: a
    bigger batch never predicts a cheaper step."""

    MIN_VAR = 0.25  # x variance (batch^2) below which no slope is fitted

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self._w = self._x = self._y = self._xx = self._xy = 0.0

    @property
    def empty(self) -> bool:
        return self._w == 0.0

    def add(self, x: float, y: float) -> None:
        keep, a = 1.0 - self.alpha, self.alpha
        self._w = keep * self._w + a
        self._x = keep * self._x + a * x
        self._y = keep * self._y + a * y
        self._xx = keep * self._xx + a * x * x
        self._xy = keep * self._xy + a * x * y

    def coefficients(self) -> tuple[float, float]:
        if self.empty:
            raise ValueError("no samples yet")
        mx, my = self._x / self._w, self._y / self._w
        var = self._xx / self._w - mx * mx
        if var < self.MIN_VAR:
            return my, 0.0
        slope = max(0.0, (self._xy / self._w - mx * my) / var)
        return my - slope * mx, slope

    def predict(self, x: float) -> float:
        a, b = self.coefficients()
        return max(a + b * x, 0.0)


@dataclass(frozen=True)
class RateDecision:
    """What the controller chose for one frame."""

    k: int
    feasible: bool  # the frame is predicted to fit 1/target at k (always True when off)
    predicted_ms: float | None  # T(k, B); None while the costs are still unknown
    budget_ms: float | None  # 1000 / target; None when off
    # one decode step's predicted cost at this batch when k was chosen from the costs: the frame
    # then settles the time credit (observe); None otherwise
    step_ms: float | None = None


@dataclass(frozen=True)
class FrameCosts:
    """One measured frame, as the controller learns from it (seconds)."""

    frame_s: float
    prefill_s: float
    denoise_s: float
    decode_s: float
    decode_steps: int
    batch: int


class RateController:
    """Running stage-cost estimates + the choice of k. `observe()` after every frame, `choose()`
    before a frame's decode steps."""

    def __init__(self, alpha: float = 0.3, headroom: float = 0.05) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        if not 0.0 <= headroom < 1.0:
            raise ValueError(f"headroom must be in [0, 1), got {headroom}")
        self.headroom = headroom
        self.prefill = Ewma(alpha)
        self.denoise = Ewma(alpha)
        self.other = Ewma(alpha)
        self.decode_step = EwmaLine(alpha)
        self.credit_s = 0.0  # unused (+) or overrun (-) frame time carried over, |.| <= one step
        self._credit_target = 0.0  # the target the credit was earned under

    def observe(self, c: FrameCosts, decision: RateDecision | None = None) -> None:
        """Learn one frame's stage costs; `decision`: what choose() said for this frame (settles
        the credit when k was chosen from the costs)."""
        for name, v in (("frame_s", c.frame_s), ("prefill_s", c.prefill_s),
                        ("denoise_s", c.denoise_s), ("decode_s", c.decode_s)):
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be finite and >= 0, got {v}")
        self.prefill.add(c.prefill_s)
        self.denoise.add(c.denoise_s)
        self.other.add(max(c.frame_s - c.prefill_s - c.denoise_s - c.decode_s, 0.0))
        if c.decode_steps > 0 and c.batch > 0:
            self.decode_step.add(float(c.batch), c.decode_s / c.decode_steps)
        if decision is not None and decision.step_ms is not None and decision.budget_ms:
            aim = decision.budget_ms * 1e-3 * (1.0 - self.headroom)
            step = decision.step_ms * 1e-3
            self.credit_s = min(step, max(-step, self.credit_s + aim - c.frame_s))

    def predict_s(self, k: int, batch: int) -> float | None:
        """T(k, B) in seconds, or None while a needed cost has not been measured yet."""
        if self.prefill.value is None or self.denoise.value is None or self.other.value is None:
            return None
        fixed = self.prefill.value + self.denoise.value + self.other.value
        if batch <= 0 or k <= 0:
            return fixed
        if self.decode_step.empty:
            return None
        return fixed + k * self.decode_step.predict(batch)

    def choose(self, target_hz: float, k_min: int, k_max: int, batch: int,
               strict: bool = False) -> RateDecision:
        """The largest k in [k_min, k_max] predicted to keep the frame within 1/target (less the
        headroom, plus the carried credit unless `strict`) at this batch. Off (target 0): k_max.
        Costs not measured yet: k_min, the safe side."""
        if not 1 <= k_min <= k_max:
            raise ValueError(f"need 1 <= k_min <= k_max, got k_min={k_min} k_max={k_max}")
        if target_hz != self._credit_target or strict:  # credit earned elsewhere means nothing
            self.credit_s, self._credit_target = 0.0, target_hz
        if target_hz <= 0:
            return RateDecision(k_max, True, None, None)
        budget = 1.0 / target_hz
        low = self.predict_s(k_min, batch)
        if low is None:
            return RateDecision(k_min, True, None, budget * 1e3)
        if low > budget:  # not even k_min fits: say so, keep language moving at k_min
            self.credit_s = 0.0
            return RateDecision(k_min, False, low * 1e3, budget * 1e3)
        if batch <= 0:  # nothing to decode: k does not change the frame
            return RateDecision(k_max, True, low * 1e3, budget * 1e3)
        step = self.decode_step.predict(batch)
        if step <= 0:
            return RateDecision(k_max, True, self.predict_s(k_max, batch) * 1e3, budget * 1e3)
        usable = budget * (1.0 - self.headroom) + self.credit_s - (low - k_min * step)
        k = int(min(k_max, max(k_min, math.floor(usable / step))))
        return RateDecision(k, True, self.predict_s(k, batch) * 1e3, budget * 1e3,
                            None if strict else step * 1e3)
