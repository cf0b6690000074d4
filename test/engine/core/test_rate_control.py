"""engine/core/rate_control.py driven by fake stage costs: the chosen k keeps the frame within
1/target where that is feasible, says so where it is not, follows a changing load and batch, and
its running estimates recover the cost model they are fed."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oxygen_ros.engine.core.rate_control import EwmaLine, FrameCosts, RateController


class FakeFrames:
    """A frame costs P + D + O + steps * (a + b * batch) seconds, times a little noise."""

    def __init__(self, p=0.010, d=0.015, o=0.002, a=0.001, b=0.0001, noise=0.02, seed=0):
        self.p, self.d, self.o, self.a, self.b, self.noise = p, d, o, a, b, noise
        self.rng = random.Random(seed)

    def _n(self) -> float:
        return 1.0 + self.rng.uniform(-self.noise, self.noise)

    def run(self, k: int, batch: int) -> FrameCosts:
        p, d, o = self.p * self._n(), self.d * self._n(), self.o * self._n()
        steps = k if batch else 0
        dec = steps * (self.a + self.b * batch) * self._n()
        return FrameCosts(p + d + o + dec, p, d, dec, steps, batch)

    def frame_s(self, k: int, batch: int) -> float:
        return self.p + self.d + self.o + k * (self.a + self.b * batch)


def drive(ctl: RateController, fake: FakeFrames, target: float, frames: int, batch,
          k_min: int = 1, k_max: int = 32):
    """Closed loop: choose, run, observe. batch: an int or a function of the frame index."""
    out = []
    for i in range(frames):
        b = batch(i) if callable(batch) else batch
        dec = ctl.choose(target, k_min, k_max, b)
        ctl.observe(fake.run(dec.k, b), dec)
        out.append((dec, b))
    return out


def best_k(fake: FakeFrames, target: float, batch: int, k_min=1, k_max=32, headroom=0.05) -> int:
    step = fake.a + fake.b * batch
    return max(k_min, min(k_max, math.floor((headroom_budget(target, headroom)
                                             - fake.p - fake.d - fake.o) / step)))


def headroom_budget(target: float, headroom: float) -> float:
    return (1.0 - headroom) / target


def test_feasible_target_converges_to_the_largest_k_that_fits():
    fake, ctl = FakeFrames(), RateController()
    runs = drive(ctl, fake, 20.0, 40, batch=10)
    want = best_k(fake, 20.0, 10)  # (47.5 - 27) / 2 ms = 10
    assert want == 10
    tail = runs[-10:]
    assert all(abs(dec.k - want) <= 1 for dec, _ in tail)
    assert all(dec.feasible for dec, _ in tail)
    # the frames it chooses stay within 1/target and use most of it (achieved within 10%)
    for dec, b in tail:
        t = fake.frame_s(dec.k, b)
        assert t <= 1 / 20.0 and 1 / t <= 20.0 * 1.1
        assert dec.predicted_ms == pytest.approx(t * 1e3, rel=0.05)


def test_infeasible_even_at_k_min_says_so_and_keeps_language_at_k_min():
    fake, ctl = FakeFrames(p=0.040, d=0.030), RateController()  # 72 ms before any decode
    runs = drive(ctl, fake, 20.0, 20, batch=4, k_min=2)
    dec, _ = runs[-1]
    assert dec.k == 2 and not dec.feasible
    assert dec.predicted_ms > dec.budget_ms == pytest.approx(50.0)
    # without requests nothing can be saved either: still infeasible
    assert not ctl.choose(20.0, 2, 32, 0).feasible
    # a target it can meet is feasible again on the same estimates
    assert ctl.choose(5.0, 2, 32, 4).feasible


def test_follows_a_changing_load():
    fake, ctl = FakeFrames(), RateController()
    drive(ctl, fake, 20.0, 30, batch=10)
    fake.a, fake.b = 3 * fake.a, 3 * fake.b  # decode steps 3x dearer (another process on the cores)
    runs = drive(ctl, fake, 20.0, 20, batch=10)
    assert best_k(fake, 20.0, 10) == 3  # (47.5 - 27) / 6 ms = 3.4: k dithers between 3 and 4
    assert {dec.k for dec, _ in runs[-8:]} <= {3, 4}
    step = fake.a + fake.b * 10
    assert all(fake.frame_s(dec.k, 10) <= 1 / 20.0 + step for dec, _ in runs[-8:])
    fake.a, fake.b = fake.a / 3, fake.b / 3  # load gone: k climbs back
    runs = drive(ctl, fake, 20.0, 20, batch=10)
    assert abs(runs[-1][0].k - 10) <= 1


def _mean_rate(fake: FakeFrames, runs) -> float:
    return len(runs) / sum(fake.frame_s(dec.k, b) for dec, b in runs)


@pytest.mark.parametrize("target,fixed_ms,step_ms", [(4.0, 100.0, 36.0), (2.0, 210.0, 55.0),
                                                      (3.0, 150.0, 50.0), (10.0, 40.0, 17.0)])
def test_a_coarse_decode_step_is_dithered_so_the_mean_rate_meets_the_target(target, fixed_ms,
                                                                            step_ms):
    """One decode step is 15-25% of the period (balanced on a CPU): a whole k that always fits
    leaves up to a step of every period unused (4 Hz asked, 4.8 Hz run, with language slower
    than it could be). The carried credit alternates k so the mean frame takes (1 - headroom) of
    the period; no frame runs over by a whole step."""
    fake = FakeFrames(p=fixed_ms * 0.4e-3, d=fixed_ms * 0.5e-3, o=fixed_ms * 0.1e-3,
                      a=step_ms * 1e-3, b=0.0, noise=0.0)
    ctl = RateController(headroom=0.05)
    runs = drive(ctl, fake, target, 60, batch=8)[20:]
    achieved = _mean_rate(fake, runs)
    assert target <= achieved <= target * 1.07  # (1 - 0.05)^-1 = 1.053
    assert len({dec.k for dec, _ in runs}) == 2  # the two whole k around the ideal
    step = step_ms * 1e-3
    assert all(fake.frame_s(dec.k, b) < 1 / target + step for dec, b in runs)
    assert abs(ctl.credit_s) <= step


def test_strict_keeps_every_frame_inside_the_period_and_carries_nothing():
    """target_strict: the largest whole k that fits, every frame by itself; the mean rate is then
    above the target by up to a step (what the credit exists to avoid)."""
    fake = FakeFrames(p=40e-3, d=50e-3, o=10e-3, a=36e-3, b=0.0, noise=0.0)
    ctl = RateController(headroom=0.05)
    runs = []
    for _ in range(40):
        dec = ctl.choose(4.0, 1, 32, 8, strict=True)
        ctl.observe(fake.run(dec.k, 8), dec)
        runs.append((dec, 8))
        assert ctl.credit_s == 0.0 and dec.step_ms is None
    tail = runs[10:]
    assert {dec.k for dec, _ in tail} == {3}  # (237.5 - 100) / 36 = 3.8
    assert all(fake.frame_s(dec.k, b) <= 0.25 for dec, b in tail)
    assert _mean_rate(fake, tail) > 4.0 * 1.15  # 208 ms frames: 4.8 Hz
    # switching strict off lets the credit work from the next frame on
    more = drive(ctl, fake, 4.0, 30, batch=8)[10:]
    assert {dec.k for dec, _ in more} == {3, 4} and _mean_rate(fake, more) <= 4.0 * 1.07


def test_the_credit_feeds_back_a_biased_cost_model():
    """Some of the frame's time is invisible to the stage split (it lands in `other` one frame
    late, say a GC pause every few frames): the credit follows the measured frame time, so the
    mean still settles at the aim."""
    fake, ctl = FakeFrames(a=0.004, b=0.0, noise=0.0), RateController(headroom=0.05)
    times = []
    for i in range(80):
        dec = ctl.choose(20.0, 1, 32, 10)
        c = fake.run(dec.k, 10)
        extra = 0.006 if i % 3 == 0 else 0.0  # seen in the frame time only
        c = FrameCosts(c.frame_s + extra, c.prefill_s, c.denoise_s, c.decode_s, c.decode_steps,
                       c.batch)
        ctl.observe(c, dec)
        times.append(c.frame_s)
    mean = sum(times[30:]) / len(times[30:])
    assert mean == pytest.approx(0.95 / 20.0, rel=0.03)


def test_the_credit_resets_with_the_target_and_when_infeasible():
    fake, ctl = FakeFrames(a=0.004, b=0.0, noise=0.0), RateController()
    drive(ctl, fake, 20.0, 7, batch=10)
    assert ctl.credit_s != 0.0
    ctl.choose(8.0, 1, 32, 10)
    assert ctl.credit_s == 0.0  # a new target starts from zero
    drive(ctl, fake, 8.0, 7, batch=10)
    assert ctl.credit_s != 0.0
    fake.p = 0.2  # the load makes the same target infeasible
    runs = drive(ctl, fake, 8.0, 6, batch=10)
    assert not runs[-1][0].feasible and ctl.credit_s == 0.0
    # observing without a decision (other modes, k not chosen) leaves the credit alone
    ctl.credit_s = 0.001
    ctl.observe(fake.run(3, 10))
    assert ctl.credit_s == 0.001


def test_a_growing_batch_lowers_k_from_the_fitted_slope():
    """During the batch ramp the controller sees several batch sizes and fits d(B); at a batch it
    has not run yet it predicts from the line instead of the last batch's cost."""
    fake, ctl = FakeFrames(b=0.0005, noise=0.0), RateController()
    drive(ctl, fake, 10.0, 12, batch=lambda i: 1 + 2 * i)  # batches 1..23
    dec = ctl.choose(10.0, 1, 64, 40)  # unseen batch
    assert dec.k == best_k(fake, 10.0, 40, k_max=64)
    assert fake.frame_s(dec.k, 40) <= 1 / 10.0


