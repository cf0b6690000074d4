"""Offline checks of a trained simulator policy, served by the engine exactly as the node does
(robot/build.py build_engine on the checkpoint folder), without ROS and without wall-clock timing.

    oxygen-sim offline-eval --checkpoint checkpoints/sim-policy \
        --data data/sim_demos.npz --frames 200 --episodes 10

- open loop: on held-out demonstration frames (the episodes training.json lists as held out),
  the error of the served chunk against the expert's targets (mm for x, y, z; opening for the
  gripper), and how often the memory text equals the frame's stage caption;
- closed loop: episodes of each task driven by the policy alone. The simulator waits for the
  model here (no latency cost); each chunk's first `--replan` targets are played, each held for
  ACTION_PERIOD_STEPS control steps. Layout seeds 9_000_000 + task * 10_000 + episode never
  meet the recorder's.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from .policy import ACTION_PERIOD_STEPS, EVAL_SEED_BASE, policy_observation as _observation

def load_policy(checkpoint: str | Path, memory: bool = False, denoise_steps: int = 10,
                seed: int = 0, threads: int = 1):
    """The engine on the checkpoint (as the node builds it) -> BuiltEngine."""
    from ..engine import EngineConfig
    from ..robot.build import ModelSource, build_engine

    n = 12
    cfg = EngineConfig(mode="isolated", denoise_steps=denoise_steps, seed=seed,
                       memory_every_n_frames=1 if memory else 0, max_decode_steps=n,
                       decode_steps_per_frame=n)
    return build_engine(ModelSource(checkpoint=str(checkpoint), threads=threads), cfg)


def open_loop(checkpoint: str | Path, data: str | Path, frames: int = 200, seed: int = 0) -> dict:
    """Served chunks and memory texts on held-out frames against the demonstrations."""
    from ..bench.compare import collect_requests
    from .dataset import Demos

    demos = Demos.load(data)
    info = json.loads((Path(checkpoint) / "training.json").read_text())
    held_all = np.isin(demos.episode, info["held_out_episodes"])
    # the expert's own frames: a caption-only (missing) frame's target is wrong on purpose, a
    # policy-driven one's is the expert's from where the policy took the hand
    held = np.flatnonzero(held_all & demos.expert_frames)
    if not len(held):
        raise ValueError("the checkpoint's training.json lists no held-out episodes in this data")
    pick = held[np.linspace(0, len(held) - 1, min(frames, len(held))).astype(int)]
    built = load_policy(checkpoint, memory=True, seed=seed)
    engine, stats = built.engine, built.norm
    horizon = engine.model_config.action_horizon
    chunks = demos.chunk_index(horizon)
    errors, outputs = [], []
    for f, i in enumerate(pick):
        obs = _observation(built, demos.images[i], demos.state[i],
                           demos.instructions[int(demos.task[i])], float(f))
        out = engine.step(obs)
        outputs.append(out)
        pred = stats.unnormalize_actions(out.actions)
        errors.append(np.abs(pred - demos.target[chunks[i]]))
    outputs += engine.drain(max_frames=200)
    texts = {r["frame"]: engine.tokenizer.decode(r["tokens"]) for r in collect_requests(outputs)}
    truth = [demos.captions[int(demos.caption[i])] for i in pick]
    said = [texts.get(f, "").strip() for f in range(len(pick))]
    err = np.stack(errors)  # [F, H, 4]
    per_task = {}
    for t, name in enumerate(demos.tasks):
        m = demos.task[pick] == t
        if m.any():
            per_task[name] = {"frames": int(m.sum()),
                              "xyz_mae_mm": round(float(err[m, :, :3].mean() * 1000), 2),
                              "caption_accuracy": round(float(np.mean(
                                  [s == c for s, c, k in zip(said, truth, m) if k])), 3)}
    return {
        "frames": int(len(pick)),
        "xyz_mae_mm": round(float(err[:, :, :3].mean() * 1000), 2),
        "xyz_mae_first_mm": round(float(err[:, 0, :3].mean() * 1000), 2),
        "gripper_mae": round(float(err[:, :, 3].mean()), 4),
        "caption_accuracy": round(float(np.mean([s == c for s, c in zip(said, truth)])), 3),
        "caption_examples": [[c, s] for c, s in list(zip(truth, said))[:: max(1, len(pick) // 8)]],
        "per_task": per_task,
        "missing": _missing_captions(built, demos, np.flatnonzero(held_all & ~demos.expert_frames),
                                     frames),
    }


def _missing_captions(built, demos, frames_idx: np.ndarray, frames: int) -> dict | None:
    """On held-out caption-only frames (the expert aiming beside the object): how often the
    memory text is the frame's caption, and how often it claims success that did not happen."""
    from ..bench.compare import collect_requests
    from .tasks import get_task

    if not len(frames_idx):
        return None
    pick = frames_idx[np.linspace(0, len(frames_idx) - 1, min(frames, len(frames_idx))).astype(int)]
    engine = built.engine
    outputs = []
    for f, i in enumerate(pick):
        outputs.append(engine.step(_observation(built, demos.images[i], demos.state[i],
                                                demos.instructions[int(demos.task[i])], float(f))))
    outputs += engine.drain(max_frames=200)
    # the engine's frame numbers go on from the open-loop check's: key the texts by this part's
    first = outputs[0].frame
    texts = {r["frame"] - first: engine.tokenizer.decode(r["tokens"]).strip()
             for r in collect_requests(outputs)}
    truth = [demos.captions[int(demos.caption[i])] for i in pick]
    said = [texts.get(f, "") for f in range(len(pick))]
    done = [get_task(demos.tasks[int(demos.task[i])]).done for i in pick]
    false = sum(s == d and c != d for s, c, d in zip(said, truth, done))
    return {"frames": int(len(pick)),
            "caption_accuracy": round(float(np.mean([s == c for s, c in zip(said, truth)])), 3),
            "success_claimed_without_success": int(false)}


