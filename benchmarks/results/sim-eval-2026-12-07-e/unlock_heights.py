"""How high above door-unlock's contact point the scripted expert's hand is while its place says
"turning the lock" (x-y within 2 cm of the point), over 40 layouts:

    python benchmarks/results/sim-eval-2026-12-07-e/unlock_heights.py

Prints the height (cm) when that first holds, when the lock first moved 3 mm, and over all such
steps (p1 / p50 / p99); tasks.DOOR_UNLOCK_TURN_HEIGHT is chosen above them.
"""
import numpy as np

from oxygen_ros.sim import SimEnv
from oxygen_ros.sim.tasks import OBJECT_MOVED, _xy

env = SimEnv("door-unlock", image_size=16)
c = np.asarray(env.task.contact)
first, moved_at, every = [], [], []
for seed in range(40):
    env.reset(seed)
    rest = env.raw_obs[4:7].copy()
    fired = moved = None
    for _ in range(300):
        info = env.step(env.expert_target())
        o = env.raw_obs
        dz = (o[2] - (o[6] + c[2])) * 100
        if _xy(o[0:3], o[4:7] + c) <= 0.02:  # the expert's own switch, blind to height
            every.append(dz)
            fired = dz if fired is None else fired
        if moved is None and np.linalg.norm(o[4:7] - rest) > OBJECT_MOVED:
            moved = dz
        if info.success:
            break
    first.append(fired)
    moved_at.append(moved)
env.close()
print("cm above the contact point when x-y first comes within 2 cm, min / median / max:",
      np.round(np.percentile(first, [0, 50, 100]), 1).tolist())
print("when the lock first moved 3 mm:", np.round(np.percentile(moved_at, [0, 50, 100]), 1).tolist())
print("over all x-y-within-2-cm steps, p1 / p50 / p99:", np.round(np.percentile(every, [1, 50, 99]), 1).tolist())
