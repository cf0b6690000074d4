"""oxygen-demo --sim: the engine drives a simulated robot (Meta-World, no ROS) and says what it sees.

Each frame renders the task's camera, feeds it with the arm's state and the task's instruction to
the engine (the demo's mode, k, N: memory requests run alongside control), and plays the served
chunk's first `replan` absolute targets, each held for ACTION_PERIOD_STEPS control steps (the
rate the policy was trained at). The simulator waits for the model here (offline_eval's timing);
the node and oxygen-sim eval run it on the wall clock. Per frame it prints the true stage
caption (computed from the simulator's state), the newest finished memory text and the first
target; per episode, success. Layout seeds are offline_eval's held-out range (never recorded).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .policy import ACTION_PERIOD_STEPS, EVAL_SEED_BASE, policy_observation as _observation


@dataclass
class EpisodeResult:
    task: str
    seed: int
    success: bool
    steps: int
    frames: int
    memory_matches: int  # frames whose newest finished memory text equals the true caption
    memory_frames: int  # frames that had a finished memory text to compare


def run_episode(built, task_name: str, seed: int, replan: int = 4,
                log: Callable[[str], None] | None = None,
                period_steps: int = ACTION_PERIOD_STEPS) -> EpisodeResult:
    """One policy-driven episode on a fresh SimEnv; `built` is robot.build.build_engine's result on
    a simulator checkpoint (its engine must have memory on for memory texts)."""
    from . import SimEnv, get_task

    engine, stats = built.engine, built.norm
    horizon = engine.model_config.action_horizon
    if not 1 <= replan <= horizon:
        raise ValueError(f"replan must be 1..{horizon}, got {replan}")
    task = get_task(task_name)
    env = SimEnv(task, image_size=engine.model_config.vision.image_size)
    tokens: dict[int, list[int]] = {}  # memory request id -> tokens so far (dropped when final)
    newest = ""
    matches = compared = frames = 0
    try:
        state = env.reset(seed)
        info = env.info
        if log:
            log(f"episode {task.name} seed {seed}: {task.instruction!r}")
        done = False
        while not done:
            caption = info.caption  # the true stage of the scene the camera is about to show
            out = engine.step(_observation(built, env.render(), state, task.instruction, float(frames)))
            for u in out.updates:
                if u.kind != "memory":
                    continue
                tokens.setdefault(u.id, []).extend(u.new_tokens)
                if u.is_final:
                    newest = engine.tokenizer.decode(tokens.pop(u.id)).strip()
            chunk = stats.unnormalize_actions(out.actions)
            if newest:
                compared += 1
                matches += newest == caption
            if log:
                x, y, z, g = (float(v) for v in chunk[0])
                log(f"  frame {frames:3d} step {info.step:3d}  stage {caption!r:34}  memory "
                    f"{newest!r:34}  target x {x:+.3f} y {y:+.3f} z {z:+.3f} grip {g:.2f}")
            frames += 1
            info, done = env.play(chunk[:replan], period_steps)
            state = env.state()
        # finish the requests still running so the next episode starts with an empty batch
        for _ in engine.drain(max_frames=200):
            pass
    finally:
        env.close()
    result = EpisodeResult(task.name, seed, bool(info.success), int(info.step), frames, matches, compared)
    if log:
        log(f"episode {task.name} seed {seed}: {'SUCCESS' if result.success else 'FAILED'} after "
            f"{result.steps} control steps ({result.steps * 0.0125:.1f} s simulated), {frames} frames; "
            f"memory text = true stage in {matches}/{compared} frames")
    return result


def period_steps(checkpoint: str) -> int:
    """Control steps per chunk target: the sim's rate over the rate the checkpoint names
    (training.json control_rate_hz, 20 Hz for sim-policy: 4), else the policy module's."""
    from .checkpoint import checkpoint_rate_hz
    from .env import CONTROL_PERIOD_S

    rate = checkpoint_rate_hz(checkpoint) if checkpoint else None
    return max(1, round(1.0 / (rate * CONTROL_PERIOD_S))) if rate else ACTION_PERIOD_STEPS


def run_demo(built, task_names: list[str], episodes: int, replan: int = 4, quiet: bool = False,
             period: int = ACTION_PERIOD_STEPS) -> list[EpisodeResult]:
    """`episodes` episodes of each task (seeds EVAL_SEED_BASE + task index * 10_000 + episode)."""
    from . import TASKS

    log = None if quiet else (lambda s: print(s, flush=True))
    names = list(TASKS)
    results = []
    for name in task_names:
        ti = names.index(name) if name in names else 0
        for e in range(episodes):
            results.append(run_episode(built, name, EVAL_SEED_BASE + ti * 10_000 + e, replan, log,
                                       period))
    return results


def summary_line(results: list[EpisodeResult]) -> str:
    wins = sum(r.success for r in results)
    m, c = sum(r.memory_matches for r in results), sum(r.memory_frames for r in results)
    return (f"sim summary: {wins}/{len(results)} episodes succeeded; memory text = true stage in "
            f"{m}/{c} frames ({100 * m / max(c, 1):.0f}%)")


def check_memory_prompt(engine) -> None:
    """The policy's captions were trained after its own memory prompt; another prompt would make
    its memory text meaningless, so say so instead of printing noise."""
    from .policy import MEMORY_PROMPT

    if engine.config.memory_prompt != MEMORY_PROMPT:
        raise ValueError(f"--sim: the simulator policy was trained with memory prompt "
                         f"{MEMORY_PROMPT!r}, not {engine.config.memory_prompt!r}")
