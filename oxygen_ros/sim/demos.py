"""Record scripted-expert demonstrations into a dataset file (oxygen_ros/sim/dataset.py).

    oxygen-sim demos --episodes 100 --seed 0 --out data/sim_demos.npz

Each episode: a new layout from its own seed, then every `frame_stride` control steps the camera
image, the state, the expert's ABSOLUTE target (env.expert_target: target_from_expert of the
scripted action) and the stage caption are recorded, and the robot is driven by that target.
After the simulator reports success the expert goes on for `--after` more steps, recorded with
the success caption, so the policy learns to hold still and say the task is done. Episodes that
time out are left out (counted in the summary). Layout seeds: seed * 1_000_000 + task * 10_000 +
episode, so evaluation seeds elsewhere (oxygen_ros/sim/offline_eval.py) never overlap them.

Captions: a frame's caption is the simulator's stage of the scene in its image (env.info), so the
success caption starts exactly at the frame whose state the simulator reports successful; except
where the camera does not show the success (Task.done_visible False: the door tasks, whose lock
changes 5-16 of 4096 pixels, under the gripper): there the frame keeps the last stage's caption
(Task.memory_caption), because a memory cannot know what its picture does not show, and a
memory taught to claim it anyway claimed it in failed episodes. `--relabel IN` applies this rule
to a dataset recorded before it (nothing else changes).

`--miss-episodes M` adds M caption-only episodes per task (layout seeds from episode 5000 on):
the expert aims too high, beside the object or far from it (miss_offset) and makes its motions
there, missing, as a failing policy does, for at most `--miss-steps` steps. Their frames
are labelled with the stage they show (never the success caption unless the simulator reports
success) and carry `caption_only` (no action loss: their targets are wrong on purpose). Why: the
expert's successful episodes alone teach that "the hand came down / pushed past the object"
means success, and a policy whose hand did that beside the object then claimed a success that
had not happened (docs/simulation.md, "Memory that never claims what has not happened").
`--high-miss-episodes H` adds H more per task whose expert hovers beside and above the object
(high_miss_offset), after the missing ones (the committed checkpoint's recording has 50).
`--leave-episodes L` adds L more per task whose expert does the task part of the way (the object
moved 0.5-2 cm: leave_point), then takes the hand to a point beside and above it as a high
missing episode aims, and hovers there for `--miss-steps` steps. Why: a failing policy turned door-unlock's lock part of the way and then
hovered 8-10 cm off it while its memory still said "turning the lock" (the scene shows the hand
reaching again: tasks.SHOWN_STEPS), and no demonstration had that picture.

`--policy-episodes P --policy CKPT` adds P caption-only episodes per task driven by a trained
policy, served as the node serves it (offline_eval.load_policy), each new chunk played after
0..`--policy-delay` control steps of the previous one (the node's inference latency; episodes
cycle through the delays). Their frames are labelled with the stage they show, like the missing
episodes'. Why: where a policy's own hand goes when it fails is where its memory was wrong (the
door-unlock turn made in the air, 7.6 cm past and 7.8 cm above the lock), and the expert's
misses only approximate those pictures. Layout seeds from episode 8000 on (POLICY_SEED_OFFSET).
With `--policy-actions TASKS` the driven frames of those tasks also train the action chunks on
the expert's targets (the expert is a function of the state it sees, so it says where to go from
wherever the policy took the hand: DAgger's labels). Why: a failing policy's hand passed 3-7 cm
over door-unlock's lock or hovered past it, states the expert's own episodes never visit, so
nothing taught the way back. Not for every task: whenever the hand is over 2 cm off the lock in
x-y, door-lock's expert (Meta-World's scripted policy) backs off 10 cm and rises 10 cm, then goes
to 30 cm above the lock and comes down again; its own episodes are never that far off, but a
policy's hand pushed aside by the lock is, and a policy trained on those labels rose and came
down again until time ran out (docs/simulation.md's eighth pass). With door-unlock's labels
alone neither its success nor its memory moved beyond the runs' spread (ibid.; the committed
checkpoint is not trained so). Driven frames carry `driven` either way.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Protocol

import numpy as np

from .dataset import Demos
from .policy import IMAGE_SIZE

if TYPE_CHECKING:
    from ..robot.build import BuiltEngine

# 2: caption-only missing episodes (caption_only), success_step; 3: memory_caption; 4: captions
# the stage the scene shows now (tasks.SHOWN_STEPS), not the furthest of the episode; 5: a
# moving lock is being turned only with the hand at it (tasks.MOVED_HAND_RADIUS), and
# door-unlock's hand place needs the hand at the lock's height (tasks.DOOR_UNLOCK_TURN_HEIGHT)
RECORDER_VERSION = 5
MEMORY_CAPTION_VERSION = 3  # the first version whose recorder labels as relabel() does
MISS_SEED_OFFSET = 5000  # layout seeds of the missing episodes: never the successful ones'
POLICY_SEED_OFFSET = 8000  # layout seeds of the policy-driven episodes: after the missing ones'
SEEDS_PER_TASK = 10_000  # layout_seed's task stride


def layout_seed(seed: int, task_index: int, episode: int) -> int:
    return seed * 1_000_000 + task_index * SEEDS_PER_TASK + episode


def _around(rng: np.random.Generator, dist: tuple[float, float], up: tuple[float, float]) -> np.ndarray:
    """An offset in a random x-y direction, `dist` away in x-y and `up` above (m, uniform ranges;
    drawn in that order: direction, distance, height)."""
    angle = rng.uniform(0, 2 * np.pi)
    d, z = rng.uniform(*dist), rng.uniform(*up)
    return np.array([d * np.cos(angle), d * np.sin(angle), z])


def miss_offset(seed: int) -> np.ndarray:
    """Where a missing episode's expert aims, relative to the object (m), drawn from the seed.
    A third each: short (within 1.5 cm in x-y, 2-4 cm up: the hand reaches the object and pushes
    too high, so the button or lock moves part of the way or not at all); beside (3-8 cm away in
    x-y, 0-3 cm up: it comes down or pushes next to the object); far (8-20 cm away in any
    direction: where a failing policy's hand was seen when it claimed success, e.g. 13 cm in
    front of and below the button, 18 cm past the lock)."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(3)
    if kind == 2:
        v = rng.normal(size=3)
        return v / np.linalg.norm(v) * rng.uniform(0.08, 0.20)
    if kind == 1:
        return _around(rng, (0.03, 0.08), (0.0, 0.03))
    return _around(rng, (0.0, 0.015), (0.02, 0.04))


