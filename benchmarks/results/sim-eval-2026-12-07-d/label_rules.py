"""How door-task stage labels change when the label is the stage the scene shows now (the best
stage of the last W control steps, as the ALOHA simulator's) instead of the furthest stage of
the episode, and which "the lock is being turned" condition goes with it:

    python benchmarks/results/sim-eval-2026-12-07-d/label_rules.py --checkpoint CKPT --episodes 20

Episodes, per door task: the scripted expert (layouts 0..39), the expert missing as
`oxygen-sim demos` misses (miss_offset, high_miss_offset: layouts 100..139) and a policy driven
as `--policy-episodes` drives it (layouts 7,500,000+, delays 0..6 in turn). Rules:
  latched  the furthest stage so far (tasks.Task.caption with the lock moved 3 mm from its place
           at reset; the labels before this change)
  moving   the best of the last W steps of: the hand-place rule, or the lock moved 3 mm within
           the last W steps (it is being moved now)
  near     the best of the last W steps of: the hand-place rule, or the lock moved 3 mm from its
           place at reset with the hand within R of the contact point
  both     the best of the last W steps of: the hand-place rule, moving, or near
Prints, per rule and kind of episode: labelled steps, steps whose label differs from latched,
label changes back to an earlier stage (per episode), and the hand's median offset from the
contact point (cm) where the label differs.
"""
from __future__ import annotations

import argparse
from collections import deque

import numpy as np

from oxygen_ros.sim import SimEnv, get_task
from oxygen_ros.sim.demos import PolicyDriver, high_miss_offset, miss_offset
from oxygen_ros.sim.offline_eval import load_policy
from oxygen_ros.sim.tasks import OBJECT_MOVED

W = 16  # control steps: 0.2 s, the ALOHA simulator's 10 periods of 20 ms


def trace(env: SimEnv, seed: int, target_of, max_steps: int) -> list[tuple]:
    """(hand-place stage, success, hand, lock, lock at reset) per step until success or the end."""
    env.reset(seed)
    start = env.raw_obs[4:7].copy()
    rows = []
    for _ in range(max_steps):
        info = env.step(target_of())
        o = env.raw_obs
        rows.append((env.task.stage_of(o), info.success, o[0:3].copy(), o[4:7].copy(), start))
        if info.success or info.timed_out:
            break
    return rows


def labels(rows: list[tuple], contact: np.ndarray, rule: str, radius: float) -> list[int]:
    out, done, best = [], False, 0
    window: deque[int] = deque(maxlen=W)
    locks: deque[np.ndarray] = deque(maxlen=W + 1)
    for place, success, hand, lock, start in rows:
        locks.append(lock)
        moved_start = np.linalg.norm(lock - start) > OBJECT_MOVED
        if rule == "latched":
            best = max(best, place, 1 if moved_start else 0)
            stage = best
        else:
            moving = np.linalg.norm(lock - locks[0]) > OBJECT_MOVED
            near = moved_start and np.linalg.norm(hand - (lock + contact)) < radius
            turned = {"moving": moving, "near": near, "both": moving or near}[rule]
            window.append(max(place, 1 if turned else 0))
            stage = max(window)
        done = done or success
        out.append(2 if done else stage)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--radius", type=float, default=0.06)
    a = p.parse_args()
    built = load_policy(a.checkpoint)  # before any SimEnv (osmesa)
    for name in ("door-unlock", "door-lock"):
        task = get_task(name)
        contact = np.asarray(task.contact)
        env = SimEnv(task)
        kinds: dict[str, list] = {"expert": [], "miss": [], "policy": []}
        for s in range(40):
            kinds["expert"].append(trace(env, s, env.expert_target, 400))
        for s in range(100, 140):
            aim = miss_offset(s) if s % 2 else high_miss_offset(s)
            kinds["miss"].append(trace(env, s, lambda: env.expert_target(aim), 80))
        for e in range(a.episodes):
            d = PolicyDriver(built, delay=e % 7)
            kinds["policy"].append(trace(env, 7_500_000 + e, lambda: d.target(env), 400))
        env.close()
        for kind, eps in kinds.items():
            base = [labels(r, contact, "latched", a.radius) for r in eps]
            for rule in ("moving", "near", "both"):
                n = diff = back = 0
                offs = []
                for r, b in zip(eps, base):
                    lab = labels(r, contact, rule, a.radius)
                    n += len(lab)
                    back += sum(y < x for x, y in zip(lab, lab[1:]))
                    for row, x, y in zip(r, b, lab):
                        if x != y:
                            diff += 1
                            offs.append(row[2] - (row[3] + contact))
                off = np.round(np.median(offs, axis=0) * 100, 1).tolist() if offs else None
                print(f"{name} {kind:6s} {rule:6s}: {len(eps)} episodes, {n} steps, differ from "
                      f"latched {diff}, back to an earlier stage {back} ({back / len(eps):.2f} per "
                      f"episode), hand - contact where they differ (cm) {off}", flush=True)


if __name__ == "__main__":
    main()
