"""The failed door-unlock layouts of the evaluations, offline: a checkpoint driving the simulator
as `oxygen-sim demos --policy-episodes` drives it (the simulator waiting for the model; `delay`
control steps of the previous chunk first), at delays 0, 4, 8 and 12:

    python benchmarks/results/sim-eval-2026-12-07-e/offline_layouts.py CKPT
"""
import sys

import numpy as np

from oxygen_ros.sim.demos import PolicyDriver
from oxygen_ros.sim.offline_eval import load_policy

built = load_policy(sys.argv[1])  # before any SimEnv (osmesa)
from oxygen_ros.sim import SimEnv  # noqa: E402

env = SimEnv("door-unlock")
for seed in (3002001, 3002029, 3002009, 3002014, 3002021, 3002003, 3002008, 3002010):
    res = []
    for delay in (0, 4, 8, 12):
        driver = PolicyDriver(built, delay=delay)
        env.reset(seed)
        start = env.raw_obs[0:3] - (env.raw_obs[4:7] + np.asarray(env.task.contact))
        for _ in range(env.task.horizon):
            info = env.step(driver.target(env))
            if info.success or info.timed_out:
                break
        res.append(int(info.success))
    print(f"layout {seed}: the hand starts {np.round(start * 100, 1).tolist()} cm from the contact "
          f"point; success at delays 0, 4, 8, 12: {res}", flush=True)
env.close()