def high_miss_offset(seed: int) -> np.ndarray:
    """Where a high missing episode's expert aims, relative to the object (m), drawn from the
    seed: 3-11 cm away in x-y and 3-12 cm up, where it hovers. Where a failing policy's hand was
    seen while its memory named the last stage: door-unlock's "turning the lock" said with the
    hand a median 7.2-7.5 cm past the lock in x and 2.6-7.5 cm above it, the lock never touched
    (benchmarks/results/sim-eval-2026-12-07); miss_offset's aims beside the object stay within
    3 cm of its height."""
    return _around(np.random.default_rng(seed), (0.03, 0.11), (0.03, 0.12))


def leave_point(seed: int) -> tuple[float, np.ndarray]:
    """Where a leaving episode's expert stops doing the task and where its hand then goes, drawn
    from the seed: once the object has moved 0.5-2 cm from its place at reset (short of success:
    the expert's objects move 7 cm for the button, 10 cm for the locks, 3-31 for the window),
    the hand goes to high_miss_offset's point from the object, 3-11 cm beside and 3-12 cm above
    it, and hovers there (record_episode's `leave`)."""
    moved = float(np.random.default_rng([seed, 1]).uniform(0.005, 0.02))
    return moved, high_miss_offset(seed)


def record_episode(env, seed: int, frame_stride: int = 1, after: int = 8,
                   aim_offset: np.ndarray | None = None, max_steps: int | None = None,
                   driver: "PolicyDriver | None" = None,
                   leave: tuple[float, np.ndarray] | None = None) -> dict:
    """One expert episode -> arrays (images, state, target, step, caption text), success and
    the step whose state the simulator first reported successful. With `aim_offset` the expert
    aims beside the object (env.expert_target); `max_steps` ends the episode early. With
    `driver` a trained policy drives the robot instead, and the expert's target is recorded
    beside each frame. With `leave` = (distance, offset) the expert does the task until the
    object has moved `distance` (m) from its place at reset; then the hand goes to `offset` from
    where the object is then and hovers there (the gripper as the expert commands it), and
    `max_steps` counts from there."""
    env.reset(seed)
    start = env.raw_obs[4:7].copy()
    images, states, targets, steps, captions = [], [], [], [], []
    success_at = left_at = None
    end = max_steps if leave is None else None  # a leaving episode's steps count from leaving
    step = 0
    while True:
        if leave is not None and left_at is None and np.linalg.norm(env.raw_obs[4:7] - start) > leave[0]:
            left_at = step
            hover = env.raw_obs[4:7] + leave[1]
            end = None if max_steps is None else step + max_steps
        target = env.expert_target(aim_offset)
        if left_at is not None:  # hover at the point beside and above where the object was left
            target = np.array([*hover, target[3]])
        if step % frame_stride == 0:
            images.append(env.render())
            states.append(env.state().astype(np.float32))
            targets.append(target.astype(np.float32))
            steps.append(step)
            captions.append(env.task.memory_caption(env.info.caption))
        info = env.step(target if driver is None else driver.target(env))
        step += 1
        if info.success and success_at is None:
            success_at = step
        if success_at is not None and step >= success_at + after:
            break
        if success_at is None and (info.timed_out or (end is not None and step >= end)):
            break
    return {"images": np.stack(images), "state": np.stack(states), "target": np.stack(targets),
            "step": np.asarray(steps, dtype=np.int32), "captions": captions,
            "success": success_at is not None, "success_step": success_at, "steps": step,
            "left_at": left_at}


