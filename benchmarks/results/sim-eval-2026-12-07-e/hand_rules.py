"""Where the door tasks label "turning"/"pushing" with the hand away from the lock, and how a
rule that needs the hand at the lock while it moves changes the labels:

    python benchmarks/results/sim-eval-2026-12-07-e/hand_rules.py --checkpoint CKPT --episodes 20

Episodes, per door task: the scripted expert (layouts 0..39), the expert missing as
`oxygen-sim demos` misses (miss_offset / high_miss_offset, layouts 100..139), leaving as
`--leave-episodes` leaves (leave_point, layouts 200..239) and a policy driven as
`--policy-episodes` drives it (layouts 7,500,000+, delays 0..D in turn). Rules, each the best
stage of the last SHOWN_STEPS steps:
  moving   the hand-place rule, or the lock moved OBJECT_MOVED within the last SHOWN_STEPS steps
           (tasks.Task.caption today)
  held R   the hand-place rule, or the lock moved so with the hand within R of where it holds
           the lock (Task.hold_point; measured against the lock where it is
           now): tasks.Task.caption since, with R = MOVED_HAND_RADIUS
Prints, per rule and kind of episode: steps, steps labelled the moved stage, steps whose label
differs from `moving`, and the hand's median offset from that point (cm) where they differ, then
for `moving`'s moved-stage steps the distribution of the hand's distance to that point.
"""
from __future__ import annotations

import argparse
from collections import deque

import numpy as np

from oxygen_ros.sim import SimEnv, get_task
from oxygen_ros.sim.demos import PolicyDriver, high_miss_offset, leave_point, miss_offset
from oxygen_ros.sim.offline_eval import load_policy
from oxygen_ros.sim.tasks import OBJECT_MOVED, SHOWN_STEPS


def trace(env: SimEnv, seed: int, target_of, max_steps: int, leave=None) -> list[tuple]:
    """(hand-place stage, success, hand, lock) per step until success or the end; `leave` as
    demos.record_episode leaves."""
    env.reset(seed)
    start = env.raw_obs[4:7].copy()
    rows, hover = [], None
    for _ in range(max_steps):
        if leave is not None and hover is None and np.linalg.norm(env.raw_obs[4:7] - start) > leave[0]:
            hover = env.raw_obs[4:7] + leave[1]
        t = target_of()
        if hover is not None:
            t = np.array([*hover, t[3]])
        info = env.step(t)
        o = env.raw_obs
        rows.append((env.task.stage_of(o), info.success, o[0:3].copy(), o[4:7].copy()))
        if info.success or info.timed_out:
            break
    return rows


def labels(rows: list[tuple], contact: np.ndarray, radius: float | None) -> list[int]:
    out, done = [], False
    window: deque[int] = deque(maxlen=SHOWN_STEPS)
    locks: deque[np.ndarray] = deque(maxlen=SHOWN_STEPS + 1)
    for place, success, hand, lock in rows:
        locks.append(lock)
        moving = np.linalg.norm(lock - locks[0]) > OBJECT_MOVED
        if radius is not None:
            moving = moving and np.linalg.norm(hand - (lock + contact)) < radius
        window.append(max(place, 1 if moving else 0))
        done = done or success
        out.append(2 if done else max(window))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--max-delay", type=int, default=12)
    p.add_argument("--radii", type=float, nargs="+", default=[0.04, 0.05, 0.06, 0.08])
    a = p.parse_args()
    built = load_policy(a.checkpoint)  # before any SimEnv (osmesa)
    for name in ("door-unlock", "door-lock"):
        task = get_task(name)
        contact = np.asarray(task.hold_point)
        env = SimEnv(task)
        kinds: dict[str, list] = {"expert": [], "miss": [], "leave": [], "policy": []}
        for s in range(40):
            kinds["expert"].append(trace(env, s, env.expert_target, 400))
        for s in range(100, 140):
            aim = miss_offset(s) if s % 2 else high_miss_offset(s)
            kinds["miss"].append(trace(env, s, lambda: env.expert_target(aim), 80))
        for s in range(200, 240):
            kinds["leave"].append(trace(env, s, env.expert_target, 160, leave=leave_point(s)))
        fails = 0
        for e in range(a.episodes):
            d = PolicyDriver(built, delay=e % (a.max_delay + 1))
            r = trace(env, 7_500_000 + e, lambda: d.target(env), task.horizon)
            fails += not r[-1][1]
            kinds["policy"].append(r)
        env.close()
        print(f"{name}: policy-driven episodes failed {fails} of {a.episodes}")
        for kind, eps in kinds.items():
            base = [labels(r, contact, None) for r in eps]
            n = sum(len(b) for b in base)
            print(f"{name} {kind:6s} moving   : {len(eps)} episodes, {n} steps, "
                  f"moved stage {sum(x == 1 for b in base for x in b)}")
            for radius in a.radii:
                diff, offs, moved = 0, [], 0
                for r, b in zip(eps, base):
                    lab = labels(r, contact, radius)
                    moved += sum(x == 1 for x in lab)
                    for row, x, y in zip(r, b, lab):
                        if x != y:
                            diff += 1
                            offs.append(row[2] - (row[3] + contact))
                off = np.round(np.median(offs, axis=0) * 100, 1).tolist() if offs else None
                print(f"{name} {kind:6s} held {radius * 100:.0f}cm: moved stage {moved}, differ "
                      f"{diff}, hand - hold point where they differ (cm) {off}")
            dist = [np.linalg.norm(row[2] - (row[3] + contact)) * 100
                    for r, b in zip(eps, base) for row, x in zip(r, b) if x == 1]
            if dist:
                q = np.round(np.percentile(dist, [10, 50, 90, 99]), 1).tolist()
                print(f"{name} {kind:6s} moving's moved-stage steps: hand to hold point p10/50/90/99 (cm) {q}")
        print(flush=True)


if __name__ == "__main__":
    main()
