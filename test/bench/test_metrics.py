"""bench/metrics.py: the frame latency predicted for a run comes from separately measured stage
costs and the run's schedule only, never from the frames' own timings."""
from __future__ import annotations

import dataclasses
import functools

import pytest

from oxygen_ros.bench.metrics import StageCosts, predict_run_ms
from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.core.synthetic import SyntheticStream

COSTS = StageCosts(prefill_ms=5.0, denoise_ms=7.0, decode_ms={1: 1.0, 4: 1.6, 16: 4.0})


@functools.lru_cache(maxsize=None)
def frames(mode: str, n: int = 6) -> tuple:
    mc = PRESETS["tiny"]
    eng = Engine(mc, EngineConfig(mode=mode, decode_steps_per_frame=2, max_decode_steps=4,
                                  memory_every_n_frames=1))
    stream = SyntheticStream(mc)
    return tuple(eng.step(stream.frame(i)) for i in range(n))


def test_decode_step_interpolates_and_extends_the_measured_sizes():
    assert COSTS.decode_step_ms(4) == 1.6
    assert COSTS.decode_step_ms(2) == pytest.approx(1.2)
    assert COSTS.decode_step_ms(10) == pytest.approx(2.8)
    assert COSTS.decode_step_ms(28) == pytest.approx(6.4)  # the last segment's line
    assert StageCosts(1.0, 1.0, {8: 3.0}).decode_step_ms(30) == 3.0
    with pytest.raises(ValueError, match="batch size"):
        StageCosts(1.0, 1.0, {})


@pytest.mark.parametrize("mode", ["oxygen", "isolated"])
def test_prediction_ignores_the_frames_own_timings(mode):
    outs = frames(mode)
    predicted = predict_run_ms(COSTS, outs)
    # the same schedule with every timing perturbed (a slower or noisier machine): unchanged
    perturbed = [dataclasses.replace(o, frame_ms=o.frame_ms * 3.7 + 11.0,
                                     timings_ms={k: v * 5.0 + 1.0 for k, v in o.timings_ms.items()})
                 for o in outs]
    assert predict_run_ms(COSTS, perturbed) == predicted
    # by hand from the schedule: isolated prefills once more per request
    want = sum((1 + (o.admitted if mode == "isolated" else 0)) * 5.0 + 7.0
               + o.decode_steps * COSTS.decode_step_ms(o.batch_size) for o in outs) / len(outs)
    assert predicted == pytest.approx(want)
    # and it does follow the stage costs and the schedule
    dearer = dataclasses.replace(COSTS, decode_ms={b: 2 * v for b, v in COSTS.decode_ms.items()})
    assert predict_run_ms(dearer, outs) > predicted
    bigger = [dataclasses.replace(o, batch_size=o.batch_size + 8) for o in outs]
    assert predict_run_ms(COSTS, bigger) > predicted


def test_isolated_costs_one_prefill_per_request_more():
    outs = frames("isolated")
    assert all(o.admitted == 1 for o in outs)
    per = predict_run_ms(COSTS, outs)
    assert per == pytest.approx(2 * 5.0 + 7.0 + 4 * 1.0)  # one request of N=4 at batch 1