class PolicyDriver:
    """A trained policy (`built`: offline_eval.load_policy) driving a SimEnv as the node plays
    it, one control step at a time: each chunk is computed on the newest picture; `delay`
    control steps of the previous chunk's next target play first (the time the node takes to
    infer), then the chunk's first target, held ACTION_PERIOD_STEPS steps (the node's stream
    player replaces a chunk as soon as the next is ready). New for each episode."""

    def __init__(self, built: "BuiltEngine", delay: int = 0) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0 control steps, got {delay}")
        self.built, self.delay, self.frames = built, delay, 0
        self._pending: list[np.ndarray] = []
        self._following: np.ndarray | None = None

    def target(self, env) -> np.ndarray:
        """The absolute target for env's next control step."""
        from .policy import ACTION_PERIOD_STEPS, policy_observation

        if not self._pending:
            obs = policy_observation(self.built, env.render(), env.state(), env.task.instruction,
                                     float(self.frames))
            chunk = self.built.norm.unnormalize_actions(self.built.engine.step(obs).actions)
            self.frames += 1
            late = [self._following] * self.delay if self._following is not None else []
            self._pending = late + [chunk[0]] * ACTION_PERIOD_STEPS
            self._following = chunk[1] if len(chunk) > 1 else chunk[0]
        return np.asarray(self._pending.pop(0), dtype=np.float64)


def record_policy_episode(env, built: "BuiltEngine", seed: int, frame_stride: int = 1,
                          after: int = 8, delay: int = 0) -> dict:
    """One episode driven by a trained policy (PolicyDriver, `delay` control steps late),
    recorded as record_episode records (the expert's target beside each frame, the caption the
    stage the image shows)."""
    return record_episode(env, seed, frame_stride, after, driver=PolicyDriver(built, delay))


