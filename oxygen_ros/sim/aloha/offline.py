"""The trained policy on the bimanual robot with the simulator waiting for it (no ROS, no clock).

    oxygen-sim aloha offline --checkpoint checkpoints/aloha-policy --episodes 2

Each frame: the three cameras and the state into the engine (isolated, memory off), the chunk's
first `--replan` targets played, each held for the checkpoint's period (2 control periods at
25 Hz). What the policy can do when inference costs no robot time: read beside the closed-loop
numbers, it separates the policy from the timing. Layouts: the evaluation's seeds.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from .env import DEFAULT_TOP_FOVY, AlohaEnv
from .node import EVAL_BASE_SEED, schedule


def main(argv: list[str] | None = None) -> int:
    from ...engine import EngineConfig
    from ...robot.build import ModelSource, build_engine
    from ..checkpoint import checkpoint_top_fovy
    from ..policy import policy_observation
    from .tasks import TASKS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--episodes", type=int, default=2)
    p.add_argument("--replan", type=int, default=16,
                   help="targets played per chunk (the node's chunk_replan_steps, without latency)")
    p.add_argument("--period", type=int, default=2, help="control periods per target (25 Hz: 2)")
    a = p.parse_args(argv)
    built = build_engine(ModelSource(checkpoint=a.checkpoint, threads=1),
                         EngineConfig(mode="isolated", memory_every_n_frames=0))
    engine, norm = built.engine, built.norm
    size = engine.model_config.vision.image_size
    fovy = checkpoint_top_fovy(a.checkpoint) or DEFAULT_TOP_FOVY  # the camera it was trained on
    results = []
    for ep in schedule(tuple(a.tasks), a.episodes, EVAL_BASE_SEED):
        env = AlohaEnv(ep.task, image_size=size, top_fovy=fovy)
        state, info, frames, t0 = env.reset(ep.seed), env.info, 0, time.perf_counter()
        while not (info.success or info.timed_out):
            obs = policy_observation(built, env.render(), state, ep.instruction, float(frames))
            chunk = norm.unnormalize_actions(engine.step(obs).actions)
            frames += 1
            for target in chunk[:a.replan]:
                for _ in range(a.period):
                    info = env.step(np.asarray(target, dtype=np.float64))
                    if info.success or info.timed_out:
                        break
                if info.success or info.timed_out:
                    break
            state = env.state()
        env.close()
        row = {"task": ep.task, "seed": ep.seed, "success": info.success, "stage": info.stage,
               "caption": info.caption, "periods": info.step, "frames": frames,
               "seconds": round(time.perf_counter() - t0, 1)}
        print(json.dumps(row), flush=True)
        results.append(row)
    for task in a.tasks:
        rs = [r for r in results if r["task"] == task]
        print(f"{task}: {sum(r['success'] for r in rs)}/{len(rs)} success, stages {[r['stage'] for r in rs]}")
    return 0
