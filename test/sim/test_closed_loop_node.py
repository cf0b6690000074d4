"""The trained simulator policy (checkpoints/sim-policy) presses the button through the node:
OxygenNode in-process on the checkpoint (model.checkpoint, its normalisation statistics, the
sim's joint names, control at the policy's 20 Hz), fed the simulator's camera and joint state as
the node's pairing hands them to its worker, its chunk player giving every 12.5 ms control step's
target. ROS simulated time (use_sim_time, the clock set to the sim's) stands in for the wall
clock, so the sim waits for the node and the episode does not depend on how loaded the machine
is (deterministic: one thread, the engine's seed). Checked by hand: fed a black image instead of
the camera, the same episode times out in stage 0; button pressing is easy enough that BGR
images or swapped x/y state still succeed here (oxygen-sim eval's fault settings measure those)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from oxygen_ros.sim import metaworld_available, unavailable_reason

pytestmark = [pytest.mark.ros,
              pytest.mark.skipif(not metaworld_available(), reason=str(unavailable_reason()))]
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.time import Time as RosTime  # noqa: E402

from oxygen_ros.node.oxygen_node import OxygenNode  # noqa: E402
from oxygen_ros.robot.pairing import Pair  # noqa: E402
from oxygen_ros.sim import CONTROL_PERIOD_S, JOINT_NAMES, SimEnv, get_task  # noqa: E402
from oxygen_ros.sim.checkpoint import checkpoint_rate_hz  # noqa: E402

CHECKPOINT = Path(__file__).resolve().parents[2] / "checkpoints" / "sim-policy"
T0 = 1000.0  # simulated seconds at the episode's start (ROS sim time, use_sim_time)
SEED = 9_000_000  # offline_eval's first held-out layout of button-press-topdown (never recorded)


def run_episode(node: OxygenNode, env: SimEnv, seed: int, instruction: str, replan_s: float) -> tuple:
    """Frames of the node's worker on the sim's observations; between frames, `replan_s` of
    control steps, each commanded with the chunk player's target for that step's time."""
    rt, clock = node.rt, node.get_clock()
    state = env.reset(seed)
    info, frames, t = env.info, 0, T0
    while not (info.success or info.timed_out):
        clock.set_ros_time_override(RosTime(nanoseconds=int(t * 1e9)))  # the node's "now"
        stamp = Time(sec=int(t), nanosec=int((t % 1.0) * 1e9))
        rt.worker.frame(Pair(stamp=t, images=(env.render(),), state=state.astype(np.float32),
                             header_stamp=stamp, image_stamps=(t,), state_stamp=t))
        frames += 1
        for _ in range(round(replan_s / CONTROL_PERIOD_S)):
            sample = rt.player.tick(t)
            assert sample is not None and not sample.stale
            info = env.step(sample.values)
            t += CONTROL_PERIOD_S
            clock.set_ros_time_override(RosTime(nanoseconds=int(t * 1e9)))
            if info.success or info.timed_out:
                break
        state = env.state()
    return info, frames


def test_trained_policy_presses_the_button_through_the_node(ctx):
    assert (CHECKPOINT / "model.safetensors").exists(), "the trained checkpoint is committed"
    rate = checkpoint_rate_hz(CHECKPOINT)
    assert rate == 20.0  # training.json control_rate_hz: the chunk's step
    task = get_task("button-press-topdown")
    node = OxygenNode(context=ctx, parameter_overrides=[
        Parameter("model.checkpoint", value=str(CHECKPOINT)),
        Parameter("model.num_threads", value=1),
        Parameter("use_sim_time", value=True),
        Parameter("joint_names", value=list(JOINT_NAMES)),
        Parameter("control_rate_hz", value=rate),
        Parameter("mode", value="isolated"),
        Parameter("memory.enabled", value=False),
        Parameter("instruction", value=task.instruction)])
    env = SimEnv(task, image_size=64)
    t0 = time.perf_counter()
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        info, frames = run_episode(node, env, SEED, task.instruction, replan_s=4 / rate)
    finally:
        env.close()
        node.stop()
        node.destroy_node()
    wall = time.perf_counter() - t0
    assert info.success, f"no success after {info.step} steps ({frames} frames), stage {info.caption!r}"
    assert info.step < 200 and wall < 60, (info.step, wall)