def record(task_names: list[str], episodes: int, seed: int, frame_stride: int = 1,
           image_size: int = IMAGE_SIZE, camera: str | None = None, after: int = 8,
           progress: bool = True, miss_episodes: int = 0, miss_steps: int = 80,
           high_miss_episodes: int = 0, policy_episodes: int = 0,
           policy: "BuiltEngine | None" = None, policy_delay: int = 6,
           leave_episodes: int = 0,
           policy_actions: Collection[str] = ()) -> tuple[Demos, dict]:
    """Record `episodes` expert episodes per task (successful ones kept), `miss_episodes`
    caption-only missing episodes per task (miss_offset), `high_miss_episodes` more hovering
    beside and above the object (high_miss_offset; their layout seeds follow the missing ones', so a
    recording without them is the same as before), `leave_episodes` that do the task part of the
    way and then hover (leave_point; seeds after the high missing ones') and `policy_episodes` driven by `policy`
    (offline_eval.load_policy's BuiltEngine; record_policy_episode, delays 0..`policy_delay`
    in turn), all kept (the driven frames of the tasks named in `policy_actions` train the
    expert's targets as actions, not only their captions); returns the dataset and a summary."""
    unknown = sorted(set(policy_actions) - set(task_names))
    if unknown:
        raise ValueError(f"policy_actions names tasks not recorded: {unknown}")
    if policy_episodes and policy is None:
        raise ValueError("policy_episodes needs a policy (offline_eval.load_policy)")
    from . import DEFAULT_CAMERA, SimEnv, get_task

    camera = camera or DEFAULT_CAMERA
    tasks = [get_task(n) for n in task_names]
    captions = sorted({c for t in tasks for c in t.captions})
    cap_index = {c: i for i, c in enumerate(captions)}
    parts: dict[str, list] = {k: [] for k in ("images", "state", "target", "step", "episode",
                                              "task", "caption", "caption_only", "driven")}
    ep_success, ep_task, summary = [], [], {}
    t0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=(episodes + miss_episodes + high_miss_episodes + leave_episodes
                          + policy_episodes) * len(tasks),
                   desc="demos", unit="ep")
    kept = 0
    for ti, task in enumerate(tasks):
        env = SimEnv(task, image_size=image_size, camera=camera)
        ok, lengths, missed, miss_frames = 0, [], 0, 0
        driven_ok, driven_frames = 0, 0
        expert_and_miss = episodes + miss_episodes + high_miss_episodes + leave_episodes
        left = 0
        try:
            for e in range(expert_and_miss + policy_episodes):
                miss = e >= episodes  # caption-only: a missing or a policy-driven episode
                by_policy = e >= expert_and_miss
                if by_policy:
                    p = e - expert_and_miss
                    pseed = layout_seed(seed, ti, POLICY_SEED_OFFSET + p)
                    ep = record_policy_episode(env, policy, pseed, frame_stride, after,
                                               delay=p % (policy_delay + 1))
                    driven_ok += ep["success"]
                else:
                    lseed = layout_seed(seed, ti, MISS_SEED_OFFSET + e - episodes if miss else e)
                    aim = leave = None
                    if e >= episodes + miss_episodes + high_miss_episodes:
                        leave = leave_point(lseed)
                    elif miss:
                        high = e >= episodes + miss_episodes
                        aim = high_miss_offset(lseed) if high else miss_offset(lseed)
                    ep = record_episode(env, lseed, frame_stride, after, aim_offset=aim,
                                        max_steps=miss_steps if miss else None, leave=leave)
                    left += ep["left_at"] is not None
                if bar is not None:
                    bar.update(1)
                if not (ep["success"] or miss):
                    continue
                n = len(ep["step"])
                if by_policy:
                    driven_frames += n
                elif miss:
                    missed += not ep["success"]
                    miss_frames += n
                else:
                    ok += 1
                    lengths.append(ep["steps"])
                for k in ("images", "state", "target", "step"):
                    parts[k].append(ep[k])
                parts["episode"].append(np.full(n, kept, dtype=np.int32))
                parts["task"].append(np.full(n, ti, dtype=np.int16))
                parts["caption"].append(np.array([cap_index[c] for c in ep["captions"]],
                                                 dtype=np.int16))
                acted = by_policy and task.name in policy_actions
                parts["caption_only"].append(np.full(n, miss and not acted, dtype=bool))
                parts["driven"].append(np.full(n, by_policy, dtype=bool))
                ep_success.append(bool(ep["success"]))
                ep_task.append(ti)
                kept += 1
        finally:
            env.close()
        summary[task.name] = {"episodes": episodes, "successes": ok,
                              "median_steps": float(np.median(lengths)) if lengths else None,
                              "miss_episodes": miss_episodes + high_miss_episodes + leave_episodes,
                              "missed": missed, "leave_episodes": leave_episodes, "left": left,
                              "miss_frames": miss_frames, "policy_episodes": policy_episodes,
                              "policy_successes": driven_ok, "policy_frames": driven_frames}
    if bar is not None:
        bar.close()
    meta = {"seed": seed, "frame_stride": frame_stride, "image_size": image_size, "camera": camera,
            "after_success_steps": after, "recorder_version": RECORDER_VERSION,
            "episodes_per_task": episodes, "miss_episodes_per_task": miss_episodes,
            "high_miss_episodes_per_task": high_miss_episodes,
            "leave_episodes_per_task": leave_episodes,
            "miss_steps": miss_steps, "policy_episodes_per_task": policy_episodes,
            "policy_delay_steps": policy_delay if policy_episodes else None,
            "policy_action_tasks": sorted(policy_actions) if policy_episodes else [],
            "seconds": round(time.perf_counter() - t0, 1)}
    demos = Demos(**{k: np.concatenate(v) for k, v in parts.items()},
                  tasks=[t.name for t in tasks], instructions=[t.instruction for t in tasks],
                  captions=captions, episode_success=np.asarray(ep_success, dtype=bool),
                  episode_task=np.asarray(ep_task, dtype=np.int16), meta=meta)
    summary["frames"] = len(demos)
    summary["seconds"] = meta["seconds"]
    return demos, summary


