"""Denoise computes the adaRMS modulations once per (expert, S), not every step."""
from __future__ import annotations

import torch

from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.families.pi05.family import FAMILY as PI05
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.model.layers import AdaRMSNorm
from oxygen_ros.engine.runner.model_runner import ModelRunner, SeqView

MC = PRESETS["tiny"]


def _setup():
    model = init_model(MC, seed=0).fuse_projections()
    runner = ModelRunner(model, MC, num_blocks=32, block_size=8)
    runner.generate([SeqView(list(range(4)), 0)], [list(range(3, 20))], [1])  # a 17-token prefix
    seq = SeqView(list(range(6)), 17)
    noise = torch.randn(MC.action_horizon, MC.action_dim, generator=torch.Generator().manual_seed(0))
    return model, runner, seq, noise


def test_precomputed_schedule_equals_per_step_conditioning(monkeypatch):
    model, runner, seq, noise = _setup()
    cached = runner.denoise(seq, 17, noise, 5)
    per_step = ModelRunner(model, MC, num_blocks=32, block_size=8)
    per_step.pool.copy_(runner.pool)
    # the old path: the conditioning vector itself reaches every norm, dense(cond) per step
    # (the schedule is the pi05 family's: engine/families/pi05/family.py)
    monkeypatch.setattr(PI05, "adarms_schedule", lambda runner, expert, s: {})
    monkeypatch.setattr(model, "adarms_modulations", lambda expert, cond: cond)
    assert torch.equal(per_step.denoise(seq, 17, noise, 5), cached)


def test_dense_layers_run_once_per_schedule(monkeypatch):
    model, runner, seq, noise = _setup()
    calls = []
    real = AdaRMSNorm.modulation
    monkeypatch.setattr(AdaRMSNorm, "modulation", lambda self, cond: calls.append(1) or real(self, cond))
    per_schedule = (2 * MC.depth + 1)
    for _ in range(3):
        runner.denoise(seq, 17, noise, 4)
    assert len(calls) == per_schedule * 4  # the first frame only
    for s in (1, 2, 3, 5, 6):  # S changes live: a few schedules are kept, the oldest dropped
        runner.denoise(seq, 17, noise, s)
    assert len(runner._adarms) == 4 and (1, 4) not in runner._adarms
