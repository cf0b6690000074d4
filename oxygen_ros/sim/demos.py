"""Record scripted-expert demonstrations into a dataset file (oxygen_ros/sim/dataset.py).

    python -m oxygen_ros.sim.demos --episodes 100 --seed 0 --out data/sim_demos.npz

Each episode: a new layout from its own seed, then every `frame_stride` control steps the camera
image, the state, the expert's ABSOLUTE target (env.expert_target: target_from_expert of the
scripted action) and the stage caption are recorded, and the robot is driven by that target.
After the simulator reports success the expert goes on for `--after` more steps, recorded with
the success caption, so the policy learns to hold still and say the task is done. Episodes that
time out are left out (counted in the summary). Layout seeds: seed * 1_000_000 + task * 10_000 +
episode, so evaluation seeds elsewhere (oxygen_ros/sim/offline_eval.py) never overlap them.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from .dataset import Demos
from .policy import IMAGE_SIZE

RECORDER_VERSION = 1


def layout_seed(seed: int, task_index: int, episode: int) -> int:
    return seed * 1_000_000 + task_index * 10_000 + episode


def record_episode(env, seed: int, frame_stride: int = 1, after: int = 8) -> dict:
    """One expert episode -> arrays (images, state, target, step, caption text) and success."""
    env.reset(seed)
    images, states, targets, steps, captions = [], [], [], [], []
    success_at = None
    step = 0
    while True:
        target = env.expert_target()
        if step % frame_stride == 0:
            images.append(env.render())
            states.append(env.state().astype(np.float32))
            targets.append(target.astype(np.float32))
            steps.append(step)
            captions.append(env.info.caption)
        info = env.step(target)
        step += 1
        if info.success and success_at is None:
            success_at = step
        if success_at is not None and step >= success_at + after:
            break
        if success_at is None and info.timed_out:
            break
    return {"images": np.stack(images), "state": np.stack(states), "target": np.stack(targets),
            "step": np.asarray(steps, dtype=np.int32), "captions": captions,
            "success": success_at is not None, "success_step": success_at, "steps": step}


def record(task_names: list[str], episodes: int, seed: int, frame_stride: int = 1,
           image_size: int = IMAGE_SIZE, camera: str | None = None, after: int = 8,
           progress: bool = True) -> tuple[Demos, dict]:
    """Record `episodes` expert episodes per task; returns the dataset (successful episodes
    only) and a summary."""
    from . import DEFAULT_CAMERA, SimEnv, get_task

    camera = camera or DEFAULT_CAMERA
    tasks = [get_task(n) for n in task_names]
    captions = sorted({c for t in tasks for c in t.captions})
    cap_index = {c: i for i, c in enumerate(captions)}
    parts: dict[str, list] = {k: [] for k in ("images", "state", "target", "step", "episode",
                                              "task", "caption")}
    ep_success, ep_task, summary = [], [], {}
    t0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=episodes * len(tasks), desc="demos", unit="ep")
    kept = 0
    for ti, task in enumerate(tasks):
        env = SimEnv(task, image_size=image_size, camera=camera)
        ok, lengths = 0, []
        try:
            for e in range(episodes):
                ep = record_episode(env, layout_seed(seed, ti, e), frame_stride, after)
                if bar is not None:
                    bar.update(1)
                if not ep["success"]:
                    continue
                ok += 1
                lengths.append(ep["steps"])
                n = len(ep["step"])
                for k in ("images", "state", "target", "step"):
                    parts[k].append(ep[k])
                parts["episode"].append(np.full(n, kept, dtype=np.int32))
                parts["task"].append(np.full(n, ti, dtype=np.int16))
                parts["caption"].append(np.array([cap_index[c] for c in ep["captions"]],
                                                 dtype=np.int16))
                ep_success.append(True)
                ep_task.append(ti)
                kept += 1
        finally:
            env.close()
        summary[task.name] = {"episodes": episodes, "successes": ok,
                              "median_steps": float(np.median(lengths)) if lengths else None}
    if bar is not None:
        bar.close()
    meta = {"seed": seed, "frame_stride": frame_stride, "image_size": image_size, "camera": camera,
            "after_success_steps": after, "recorder_version": RECORDER_VERSION,
            "episodes_per_task": episodes, "seconds": round(time.perf_counter() - t0, 1)}
    demos = Demos(**{k: np.concatenate(v) for k, v in parts.items()},
                  tasks=[t.name for t in tasks], instructions=[t.instruction for t in tasks],
                  captions=captions, episode_success=np.asarray(ep_success, dtype=bool),
                  episode_task=np.asarray(ep_task, dtype=np.int16), meta=meta)
    summary["frames"] = len(demos)
    summary["seconds"] = meta["seconds"]
    return demos, summary


def main(argv: list[str] | None = None) -> int:
    from . import ALL_TASKS, TASKS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default="all", help=f"comma-separated, or all ({', '.join(TASKS)})")
    p.add_argument("--episodes", type=int, default=100, help="episodes per task")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--frame-stride", type=int, default=1, help="record every n-th control step")
    p.add_argument("--image-size", type=int, default=IMAGE_SIZE)
    p.add_argument("--camera", default=None, help="Meta-World camera (default: the sim's)")
    p.add_argument("--after", type=int, default=8, help="steps recorded after success")
    p.add_argument("--out", required=True, help="dataset file (.npz)")
    a = p.parse_args(argv)
    names = list(TASKS) if a.tasks == "all" else a.tasks.split(",")
    unknown = [n for n in names if n not in ALL_TASKS]
    if unknown:
        p.error(f"unknown tasks {unknown}; known: {', '.join(ALL_TASKS)}")
    if a.episodes < 1:
        p.error("--episodes must be >= 1")
    demos, summary = record(names, a.episodes, a.seed, a.frame_stride, a.image_size, a.camera,
                            a.after)
    out = demos.save(a.out)
    print(json.dumps({"out": str(out), **summary}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