class LabelledTask(Protocol):
    """What relabelling needs of a task, in either simulator (sim.tasks.Task, aloha.tasks.AlohaTask)."""

    @property
    def captions(self) -> tuple[str, ...]: ...

    def memory_caption(self, caption: str) -> str: ...


def relabel(demos: Demos, task_of: Callable[[str], LabelledTask] | None = None,
            version: int = MEMORY_CAPTION_VERSION) -> tuple[Demos, dict]:
    """The dataset with every frame's caption as its task's memory_caption labels it now
    (`task_of`: the simulator's task lookup, default Meta-World's; `version`: the recorder
    version that labels so itself; a relabelled recording keeps its scene captions, so it is
    not a newer recorder's), and per task how many frames changed."""
    if task_of is None:
        from . import get_task as task_of

    caption = demos.caption.copy()
    index = {c: i for i, c in enumerate(demos.captions)}
    changed: dict[str, int] = {}
    for ti, name in enumerate(demos.tasks):
        task = task_of(name)
        mine = demos.task == ti
        n = 0
        for c in task.captions:
            new = task.memory_caption(c)
            if new != c and c in index:
                hit = mine & (demos.caption == index[c])
                caption[hit] = index[new]
                n += int(hit.sum())
        changed[name] = n
    meta = {**demos.meta, "recorder_version": version, "relabelled": changed}
    fields = {k: getattr(demos, k) for k in demos.__dataclass_fields__}
    return Demos(**{**fields, "caption": caption, "meta": meta}), changed


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
    p.add_argument("--miss-episodes", type=int, default=0,
                   help="caption-only episodes per task whose expert aims beside the object")
    p.add_argument("--high-miss-episodes", type=int, default=0,
                   help="caption-only episodes per task whose expert hovers 3-11 cm beside and 3-12 cm "
                        "above the object")
    p.add_argument("--leave-episodes", type=int, default=0,
                   help="caption-only episodes per task whose expert moves the object 0.5-2 cm and "
                        "then leaves it, hovering as --high-miss-episodes do")
    p.add_argument("--miss-steps", type=int, default=80,
                   help="steps of a missing episode (of a leaving one: after it leaves)")
    p.add_argument("--policy-episodes", type=int, default=0,
                   help="caption-only episodes per task driven by --policy")
    p.add_argument("--policy", default=None, help="checkpoint folder that drives --policy-episodes")
    p.add_argument("--policy-delay", type=int, default=6,
                   help="most control steps (12.5 ms) a policy episode's chunk arrives late")
    p.add_argument("--policy-actions", default="",
                   help="comma-separated tasks (or all) whose --policy-episodes also train the "
                        "expert's targets as actions (DAgger's labels)")
    p.add_argument("--out", required=True, help="dataset file (.npz)")
    p.add_argument("--relabel", default=None,
                   help="instead of recording: this dataset with today's memory labels")
    a = p.parse_args(argv)
    if a.relabel:
        demos, changed = relabel(Demos.load(a.relabel))
        out = demos.save(a.out)
        done = {t: int(sum(((demos.task == i) & (demos.caption == demos.captions.index(c))).sum()
                       for c in demos.captions if c == ALL_TASKS[t].done))
                for i, t in enumerate(demos.tasks)}
        print(json.dumps({"out": str(out), "from": a.relabel, "frames_relabelled": changed,
                          "frames_with_success_caption": done, "frames": len(demos)}, indent=2))
        return 0
    names = list(TASKS) if a.tasks == "all" else a.tasks.split(",")
    unknown = [n for n in names if n not in ALL_TASKS]
    if unknown:
        p.error(f"unknown tasks {unknown}; known: {', '.join(ALL_TASKS)}")
    if a.episodes < 1:
        p.error("--episodes must be >= 1")
    misses = POLICY_SEED_OFFSET - MISS_SEED_OFFSET
    if (min(a.miss_episodes, a.high_miss_episodes, a.leave_episodes) < 0
            or a.miss_episodes + a.high_miss_episodes + a.leave_episodes > misses or a.miss_steps < 1):
        p.error(f"--miss-episodes, --high-miss-episodes and --leave-episodes must be >= 0, "
                f"together at most {misses}, and --miss-steps >= 1")
    if a.episodes > MISS_SEED_OFFSET:
        p.error(f"--episodes must be <= {MISS_SEED_OFFSET} (the missing episodes' seeds follow)")
    if not 0 <= a.policy_episodes <= SEEDS_PER_TASK - POLICY_SEED_OFFSET:
        p.error(f"--policy-episodes must be in 0..{SEEDS_PER_TASK - POLICY_SEED_OFFSET}")
    if a.policy_episodes and not a.policy:
        p.error("--policy-episodes needs --policy CHECKPOINT")
    acted = [t for t in a.policy_actions.split(",") if t]
    acted = names if acted == ["all"] else acted
    if acted and not a.policy_episodes:
        p.error("--policy-actions needs --policy-episodes")
    unknown = sorted(set(acted) - set(names))
    if unknown:
        p.error(f"--policy-actions names tasks not recorded: {unknown}")
    if not 0 <= a.policy_delay <= 40:
        p.error("--policy-delay must be in 0..40 control steps (0-0.5 s)")
    policy = None
    if a.policy_episodes:
        from .offline_eval import load_policy

        policy = load_policy(a.policy)
    demos, summary = record(names, a.episodes, a.seed, a.frame_stride, a.image_size, a.camera,
                            a.after, miss_episodes=a.miss_episodes, miss_steps=a.miss_steps,
                            high_miss_episodes=a.high_miss_episodes,
                            policy_episodes=a.policy_episodes, policy=policy,
                            policy_delay=a.policy_delay, leave_episodes=a.leave_episodes,
                            policy_actions=acted)
    out = demos.save(a.out)
    print(json.dumps({"out": str(out), **summary}, indent=2))
    return 0