def test_off_cold_start_and_empty_batch():
    ctl = RateController()
    assert ctl.choose(0.0, 1, 8, 5).k == 8  # off: k_max, the configured k
    cold = ctl.choose(30.0, 2, 8, 5)
    assert cold.k == 2 and cold.feasible and cold.predicted_ms is None  # nothing measured yet
    ctl.observe(FrameCosts(0.010, 0.004, 0.004, 0.0, 0, 0))  # a frame without requests
    assert ctl.choose(30.0, 2, 8, 5).k == 2  # decode cost still unknown: the safe side
    idle = ctl.choose(30.0, 2, 8, 0)
    assert idle.feasible and idle.predicted_ms == pytest.approx(10.0)


def test_rejects_bad_arguments():
    ctl = RateController()
    with pytest.raises(ValueError, match="k_min"):
        ctl.choose(10.0, 0, 4, 1)
    with pytest.raises(ValueError, match="k_min"):
        ctl.choose(10.0, 5, 4, 1)
    with pytest.raises(ValueError, match="frame_s"):
        ctl.observe(FrameCosts(float("nan"), 0, 0, 0, 0, 0))
    with pytest.raises(ValueError, match="alpha"):
        RateController(alpha=0.0)
    with pytest.raises(ValueError, match="headroom"):
        RateController(headroom=1.0)


