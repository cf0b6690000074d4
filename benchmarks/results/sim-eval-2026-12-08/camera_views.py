"""Door-unlock's expert episode on layout 3,002,008 (one of the evaluation's, failed by v14 and
v15b) at each stage change, at step 30 and 50 and at success, as three 64-px Meta-World cameras
draw it: corner4 (the policy's), gripperPOV and behindGripper, left to right; scaled 3x.

    python camera_views.py camera_views.png
"""
import sys

import numpy as np
from PIL import Image

from oxygen_ros.sim import SimEnv
from oxygen_ros.sim.env import FastCamera

env = SimEnv("door-unlock", image_size=64)
env.reset(3002008)
names = ["corner4", "gripperPOV", "behindGripper"]
cams = [FastCamera(env._env.model, env._env.data, c, 64) for c in names]
shots, prev = [], None
for step in range(200):
    info = env.step(env.expert_target())
    if info.caption != prev or step in (30, 50) or info.success:
        shots.append([c.render() for c in cams])
        print(f"row {len(shots)}: step {step + 1}, {info.caption}")
    prev = info.caption
    if info.success:
        break
grid = np.concatenate([np.concatenate(row, axis=1) for row in shots], axis=0)
Image.fromarray(grid).resize((grid.shape[1] * 3, grid.shape[0] * 3), Image.NEAREST).save(sys.argv[1])
for c in cams:
    c.close()
env.close()
