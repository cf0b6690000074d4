"""Does a task need the camera? Success of policies that ignore the image (ROS-free).

    oxygen-sim blind [--tasks ...] [--episodes 12]

- mean: the scripted expert's absolute targets, recorded on `episodes` layouts and averaged step
  by step, replayed open loop on `episodes` new layouts: about the best a policy without vision
  can learn from demonstrations;
- a fixed direction (down, forward, forward-down, left, right, 10 cm ahead of the hand every step,
  the gripper opening and closing every 0.25 s);
- hold: standing still.
The scripted expert's own successes and episode lengths (steps) on the first layouts come with them.
A task fit for the evaluation has low numbers in every column: otherwise a camera fed as BGR or a
policy that ignores its image can still succeed.
"""
from __future__ import annotations

import argparse

import numpy as np

from .tasks import ALL_TASKS, TASKS

DIRECTIONS = {"down": (0, 0, -1), "forward": (0, 1, 0), "forward-down": (0, 1, -1),
              "left": (-1, 0, 0), "right": (1, 0, 0)}


def blind_successes(task: str, episodes: int = 12, seed: int = 100) -> dict[str, object]:
    """Successes per blind policy, and the scripted expert's (`expert`, `expert_steps`: the
    shortest and longest successful episode) on the layouts the mean is made from."""
    from .env import GRIPPER_CLOSED, GRIPPER_OPEN, SimEnv

    env = SimEnv(task, image_size=16)
    horizon = env.task.horizon
    try:
        trajectories, steps = [], []
        for e in range(episodes):
            env.reset(seed + e)
            targets, done_at = [], None
            for k in range(horizon):  # keep going after success: every trajectory is `horizon` long
                target = env.expert_target()
                targets.append(target)
                if env.step(target).success and done_at is None:
                    done_at = k + 1
            trajectories.append(targets)
            if done_at is not None:
                steps.append(done_at)
        mean = np.mean(np.asarray(trajectories), axis=0)
        out: dict[str, object] = {"expert": len(steps),
                                  "expert_steps": f"{min(steps)}-{max(steps)}" if steps else "-"}
        for policy in ("mean", *DIRECTIONS, "hold"):
            ok = 0
            for e in range(episodes):
                start = env.reset(seed + 10_000 + e)
                for k in range(horizon):
                    if policy == "mean":
                        target = mean[k]
                    elif policy == "hold":
                        target = start
                    else:
                        grip = GRIPPER_OPEN if k % 40 < 20 else GRIPPER_CLOSED
                        target = np.array([*(env.state()[:3] + 0.1 * np.array(DIRECTIONS[policy])), grip])
                    info = env.step(target)
                    if info.success or info.timed_out:
                        break
                ok += int(info.success)
            out[policy] = ok
        return out
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(ALL_TASKS))
    p.add_argument("--episodes", type=int, default=12)
    args = p.parse_args(argv)
    cols = ("mean", *DIRECTIONS, "hold")
    print("| task | expert | expert steps | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * (len(cols) + 2))
    for task in args.tasks:
        r = blind_successes(task, args.episodes)
        print(f"| {task} | {r['expert']}/{args.episodes} | {r['expert_steps']} | "
              + " | ".join(f"{r[c]}/{args.episodes}" for c in cols) + " |", flush=True)
    return 0