PROBES = {  # what the camera feeds the policy: the image as is, or a plumbing fault
    "none": lambda img: img,
    "bgr": lambda img: np.ascontiguousarray(img[..., ::-1]),  # channels swapped
    "black": lambda img: np.zeros_like(img),  # no picture at all: what the state alone gives
}


def closed_loop(checkpoint: str | Path, task_names: list[str], episodes: int, replan: int = 4,
                seed: int = 0, image_size: int | None = None, probe: str = "none") -> dict:
    """Success of each task over `episodes` policy-driven episodes (the sim waits for the model).
    `probe`: feed the camera as is ("none"), as BGR, or black (PROBES)."""
    if probe not in PROBES:
        raise ValueError(f"probe must be one of {sorted(PROBES)}, got {probe!r}")
    see = PROBES[probe]
    from . import SimEnv, get_task

    built = load_policy(checkpoint, memory=False, seed=seed)
    engine, stats = built.engine, built.norm
    size = image_size or engine.model_config.vision.image_size
    horizon = engine.model_config.action_horizon
    if not 1 <= replan <= horizon:
        raise ValueError(f"replan must be 1..{horizon}")
    results = {}
    for ti, name in enumerate(task_names):
        task = get_task(name)
        env = SimEnv(task, image_size=size)
        wins, steps, frames = [], [], 0
        try:
            for e in range(episodes):
                state = env.reset(EVAL_SEED_BASE + ti * 10_000 + e)
                info = env.info
                done = False
                while not done:
                    obs = _observation(built, see(env.render()), state, task.instruction,
                                       float(frames))
                    chunk = stats.unnormalize_actions(engine.step(obs).actions)
                    frames += 1
                    info, done = env.play(chunk[:replan], ACTION_PERIOD_STEPS)
                    state = env.state()
                wins.append(bool(info.success))
                steps.append(int(info.step))
        finally:
            env.close()
        results[name] = {"episodes": episodes, "successes": int(sum(wins)),
                         "success_rate": round(float(np.mean(wins)), 3),
                         "mean_steps_success": round(float(np.mean([s for s, w in zip(steps, wins)
                                                                    if w])), 1) if any(wins) else None}
    return results


def main(argv: list[str] | None = None) -> int:
    from . import ALL_TASKS, TASKS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data", default=None, help="dataset for the open-loop check (held-out episodes)")
    p.add_argument("--frames", type=int, default=200, help="held-out frames (open loop)")
    p.add_argument("--episodes", type=int, default=0, help="closed-loop episodes per task")
    p.add_argument("--tasks", default="all")
    p.add_argument("--replan", type=int, default=4, help="chunk targets played before the next")
    p.add_argument("--probe", default="none", choices=sorted(PROBES),
                   help="closed loop: feed the camera as is, as BGR, or black")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    a = p.parse_args(argv)
    result: dict = {"checkpoint": a.checkpoint}
    t0 = time.perf_counter()
    if a.data:
        result["open_loop"] = open_loop(a.checkpoint, a.data, a.frames)
        print(json.dumps(result["open_loop"], indent=2), flush=True)
    if a.episodes:
        names = list(TASKS) if a.tasks == "all" else a.tasks.split(",")
        result["closed_loop"] = closed_loop(a.checkpoint, names, a.episodes, a.replan,
                                            probe=a.probe)
        result["closed_loop_replan"], result["probe"] = a.replan, a.probe
        print(json.dumps(result["closed_loop"], indent=2), flush=True)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=2))
    return 0
