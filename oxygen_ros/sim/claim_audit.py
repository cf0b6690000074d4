"""Where completion claims come from: the demonstrations' labels, and a policy's captions on the
expert's frames and on its own (ROS-free; the simulator waits for the model).

    oxygen-sim claim-audit --checkpoint checkpoints/sim-policy --episodes 10

A completion claim is a caption that says the task is done (the task's `done` caption). It is
false when its observation was taken more than CLAIM_SLACK_S before the simulator reported
success, or in an episode that never succeeds (metrics.claim_verdicts). The checks, each per
task, on layouts no demonstration used (offline_eval's seeds + 500):

- labels: scripted-expert episodes recorded exactly as demos.record_episode records them; how
  many frames carry the done caption before the simulator reports success (the labelling rule
  says none), and how long each stage lasts;
- expert frames: the policy captions every recorded frame of those episodes (the expert drives):
  its claims, and how many come before success / more than CLAIM_SLACK_S before it;
- own frames: the policy drives (each chunk's first `replan` targets), captioning every frame:
  its claims, the false ones and the true stage they were made in, and the stage accuracy;
- visibility: how many pixels of the camera image the completion changes at the success step
  (completion_pixels): whether a memory can see it at all (Task.done_visible);
- missing frames: the expert aims beside the object or too high (demos.miss_offset), as a
  failing policy does, and the policy captions every frame: a claim there is false unless the
  simulator reported success. This is where the policy's early claims came from through the node
  (its failed episodes): a hand where success would put it, the object not done.

    oxygen-sim claim-audit --bag RUN/bags/SETTING/SETTING.mcap

reads an oxygen-sim eval bag instead and lists every false completion claim with its episode,
the episode's outcome, the time it was said about and where the hand was then, relative to the
object's contact point (Task.contact: where the hand is when the object starts to move; the
layout is remade from the episode's seed).
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from .env import CONTROL_PERIOD_S
from .episodes import Status, stamp_ns
from .metrics import CLAIM_SLACK_S, MemoryCheck, Timeline, check_memory, claim_is_true
from .policy import ACTION_PERIOD_STEPS, EVAL_SEED_BASE, policy_observation

AUDIT_SEED_OFFSET = 500  # beside offline_eval's and the demo's layouts (EVAL_SEED_BASE + e)
SLACK_STEPS = int(round(CLAIM_SLACK_S / CONTROL_PERIOD_S))


def _memory_engine(checkpoint: str | Path, seed: int = 0):
    """The engine as the node builds it, every frame's memory text decoded within the frame."""
    from ..engine import EngineConfig
    from ..robot.build import ModelSource, build_engine

    n = 12
    cfg = EngineConfig(mode="isolated", seed=seed, memory_every_n_frames=1, max_decode_steps=n,
                       decode_steps_per_frame=n)
    return build_engine(ModelSource(checkpoint=str(checkpoint), threads=1), cfg)


def _caption(built, image: np.ndarray, state: np.ndarray, instruction: str, frame: int) -> tuple[str, np.ndarray]:
    """The memory text born on this frame (drained here) and the frame's chunk."""
    engine = built.engine
    outs = [engine.step(policy_observation(built, image, state, instruction, float(frame)))]
    outs += engine.drain(max_frames=50)
    tokens: list[int] = []
    for o in outs:
        for u in o.updates:
            if u.kind == "memory":
                tokens.extend(u.new_tokens)
    return engine.tokenizer.decode(tokens).strip(), built.norm.unnormalize_actions(outs[0].actions)


