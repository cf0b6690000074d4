"""Record the scripted bimanual expert into a demonstration file (oxygen_ros/sim/dataset.py format).

    nice -n 10 oxygen-sim aloha demos --episodes 50 --out data/aloha_demos.npz

Per episode: the expert's joint trajectory for a layout seed (expert.joint_trajectory), replayed
in the joint-space robot; every `frame_stride` control periods the three cameras, the 14-value
state, the expert's absolute target and the stage caption of what the cameras show are recorded.
After success the replay goes on `after` periods (the expert's trajectory, then its last target):
every frame carries the stage its scene shows (env.AlohaEnv._shown), so no frame carries the
success caption before the simulator reports success, nor where the cameras cannot see it
(AlohaTask.success_shown: transfer-cube's hand-over is shown once the left gripper alone holds
the cube, about 1.8 s after gym-aloha's success, its first finger touch; insertion's never). A
frame after success whose scene has fallen below the stage before success (the cube dropped) is
recorded caption-only: the expert's open-loop motion goes on with nothing in hand, which is no
action to learn. Episodes that never succeed are left out (counted). Deterministic per seed: the
layout comes from the seed alone, the physics is deterministic, nothing else is random.
`--relabel IN` gives a recording older than version 4 (success captioned at gym-aloha's success)
the stage before it there (AlohaTask.memory_caption); a version 4 recording is refused.
Layout seeds: seed * 1_000_000 + task index * 10_000 + episode (evaluations use 1_000_000 + ...).

`--miss-episodes M` adds M caption-only episodes per task (layout seeds from episode 5000 on): the
expert's near miss on purpose (expert.miss_for: the left gripper meets the cube 1.5-6 cm off, the
peg comes to the socket 0.5-3 cm off), recorded from step MISS_FROM_STEP on (the hand-over and the
insertion), every frame captioned with the stage the scene shows, `caption_only` (no action loss:
their targets miss on purpose). Why: the expert passes the stage just before success within a
period or two ("handing the cube over": 0 of 26,723 frames; "inserting the peg": 0 of 7,167), so a
memory trained on its successes alone learnt that objects together means done, and said so in
failed episodes (docs/aloha.md, "Memory").
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ..dataset import Demos
from ..demos import relabel
from .env import (CONTROL_PERIOD_S, DEFAULT_CAMERAS, DEFAULT_IMAGE_SIZE, JOINT_NAMES, DEFAULT_TOP_FOVY,
                  AlohaEnv)
from .expert import EndEffectorScene, Miss, joint_trajectory, miss_for
from .tasks import TASKS, get_task

# 2: captions are the stage the scene shows (env._shown), near misses; 3: memory_caption;
# 4: success captioned only where the cameras show it (AlohaTask.success_shown), frames after a
# drop caption-only
RECORDER_VERSION = 4
MISS_SEED_OFFSET = 5000  # layout seeds of the near misses: never the successful ones'
MISS_FROM_STEP = 180  # before it a near miss is the expert's own motion (already recorded)
FRAME_STRIDE = 2  # control periods per frame: 25 Hz frames
ACTION_PERIOD_STEPS = 2  # control periods per chunk target: 25 Hz targets (the policy's rate)


def layout_seed(seed: int, task_index: int, episode: int) -> int:
    return seed * 1_000_000 + task_index * 10_000 + episode


def record_episode(env: AlohaEnv, scene: EndEffectorScene, seed: int, frame_stride: int = FRAME_STRIDE,
                   after: int = 10, miss: Miss | None = None, from_step: int = 0) -> dict:
    """One expert episode (with `miss`, its near miss) -> images [F, C, S, S, 3], state, target,
    step, captions, caption_only (frames after success showing less than the stage before it),
    success; frames from control period `from_step` on."""
    traj, _ = joint_trajectory(env.task, seed, scene, miss=miss)
    env.reset(seed)
    before_success = len(env.task.captions) - 2  # "handing the cube over", "inserting the peg"
    images, states, targets, steps, captions, dropped = [], [], [], [], [], []
    success_at = None
    for step in range(len(traj) + after):
        target = traj[min(step, len(traj) - 1)]
        if step % frame_stride == 0 and step >= from_step:
            images.append(env.render())
            states.append(env.state().astype(np.float32))
            targets.append(target.astype(np.float32))
            steps.append(step)
            captions.append(env.info.caption)
            dropped.append(success_at is not None and env.task.captions.index(env.info.caption) < before_success)
        info = env.step(target)
        if info.success and success_at is None:
            success_at = step + 1
        if success_at is not None and step + 1 >= success_at + after:
            break
        if success_at is None and step + 1 >= len(traj):
            break
    return {"images": np.stack(images), "state": np.stack(states), "target": np.stack(targets),
            "step": np.asarray(steps, dtype=np.int32), "captions": captions,
            "caption_only": np.asarray(dropped, dtype=bool),
            "success": success_at is not None, "success_step": success_at}


def record(task_names: list[str], episodes: int, seed: int = 0, frame_stride: int = FRAME_STRIDE,
           image_size: int = DEFAULT_IMAGE_SIZE, cameras: tuple[str, ...] = DEFAULT_CAMERAS,
           after: int = 10, first_episode: int = 0,
           top_fovy: float = DEFAULT_TOP_FOVY, miss_episodes: int = 0) -> tuple[Demos, dict]:
    """`episodes` expert episodes per task (the successful ones kept) from `first_episode` on,
    then `miss_episodes` caption-only near misses per task (all kept)."""
    tasks = [get_task(n) for n in task_names]
    captions = sorted({c for t in tasks for c in t.captions})
    cap_index = {c: i for i, c in enumerate(captions)}
    parts: dict[str, list] = {k: [] for k in ("images", "state", "target", "step", "episode", "task", "caption",
                                              "caption_only")}
    ep_task, ep_success, summary, kept = [], [], {}, 0
    t0 = time.perf_counter()
    for ti, task in enumerate(tasks):
        env, scene = AlohaEnv(task, image_size, cameras, top_fovy), EndEffectorScene(task)
        ok, when, failed, miss_frames, missed = 0, [], [], 0, 0
        task_index = list(TASKS).index(task.name)
        try:
            for e in range(first_episode, first_episode + episodes + miss_episodes):
                is_miss = e >= first_episode + episodes
                if is_miss:
                    # --first-episode moves the near misses' seeds on as the expert's
                    s = layout_seed(seed, task_index, MISS_SEED_OFFSET + e - episodes)
                    ep = record_episode(env, scene, s, frame_stride, after, miss_for(task, s), MISS_FROM_STEP)
                    missed += not ep["success"]
                    miss_frames += len(ep["step"])
                else:
                    s = layout_seed(seed, task_index, e)
                    ep = record_episode(env, scene, s, frame_stride, after)
                    if not ep["success"]:
                        failed.append(s)
                        continue
                    ok += 1
                    when.append(ep["success_step"])
                n = len(ep["step"])
                for k in ("images", "state", "target", "step"):
                    parts[k].append(ep[k])
                parts["episode"].append(np.full(n, kept, dtype=np.int32))
                parts["task"].append(np.full(n, ti, dtype=np.int16))
                parts["caption"].append(np.array([cap_index[c] for c in ep["captions"]], dtype=np.int16))
                parts["caption_only"].append(ep["caption_only"] | is_miss)
                ep_task.append(ti)
                ep_success.append(bool(ep["success"]))
                kept += 1
                print(f"{task.name} seed {s}{' (near miss)' if is_miss else ''}: "
                      f"success at step {ep['success_step']}", flush=True)
        finally:
            env.close()
        summary[task.name] = {"episodes": episodes, "successes": ok, "failed_seeds": failed,
                              "success_step_min_median_max": [int(min(when)), int(np.median(when)), int(max(when))]
                              if when else None,
                              "miss_episodes": miss_episodes, "missed": missed, "miss_frames": miss_frames}
    meta = {"seed": seed, "frame_stride": frame_stride, "image_size": image_size, "cameras": list(cameras),
            "top_fovy": float(top_fovy),
            "action_period_steps": ACTION_PERIOD_STEPS, "control_period_s": CONTROL_PERIOD_S,
            "joint_names": list(JOINT_NAMES), "after_success_steps": after, "simulator": "aloha",
            "recorder_version": RECORDER_VERSION, "episodes_per_task": episodes,
            "first_episode": first_episode, "miss_episodes_per_task": miss_episodes,
            "miss_from_step": MISS_FROM_STEP,
            "seconds": round(time.perf_counter() - t0, 1)}
    demos = Demos(**{k: np.concatenate(v) for k, v in parts.items()}, tasks=[t.name for t in tasks],
                  instructions=[t.instruction for t in tasks], captions=captions,
                  episode_success=np.asarray(ep_success, dtype=bool),
                  episode_task=np.asarray(ep_task, dtype=np.int16), meta=meta)
    summary["frames"] = len(demos)
    summary["seconds"] = meta["seconds"]
    return demos, summary


def merge(parts: list[Demos]) -> Demos:
    """Several recordings (e.g. one per task, recorded in parallel) as one dataset: episodes
    renumbered in order, task and caption indices mapped onto the union."""
    tasks = list(dict.fromkeys(t for d in parts for t in d.tasks))
    instr = {t: i for d in parts for t, i in zip(d.tasks, d.instructions)}
    captions = sorted({c for d in parts for c in d.captions})
    out: dict[str, list] = {k: [] for k in ("images", "state", "target", "step", "episode", "task", "caption",
                                            "caption_only")}
    ep_task, offset = [], 0
    for d in parts:
        if d.meta["frame_stride"] != parts[0].meta["frame_stride"] or d.images.shape[1:] != parts[0].images.shape[1:]:
            raise ValueError("recordings differ in frame stride or image layout")
        tmap = np.array([tasks.index(t) for t in d.tasks], dtype=np.int16)
        cmap = np.array([captions.index(c) for c in d.captions], dtype=np.int16)
        for k in ("images", "state", "target", "step"):
            out[k].append(getattr(d, k))
        out["episode"].append(d.episode + offset)
        out["task"].append(tmap[d.task])
        out["caption"].append(cmap[d.caption])
        out["caption_only"].append(d.caption_only)
        ep_task.append(tmap[d.episode_task])
        offset += len(d.episode_task)
    meta = dict(parts[0].meta, merged=[d.meta for d in parts])
    return Demos(**{k: np.concatenate(v) for k, v in out.items()}, tasks=tasks,
                 instructions=[instr[t] for t in tasks], captions=captions,
                 episode_success=np.concatenate([d.episode_success for d in parts]),
                 episode_task=np.concatenate(ep_task), meta=meta)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--episodes", type=int, default=50, help="episodes per task")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--first-episode", type=int, default=0,
                   help="episode index of the first (to add episodes to an earlier recording)")
    p.add_argument("--frame-stride", type=int, default=FRAME_STRIDE, help="control periods per frame")
    p.add_argument("--image-size", type=int, default=DEFAULT_IMAGE_SIZE)
    p.add_argument("--top-fovy", type=float, default=DEFAULT_TOP_FOVY,
                   help="the top camera's vertical field of view, degrees (the robot's --top-fovy)")
    p.add_argument("--after", type=int, default=10,
                   help="control periods recorded after success (transfer-cube's hand-over shows "
                        "about 90 periods after it: docs/aloha.md records 150)")
    p.add_argument("--miss-episodes", type=int, default=0,
                   help="caption-only near misses per task (the module docstring says why)")
    p.add_argument("--out", required=True)
    p.add_argument("--merge", nargs="+", default=None, metavar="NPZ",
                   help="instead of recording: merge these recordings into --out")
    p.add_argument("--relabel", default=None, metavar="NPZ",
                   help="instead of recording: this recording (recorder version < 4) with today's "
                        "memory labels (AlohaTask.memory_caption) into --out")
    a = p.parse_args(argv)
    if a.relabel:
        old = Demos.load(a.relabel)
        if old.meta.get("recorder_version", 1) >= 4:
            p.error(f"{a.relabel} is recorder version {old.meta['recorder_version']}: its captions are "
                    "already what the cameras show (AlohaTask.success_shown); nothing to relabel")
        demos, changed = relabel(old, get_task, RECORDER_VERSION)
        demos.save(a.out)
        print(json.dumps({"out": a.out, "from": a.relabel, "frames_relabelled": changed}))
        return 0
    if a.merge:
        demos = merge([Demos.load(f) for f in a.merge])
        demos.save(a.out)
        print(json.dumps({"out": a.out, "frames": len(demos), "tasks": demos.tasks,
                          "episodes": int(len(demos.episode_task))}))
        return 0
    if a.episodes < 0 or a.miss_episodes < 0 or a.episodes + a.miss_episodes < 1:
        p.error("--episodes and --miss-episodes must be >= 0 and record at least one episode")
    if ACTION_PERIOD_STEPS % a.frame_stride:
        p.error(f"--frame-stride must divide the action period ({ACTION_PERIOD_STEPS})")
    demos, summary = record(a.tasks, a.episodes, a.seed, a.frame_stride, a.image_size, after=a.after,
                            first_episode=a.first_episode, top_fovy=a.top_fovy,
                            miss_episodes=a.miss_episodes)
    out = demos.save(a.out)
    print(json.dumps({"out": str(out), **summary}, indent=1))
    return 0