def test_ewma_line_recovers_a_line_and_is_flat_at_one_batch():
    line = EwmaLine(0.3)
    for b in (1, 5, 9, 13, 17, 21, 25, 29) * 3:
        line.add(b, 2.0 + 0.25 * b)
    a, b = line.coefficients()
    assert a == pytest.approx(2.0) and b == pytest.approx(0.25)
    flat = EwmaLine(0.3)
    for _ in range(5):
        flat.add(7, 3.0)
    assert flat.coefficients() == pytest.approx((3.0, 0.0))
    falling = EwmaLine(0.5)
    for bb in (1, 10, 20):
        falling.add(bb, 10.0 - 0.1 * bb)  # noise that looks like a negative slope
    assert falling.coefficients()[1] == 0.0 and falling.predict(100) > 0


@settings(max_examples=150, deadline=None)
@given(p=st.floats(0.0, 0.2), d=st.floats(0.0, 0.2), a=st.floats(1e-5, 0.02),
       b=st.floats(0.0, 0.002), batch=st.integers(0, 64), target=st.floats(0.5, 200.0),
       k_min=st.integers(1, 8), span=st.integers(0, 40))
def test_choice_is_in_range_and_the_largest_that_fits(p, d, a, b, batch, target, k_min, span):
    fake, ctl = FakeFrames(p=p, d=d, o=0.001, a=a, b=b, noise=0.0), RateController(headroom=0.05)
    k_max = k_min + span
    for bb in (batch, max(1, batch)):  # decode cost measured at least once
        ctl.observe(fake.run(k_min, bb))
    dec = ctl.choose(target, k_min, k_max, batch)
    assert k_min <= dec.k <= k_max
    budget = 1.0 / target
    t = ctl.predict_s(dec.k, batch)
    if not dec.feasible:
        assert dec.k == k_min and ctl.predict_s(k_min, batch) > budget
    elif batch and dec.k > k_min:
        assert t <= budget * 0.95 + 1e-12
    if dec.feasible and batch and dec.k < k_max:  # one more step would not fit
        assert ctl.predict_s(dec.k + 1, batch) > budget * 0.95 - 1e-12