def audit_labels(task_name: str, seeds: list[int], frame_stride: int = 2) -> tuple[dict, list[dict]]:
    """Expert episodes as the recorder records them: done-labelled frames before success."""
    from . import SimEnv, get_task
    from .demos import record_episode

    task = get_task(task_name)
    env = SimEnv(task)
    episodes, early, done_frames, frames = [], 0, 0, 0
    stage_steps: dict[str, list[int]] = {c: [] for c in task.captions}
    try:
        for seed in seeds:
            ep = record_episode(env, seed, frame_stride)
            success_step = ep["success_step"]
            caps = ep["captions"]
            frames += len(caps)
            done_frames += sum(c == task.done for c in caps)
            early += sum(c == task.done and (success_step is None or s < success_step)
                         for c, s in zip(caps, ep["step"]))
            for c in task.captions:
                stage_steps[c].append(int(sum(x == c for x in caps)) * frame_stride)
            episodes.append({**ep, "seed": seed, "success_step": success_step})
    finally:
        env.close()
    return ({"episodes": len(seeds), "successes": sum(e["success"] for e in episodes),
             "frames": frames, "done_labelled": done_frames, "done_labelled_before_success": early,
             "median_steps_per_stage": {c: float(np.median(v)) for c, v in stage_steps.items()}},
            episodes)


def _score_captions(built, task, episodes: Iterable[dict]) -> dict:
    """The policy's caption of every frame of `episodes` against the frame's true stage: stage
    accuracy, completion claims, those before the episode's success and those false (before it by
    more than SLACK_STEPS, or in an episode that never succeeded), the false ones by true stage."""
    claims = before = false = right = n = 0
    false_stages: dict[str, int] = {}
    for ep in episodes:
        s = ep["success_step"]
        for f, (img, st, step, cap) in enumerate(zip(ep["images"], ep["state"], ep["step"], ep["captions"])):
            text, _ = _caption(built, img, st, task.instruction, f)
            n += 1
            right += text == cap
            if text != task.done:
                continue
            claims += 1
            if s is None or step < s:
                before += 1
            if s is None or step < s - SLACK_STEPS:
                false += 1
                false_stages[cap] = false_stages.get(cap, 0) + 1
    return {"frames": n, "stage_accuracy": right / n if n else None, "claims": claims,
            "claims_before_success": before, "claims_false": false,
            "false_claims_by_true_stage": false_stages}


def audit_expert_frames(built, task_name: str, episodes: list[dict]) -> dict:
    """The policy's captions on the expert's recorded frames."""
    from . import get_task

    return _score_captions(built, get_task(task_name), episodes)


def audit_own_frames(built, task_name: str, seeds: list[int], replan: int = 4) -> dict:
    """The policy drives and captions every frame (the sim waits for it)."""
    from . import SimEnv, get_task

    task = get_task(task_name)
    env = SimEnv(task, image_size=built.engine.model_config.vision.image_size)
    rows: list[tuple[int, int, str, str]] = []  # episode, step, true caption, text
    outcome: list[int | None] = []  # success step per episode
    frame = 0
    try:
        for e, seed in enumerate(seeds):
            state = env.reset(seed)
            info, done = env.info, False
            while not done:
                text, chunk = _caption(built, env.render(), state, task.instruction, frame)
                rows.append((e, info.step, info.caption, text))
                frame += 1
                info, done = env.play(chunk[:replan], ACTION_PERIOD_STEPS)
                state = env.state()
            outcome.append(info.step if info.success else None)
    finally:
        env.close()
    claims = false = right = 0
    false_stages: dict[str, int] = {}
    false_in_failed = 0
    for e, step, cap, text in rows:
        right += text == cap
        if text != task.done:
            continue
        claims += 1
        s = outcome[e]
        if s is None or step < s - SLACK_STEPS:
            false += 1
            false_in_failed += s is None
            false_stages[cap] = false_stages.get(cap, 0) + 1
    return {"episodes": len(seeds), "successes": sum(s is not None for s in outcome),
            "frames": len(rows), "stage_accuracy": right / len(rows) if rows else None,
            "claims": claims, "claims_false": false, "false_in_failed_episodes": false_in_failed,
            "claim_precision": (claims - false) / claims if claims else None,
            "false_claims_by_true_stage": false_stages}


def _plain(x):
    """numpy scalars -> Python numbers for JSON."""
    return x.item()


