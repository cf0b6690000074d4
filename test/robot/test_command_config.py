"""CommandConfig: one immutable command-path configuration, replaced whole (issue 26, item 1)."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oxygen_ros.robot.chunk_player import ChunkPlayer
from oxygen_ros.robot.command_config import BLENDS, CommandConfig, clip_to_limits
from oxygen_ros.robot.shaper import CommandShaper

J = 3
STEP, TICK = 0.02, 0.005


@pytest.mark.parametrize("kwargs, words", [
    (dict(num_joints=0), "num_joints"),
    (dict(step_s=0.0), "step_s"),
    (dict(tick_s=float("nan")), "tick_s"),
    (dict(lower=(-1.0,) * J), "both lower and upper"),
    (dict(lower=(-1.0,) * 2, upper=(1.0,) * 2), "3 finite values"),
    (dict(lower=(1.0,) * J, upper=(0.0,) * J), "lower joint limits must be <="),
    (dict(blend="smooth"), "blend must be one of"),
    (dict(crossfade_s=-0.1), "crossfade_s"),
    (dict(observation_timeout_s=0.0), "observation_timeout_s"),
    (dict(future_tolerance_s=-1.0), "future_tolerance_s"),
    (dict(velocity_limits=(0.0,)), "joint_velocity_limits must be > 0"),
    (dict(acceleration_limits=(1.0, 2.0)), "joint_acceleration_limits has 2 entries"),
    (dict(max_start_deviation=(-0.1,)), "max_start_deviation must be >= 0"),
    (dict(skip_latency="no"), "skip_latency must be true or false"),
])
def test_invalid_configs_are_refused_with_the_reason(kwargs, words):
    base = dict(num_joints=J, step_s=STEP)
    with pytest.raises(ValueError, match=words):
        CommandConfig(**{**base, **kwargs})


def test_frozen_normalised_and_replaced_whole():
    c = CommandConfig(J, STEP, TICK, lower=np.array([-1.0] * J), upper=[1.0] * J,
                      velocity_limits=[2.0])
    assert c.lower == (-1.0,) * J and c.velocity_limits == (2.0,) and c.steps_per_tick == 0.25
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.blend = "rtc"
    d = c.replace(blend="rtc")
    assert d.lower == c.lower and c.blend == "crossfade"  # the rest carried, the old unchanged
    assert CommandConfig(J, STEP).tick_s == STEP  # one step per tick unless told


def test_clip_is_one_function_for_commands_and_chunks():
    lo, hi = np.array([-1.0, 0.0]), np.array([1.0, 0.5])
    np.testing.assert_array_equal(clip_to_limits(np.array([[5.0, -5.0], [0.2, 0.2]]), lo, hi),
                                  [[1.0, 0.0], [0.2, 0.2]])
    np.testing.assert_array_equal(clip_to_limits(np.array([5.0, -5.0]), None, None), [5.0, -5.0])


def test_player_configure_takes_only_a_whole_config_of_its_own_axes():
    p = ChunkPlayer(J, STEP, tick_s=TICK)
    with pytest.raises(TypeError):
        p.configure(blend="rtc")
    with pytest.raises(ValueError, match="cannot change"):
        p.configure(CommandConfig(J, STEP))  # another control tick


# random valid configs: every field a live parameter reaches
CONFIG = st.builds(
    lambda lim, cf, to, ft, blend, v, a: CommandConfig(
        J, STEP, TICK, lower=() if lim is None else (-lim,) * J, upper=() if lim is None else (lim,) * J,
        crossfade_s=cf, observation_timeout_s=to, future_tolerance_s=ft, blend=blend,
        velocity_limits=v, acceleration_limits=a),
    st.one_of(st.none(), st.floats(0.05, 1.0)), st.floats(0.0, 0.3), st.floats(0.01, 2.0),
    st.floats(0.0, 2.0), st.sampled_from(BLENDS), st.one_of(st.just(()), st.tuples(st.floats(0.5, 5.0))),
    st.one_of(st.just(()), st.tuples(st.floats(5.0, 200.0))))


@settings(max_examples=60, deadline=None)
@given(configs=st.lists(st.tuples(CONFIG, st.integers(1, 40), st.floats(-0.1, 0.4),
                                  st.booleans()), min_size=1, max_size=12))
def test_random_live_configs_keep_the_player_and_shaper_limits(configs):
    """Player + shaper under a random sequence of whole configs (the same again included) while
    chunks far beyond the limits arrive: the player's value is always within the joint limits
    in effect; commands move within the velocity limit and, while following, the acceleration
    limit in effect."""
    p = ChunkPlayer.from_config(configs[0][0])
    sh = CommandShaper(J, TICK, *configs[0][0].shaper_limits())
    t, prev, prev_step = 0.0, None, None
    for cfg, ticks, age, new_chunk in configs:
        p.configure(cfg)
        sh.configure(*cfg.shaper_limits())
        if new_chunk or not p.has_chunk:
            far = 3.0 * np.sin(np.arange(20)[:, None] * 0.7 + np.arange(J))
            p.set_chunk(far, t - age, t)
        lo, hi = cfg.lower_array, cfg.upper_array
        vel = None if not cfg.velocity_limits else cfg.velocity_limits[0]
        acc = None if not cfg.acceleration_limits else cfg.acceleration_limits[0]
        first = True
        for _ in range(ticks):
            t += TICK
            s = p.tick(t)
            if s is not None and lo is not None:
                assert np.all(s.values >= lo) and np.all(s.values <= hi), (s.values, lo, hi)
            out = sh.step(None if s is None else s.values, prev if prev is not None else np.zeros(J),
                          "stale" if s is not None and s.stale else "")
            if out is None:
                continue
            assert np.all(np.isfinite(out.values))
            if prev is not None and vel is not None and not out.start:
                assert np.all(np.abs(out.values - prev) <= vel * TICK + 1e-9)
            step = None if prev is None or out.start else out.values - prev
            if (acc is not None and step is not None and prev_step is not None and not first
                    and vel is None):
                assert np.all(np.abs(step - prev_step) <= acc * TICK * TICK + 1e-9)
            prev, prev_step, first = out.values, step, False


def test_execution_is_stream_or_sync_and_sync_refuses_rtc():
    assert CommandConfig(2, 0.02).execution == "stream"
    assert CommandConfig(2, 0.02, execution="sync", blend="none").execution == "sync"
    with pytest.raises(ValueError, match="execution must be one of stream, sync"):
        CommandConfig(2, 0.02, execution="async")
    with pytest.raises(ValueError, match="chunk_execution sync"):
        CommandConfig(2, 0.02, execution="sync", blend="rtc")