def test_engine_config_validates_the_target():
    from oxygen_ros.engine.config import EngineConfig

    assert EngineConfig().target_action_hz == 0.0 and EngineConfig().k_min == 1
    EngineConfig(target_action_hz=15.0, k_min=2, decode_steps_per_frame=8)
    for bad in (-1.0, float("nan"), float("inf"), 20_000.0):
        with pytest.raises(ValueError, match="target_action_hz"):
            EngineConfig(target_action_hz=bad)
    with pytest.raises(ValueError, match="k_min must be in"):
        EngineConfig(k_min=0)
    with pytest.raises(ValueError, match="target_strict"):
        EngineConfig(target_strict=1)
    with pytest.raises(ValueError, match=r"k_min \(5\) must not exceed"):
        EngineConfig(target_action_hz=10.0, k_min=5, decode_steps_per_frame=4)
    EngineConfig(k_min=5, decode_steps_per_frame=4)  # no target: k_min unused


def _engine(**cfg):
    from oxygen_ros.engine.config import PRESETS, EngineConfig
    from oxygen_ros.engine.core.engine import Engine

    base = dict(mode="oxygen", decode_steps_per_frame=6, max_decode_steps=9,
                memory_every_n_frames=1)
    return Engine(PRESETS["tiny"], EngineConfig(**{**base, **cfg}))


def _run(engine, frames: int):
    from oxygen_ros.engine.core.synthetic import SyntheticStream

    stream = SyntheticStream(engine.model_config)
    outs = [engine.step(stream.frame(i)) for i in range(frames)]
    return outs + list(engine.drain(stream.frame))


def _tokens(outs) -> dict[int, tuple[int, ...]]:
    toks: dict[int, tuple[int, ...]] = {}
    for o in outs:
        for u in o.updates:
            toks[u.id] = toks.get(u.id, ()) + u.new_tokens
    return toks


def test_engine_reports_the_choice_and_tokens_do_not_change():
    """Under a target the engine picks k per frame in [k_min, k] and reports it; the requests'
    tokens equal those of the fixed-k run (k changes scheduling, never results)."""
    fixed = _run(_engine(), 6)
    assert all(o.k_chosen == 6 and o.target_feasible and o.target_action_hz == 0 for o in fixed)
    # a budget a bit above the frame without decode: k has to drop below k_max
    probe = fixed[2]
    no_decode_ms = probe.frame_ms - probe.timings_ms["decode"]
    target = 1e3 / (no_decode_ms + 0.5 * probe.timings_ms["decode"])
    rated = _run(_engine(target_action_hz=target, k_min=2), 6)
    assert all(2 <= o.k_chosen <= 6 for o in rated)
    assert all(o.target_action_hz == pytest.approx(target) for o in rated)
    assert _tokens(rated) == _tokens(fixed)


def test_engine_says_when_the_target_is_infeasible():
    outs = _run(_engine(target_action_hz=5000.0, k_min=3), 4)  # 0.2 ms frames: impossible
    assert [o.k_chosen for o in outs[2:]] == [3] * len(outs[2:])
    assert not any(o.target_feasible for o in outs[2:])
    iso = _run(_engine(mode="isolated", target_action_hz=5000.0), 2)
    assert not any(o.target_feasible for o in iso)  # other modes: the measured frame