def audit_missing_frames(built, task_name: str, seeds: list[int], max_steps: int = 100) -> dict:
    """The policy's captions on missing expert episodes (never shown in training: other seeds)."""
    from . import SimEnv, get_task
    from .demos import miss_offset, record_episode

    task = get_task(task_name)
    env = SimEnv(task)
    try:
        r = _score_captions(built, task, (record_episode(env, seed, 2, aim_offset=miss_offset(seed),
                                                         max_steps=max_steps) for seed in seeds))
    finally:
        env.close()
    return {"episodes": len(seeds), **{k: r[k] for k in ("frames", "stage_accuracy", "claims", "claims_false",
                                                          "false_claims_by_true_stage")}}


def completion_pixels(task_name: str, seeds: list[int], threshold: int = 30) -> dict:
    """Does the camera show the completion? At each expert episode's success step, the scene is
    rendered again with the objects' joints put back to their start (the hand unchanged) and the
    pixels that differ by more than `threshold` (of 255, any channel) are counted: the part of
    the picture that tells done from not done."""
    import mujoco

    from . import SimEnv

    env = SimEnv(task_name)
    sim = env._env.unwrapped
    arm = 9  # Sawyer's 7 arm joints and 2 fingers come first in qpos; the objects' follow
    counts = []
    try:
        for seed in seeds:
            env.reset(seed)
            start = sim.data.qpos.copy()
            while not (env.info.success or env.info.timed_out):
                env.step(env.expert_target())
            if not env.info.success:
                continue
            done_img = env.render().astype(np.int16)
            now = sim.data.qpos.copy()
            sim.data.qpos[arm:] = start[arm:]
            mujoco.mj_forward(sim.model, sim.data)
            start_img = env.render().astype(np.int16)
            sim.data.qpos[:] = now
            mujoco.mj_forward(sim.model, sim.data)
            counts.append(int((np.abs(done_img - start_img).max(axis=2) > threshold).sum()))
    finally:
        env.close()
    return {"episodes": len(counts),
            "changed_pixels_median": float(np.median(counts)) if counts else None,
            "changed_pixels_min": min(counts, default=None),
            "changed_pixels_max": max(counts, default=None),
            "image_pixels": int(done_img.shape[0] * done_img.shape[1]) if counts else None,
            "done_visible": env.task.done_visible}


CHECKS = ("labels", "expert", "own", "missing", "visibility")


@dataclass(frozen=True)
class EvalBag:
    """What an oxygen-sim eval bag holds: the sim's statuses in time order and on a Timeline,
    every final memory text checked against the scene of its source observation (texts whose
    scene is unknown left out), and, when asked for, the joint states (stamp ns, position)."""

    statuses: list[Status]
    timeline: Timeline
    memory: list[MemoryCheck]
    joints: list[tuple[int, np.ndarray]]


def read_eval_bag(bag: str | Path, joints: bool = False) -> EvalBag:
    from ..bags.reader import read_bag

    topics = ["/sim/episode", "/oxygen/memory"] + (["/sim/joint_states"] if joints else [])
    b = read_bag(bag, topics=topics)
    statuses = sorted((Status.from_json(m.data) for _, m in b.get("/sim/episode")),
                      key=lambda x: x.stamp_ns)
    timeline = Timeline()
    for st in statuses:
        timeline.add(st.stamp_ns, st.task, st.caption, st.episode, st.success)
    memory = []
    for _, m in b.get("/oxygen/memory"):
        if not (m.is_final and m.kind == "memory"):
            continue
        stamp = stamp_ns(m.header.stamp)
        scene = timeline.scene_at(stamp)
        if scene is not None:
            memory.append(check_memory(m.text, scene, stamp))
    states = [(stamp_ns(m.header.stamp), np.asarray(m.position))
              for _, m in (b.get("/sim/joint_states") if joints else [])]
    return EvalBag(statuses, timeline, memory, states)


