"""What the bimanual robot costs on this machine: a physics step, and one image per camera and size.

    oxygen-sim aloha bench

Prints the median over `--repeats` renders of each camera (fast settings: no shadows, reflections,
skybox or multisampling) at each size, the median physics step, and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from .env import CAMERAS, AlohaEnv


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[48, 64, 96, 128])
    p.add_argument("--cameras", nargs="+", default=["top", "left_wrist", "right_wrist"], choices=CAMERAS)
    p.add_argument("--repeats", type=int, default=20)
    a = p.parse_args(argv)
    out: dict = {"loadavg_before": open("/proc/loadavg").read().split()[:3]}
    env = AlohaEnv("transfer-cube", cameras=None)
    env.reset(0)
    t0 = time.perf_counter()
    for _ in range(1000):
        env.physics_step()
    out["physics_step_ms"] = round((time.perf_counter() - t0), 4)  # 1000 steps: s == ms per step
    env.close()
    for size in a.sizes:
        for cam in a.cameras:
            env = AlohaEnv("transfer-cube", image_size=size, cameras=(cam,))
            env.reset(0)
            times = []
            for _ in range(a.repeats):
                t = time.perf_counter()
                env.render()
                times.append(time.perf_counter() - t)
            out[f"{cam}@{size}_ms"] = round(1000 * float(np.median(times[1:])), 2)
            env.close()
    out["loadavg_after"] = open("/proc/loadavg").read().split()[:3]
    out["cpus"] = os.cpu_count()
    print(json.dumps(out, indent=1))
    return 0
