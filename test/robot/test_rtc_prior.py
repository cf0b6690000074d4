"""The engine's RTC input built from the player (robot/rtc_prior.py) and the seam error
(robot/seam.py)."""
import numpy as np

from oxygen_ros.robot.chunk_player import ChunkPlayer
from oxygen_ros.robot.rtc_prior import rtc_prior
from oxygen_ros.robot.seam import seam_errors
from oxygen_ros.robot.values import StateMapping, actions_to_model

DT = 0.02


def test_prior_is_the_executed_leftover_in_model_units_with_the_counted_delay():
    lower, upper = np.array([0.0, -2.0]), np.array([2.0, 2.0])
    mapping = StateMapping(2, lower=lower, upper=upper)
    model_chunk = np.linspace(-0.9, 0.9, 20, dtype=np.float32)[:, None].repeat(2, axis=1)
    robot = mapping.to_robot(model_chunk)
    p = ChunkPlayer(2, DT, observation_timeout_s=10.0, blend="rtc", lower=lower, upper=upper)
    p.set_chunk(robot, 0.0, 0.0)
    for i in range(3):
        p.tick(i * DT)
    p.set_chunk(robot, 1 * DT, 3 * DT)  # 2 ticks since its stamp were played
    prior = rtc_prior(p, mapping, 2 * DT, horizon=10)
    assert prior.delay == 2
    assert prior.actions.shape == (10, 2)
    # step 0: the value played at 2 dt (old chunk, step 2), then the new chunk from its step 2
    np.testing.assert_allclose(prior.actions[0], model_chunk[2], atol=1e-6)
    np.testing.assert_allclose(prior.actions[1:], model_chunk[2:11], atol=1e-6)
    p.configure(p.config.replace(blend="crossfade"))
    assert rtc_prior(p, mapping, 2 * DT, horizon=10) is None


def test_actions_to_model_inverts_to_robot():
    m = StateMapping(3, lower=np.array([0.0, -1.0, 5.0]), upper=np.array([1.0, 1.0, 9.0]))
    a = np.random.default_rng(0).uniform(-1, 1, (4, 3)).astype(np.float32)
    np.testing.assert_allclose(actions_to_model(m, m.to_robot(a)), a, atol=1e-6)


def test_seam_errors_on_the_grid_and_at_the_ticks():
    a = np.arange(10, dtype=np.float64)[:, None]
    # B stamped 2.5 steps after A and continuing A's values exactly at B's grid steps
    sb = 2.5 * DT
    b = a[2:] + 0.0
    assert seam_errors([(0.0, a), (sb, b)], DT).tolist() == [0.0]
    # ticks 0.7 steps after B's grid points: A's step there is one further on
    ticks = sb + (np.arange(6) + 0.7) * DT
    assert seam_errors([(0.0, a), (sb, b)], DT, ticks=ticks).tolist() == [1.0]
    assert seam_errors([(0.0, a), (sb, a[3:])], DT, ticks=ticks).tolist() == [0.0]
    assert seam_errors([(1.0, a), (0.0, a)], DT).size == 0  # out of order: skipped


def test_no_prior_when_the_robot_is_not_where_the_executed_plan_is():
    """The sim reset the robot to its start pose (or a person moved it) while the player still
    executes the last plan 1.5 rad away: a prior continuing that plan makes the new chunk drive
    the robot back to it (the ALOHA rtc runs: every episode's first chunk started 1.5 rad from
    the robot). No prior then; a robot within max_tracking_error of the plan still gets it."""
    dt = 0.04  # ALOHA: 25 Hz control and chunk steps
    old = np.array([0.0, -0.1, 0.84, 0.0, -0.68, 1.56, 0.99])
    start = np.array([0.0, -0.96, 1.16, 0.0, -0.3, 0.0, 0.1])
    p = ChunkPlayer(7, dt, observation_timeout_s=10.0, blend="rtc")
    p.configure(p.config.replace(max_tracking_error=(0.2,) * 6 + (1.0,)))  # ALOHA's
    p.set_chunk(np.repeat(old[None], 32, axis=0), 0.0, 0.0)
    for i in range(10):
        p.tick(i * dt)
    mapping = StateMapping(7, lower=np.full(7, -3.0), upper=np.full(7, 3.0))
    stamp = 8 * dt
    assert rtc_prior(p, mapping, stamp, 32, state=start, tracking=True) is None
    near = old + np.array([0.1, -0.1, 0.05, 0.0, 0.1, -0.15, -0.6])
    prior = rtc_prior(p, mapping, stamp, 32, state=near, tracking=True)
    assert prior is not None and prior.actions.shape == (24, 7)
    # oxygen-replay (no tracking): recorded states never follow the replayed plan
    assert rtc_prior(p, mapping, stamp, 32, state=start) is not None
