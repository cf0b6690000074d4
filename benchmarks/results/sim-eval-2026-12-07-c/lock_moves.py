"""When does a door lock move, and what did the hand-place stage rule (tasks._stage_door_*) say
then? For the scripted expert (layouts 0..39) and for a policy driven as `oxygen-sim demos
--policy-episodes` drives it (layouts 7,500,000+, delays 0..6 control steps in turn).

    python benchmarks/results/sim-eval-2026-12-07-c/lock_moves.py --checkpoint CKPT --episodes 20

Prints, per door task: the expert's hand-place rule step minus the lock's first 3 mm step
(negative: the rule fires first), and for the policy the steps whose lock had moved 3 mm from its
place at reset while the hand-place rule (latched: stages only move forward) still said the
first stage, with the hand's median
offset from the expert's contact point there.
"""
from __future__ import annotations

import argparse

import numpy as np

from oxygen_ros.sim import SimEnv, get_task
from oxygen_ros.sim.demos import PolicyDriver
from oxygen_ros.sim.offline_eval import load_policy
from oxygen_ros.sim.tasks import OBJECT_MOVED


def expert(name: str, layouts: int) -> np.ndarray:
    env = SimEnv(get_task(name), image_size=32)
    lead = []
    for seed in range(layouts):
        env.reset(seed)
        rest, rule, moved = env.raw_obs[4:7].copy(), None, None
        while True:
            info = env.step(env.expert_target())
            o = env.raw_obs
            if rule is None and env.task.stage_of(o) >= 1:
                rule = info.step
            if moved is None and np.linalg.norm(o[4:7] - rest) > OBJECT_MOVED:
                moved = info.step
            if info.success or info.timed_out:
                break
        lead.append((rule if rule is not None else info.step) - moved)
    env.close()
    return np.array(lead)


def policy(name: str, built, episodes: int) -> dict:
    env = SimEnv(get_task(name))
    steps = moved_steps = 0
    missed, episodes_hit, wins = [], set(), 0
    for e in range(episodes):
        env.reset(7_500_000 + e)
        rest, driver = env.raw_obs[4:7].copy(), PolicyDriver(built, delay=e % 7)
        latched = 0  # the hand-place rule's stage so far (stages only move forward)
        while True:
            info = env.step(driver.target(env))
            if info.success or info.timed_out:
                wins += info.success
                break
            o = env.raw_obs
            steps += 1
            latched = max(latched, env.task.stage_of(o))
            if np.linalg.norm(o[4:7] - rest) > OBJECT_MOVED:
                moved_steps += 1
                if latched == 0:
                    missed.append(o[0:3] - (o[4:7] + np.asarray(env.task.contact)))
                    episodes_hit.add(e)
    env.close()
    off = np.median(np.array(missed), axis=0) * 100 if missed else None
    return {"successes": wins, "episodes": episodes, "steps": steps, "lock_moved": moved_steps,
            "moved_but_rule_first_stage": len(missed), "in_episodes": len(episodes_hit),
            "hand_minus_contact_cm": None if off is None else np.round(off, 1).tolist()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--layouts", type=int, default=40, help="expert layouts")
    a = p.parse_args()
    built = load_policy(a.checkpoint)
    for name in ("door-unlock", "door-lock"):
        lead = expert(name, a.layouts)
        vals, counts = np.unique(lead, return_counts=True)
        print(f"{name}: expert, hand-place rule step minus first lock move step: "
              + ", ".join(f"{int(v)}: {c}" for v, c in zip(vals, counts)))
        print(f"{name}: policy {a.checkpoint}: {policy(name, built, a.episodes)}", flush=True)


if __name__ == "__main__":
    main()