def bag_false_claims(bag: str | Path) -> list[dict]:
    """Every false completion claim in an oxygen-sim eval bag (metrics.claim_is_true), with the
    hand's offset from the object at the claim's source observation."""
    import bisect

    from . import SimEnv

    eb = read_eval_bag(bag, joints=True)
    final = {st.episode: st for st in eb.statuses if st.done}
    success = {e: eb.timeline.success_ns.get(e) for e in final}
    jt = [t for t, _ in eb.joints]
    envs: dict[str, SimEnv] = {}
    rows = []
    try:
        for check in eb.memory:
            if not check.claims_done or claim_is_true(check, success):
                continue
            stamp = check.stamp_ns
            st = final.get(check.episode)
            j = bisect.bisect_right(jt, stamp) - 1
            env = envs.setdefault(check.task, SimEnv(check.task))
            env.reset(st.seed if st else 0)
            contact = env.raw_obs[4:7] + np.asarray(env.task.contact)  # where the push starts
            hand = eb.joints[j][1][:3] - contact if j >= 0 and st else None
            rows.append({"task": check.task, "episode": check.episode, "text": check.text.strip(),
                         "true_stage": check.caption,
                         "episode_succeeded": bool(st.success) if st else None,
                         "before_success_s": round((success[check.episode] - stamp) / 1e9, 2)
                         if success.get(check.episode) else None,
                         "hand_minus_contact_m": None if hand is None else np.round(hand, 3).tolist()})
    finally:
        for env in envs.values():
            env.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    from . import TASKS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default=None)
    p.add_argument("--bag", default=None, help="list the false claims of an oxygen-sim eval bag")
    p.add_argument("--episodes", type=int, default=10, help="episodes per task and check")
    p.add_argument("--tasks", default="all")
    p.add_argument("--replan", type=int, default=4)
    p.add_argument("--checks", nargs="+", default=list(CHECKS), choices=CHECKS)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    a = p.parse_args(argv)
    if a.bag:
        rows = bag_false_claims(a.bag)
        for r in rows:
            print(json.dumps(r))
        far = [r for r in rows if r["hand_minus_contact_m"] is not None
               and float(np.linalg.norm(r["hand_minus_contact_m"])) > 0.05]
        summary = {"bag": a.bag, "false_claims": len(rows),
                   "in_failed_episodes": sum(r["episode_succeeded"] is False for r in rows),
                   "hand_more_than_5cm_from_contact": len(far)}
        print(json.dumps(summary))
        if a.out:
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.out).write_text(json.dumps({**summary, "claims": rows}, indent=1))
        return 0
    if not a.checkpoint and a.checks != ["visibility"]:
        p.error("--checkpoint (or --bag, or --checks visibility alone) is needed")
    if a.episodes < 1:
        p.error("--episodes must be >= 1")
    names = list(TASKS) if a.tasks == "all" else a.tasks.split(",")
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        p.error(f"unknown tasks {unknown}; known: {', '.join(TASKS)}")
    built = _memory_engine(a.checkpoint) if a.checkpoint else None
    t0 = time.perf_counter()
    result: dict = {"checkpoint": a.checkpoint, "claim_slack_s": CLAIM_SLACK_S, "tasks": {}}
    for ti, name in enumerate(names):
        seeds = [EVAL_SEED_BASE + ti * 10_000 + AUDIT_SEED_OFFSET + e for e in range(a.episodes)]
        row: dict = {}
        if "labels" in a.checks or "expert" in a.checks:
            row["labels"], episodes = audit_labels(name, seeds)
            if "expert" in a.checks:
                row["expert_frames"] = audit_expert_frames(built, name, episodes)
        if "own" in a.checks:
            row["own_frames"] = audit_own_frames(built, name, seeds, a.replan)
        if "missing" in a.checks:
            row["missing_frames"] = audit_missing_frames(built, name, seeds)
        if "visibility" in a.checks:
            row["visibility"] = completion_pixels(name, seeds)
        result["tasks"][name] = row
        print(json.dumps({name: row}, indent=1, default=_plain), flush=True)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(result, indent=2, default=_plain))
    return 0
