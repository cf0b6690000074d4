"""What an isolated frame costs each checkpoint offline (no ROS, no simulator clock): one
door-lock observation (layout 3,000,100), the engine as offline_eval builds it with a 30-token
memory every frame; two rounds, the checkpoints taking turns, 40 steps each per round; the median
of each round's last 35 steps, per checkpoint.

    python benchmarks/results/sim-eval-2026-12-07-c/frame_cost.py OLD_CKPT NEW_CKPT
"""
from __future__ import annotations

import sys
import time

import numpy as np

from oxygen_ros.engine import EngineConfig
from oxygen_ros.robot.build import ModelSource, build_engine
from oxygen_ros.sim.policy import policy_observation


def main() -> None:
    cfg = EngineConfig(mode="isolated", denoise_steps=10, seed=0, memory_every_n_frames=1,
                       max_decode_steps=30, decode_steps_per_frame=30)
    # the engines first: building them after a MuJoCo scene crashed here (osmesa)
    built = [(ck, build_engine(ModelSource(checkpoint=ck, threads=1), cfg)) for ck in sys.argv[1:]]
    from oxygen_ros.sim import SimEnv

    env = SimEnv("door-lock")
    env.reset(3_000_100)
    image, state = env.render(), env.state()
    times: dict[str, list[float]] = {ck: [] for ck, _ in built}
    tokens: dict[str, int] = {}
    for _ in range(2):  # taking turns: a machine that slows down mid-run slows both
        for ck, b in built:
            step_s = []
            for i in range(40):
                t = time.perf_counter()
                out = b.engine.step(policy_observation(b, image, state, "lock the door", float(i)))
                step_s.append(time.perf_counter() - t)
            times[ck] += step_s[5:]
            tokens[ck] = out.tokens_this_frame
    for ck, _ in built:
        print(f"{ck}: median {np.median(times[ck]) * 1000:.1f} ms a frame, "
              f"{tokens[ck]} memory tokens in the last")

if __name__ == "__main__":
    main()
