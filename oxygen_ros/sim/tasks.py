"""The simulated tasks: Meta-World v3 tasks whose target is a visible object placed at random.

Chosen for image-based behaviour cloning with a language instruction: the thing to act on is a
large object that moves with every layout (not a 2 cm marker), the scripted expert succeeds in
every episode, standing still or a fixed motion rarely does the task (see TASKS), and episodes
are short (the expert needs 39-120 control steps, 0.5-1.5 s). Each task has an instruction and
stage captions computed from the simulator's state (hand and object positions: the same
conditions the scripted expert switches on), so recorded demonstrations can be labelled with
what is happening.

Nothing here imports metaworld; env.py does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

# obs (Meta-World's 39-D state): [0:3] hand position, [3] gripper opening, [4:7] object position
Stage = Callable[[np.ndarray], int]


def _xy(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a[:2] - b[:2]))


def _stage_button_topdown(obs: np.ndarray) -> int:
    hand, button = obs[0:3], obs[4:7]
    return 0 if _xy(hand, button) > 0.04 else 1


def _stage_window_open(obs: np.ndarray) -> int:
    hand, handle = obs[0:3], obs[4:7] + np.array([-0.03, -0.03, -0.08])
    if _xy(hand, handle) > 0.04:
        return 0
    return 1 if abs(hand[2] - handle[2]) > 0.02 else 2


# How far above door-unlock's contact point the hand may be for its place to say "turning the
# lock": the expert's own switch (x-y within 2 cm) is blind to height, and a policy's hand 2-3 cm
# over the lock, not touching it, was labelled "turning" (the sixth pass's second door-unlock
# miss, the memory saying "reaching"). The scripted expert's hand is at most 1.0 cm above the
# point (p99 of its steps in 40 layouts) while x-y within 2 cm, 0.4 cm when the switch fires:
# benchmarks/results/sim-eval-2026-12-07-e/unlock_heights.py.
DOOR_UNLOCK_TURN_HEIGHT = 0.02


def _stage_door_unlock(obs: np.ndarray) -> int:
    hand, lock = obs[0:3], obs[4:7] + np.array([-0.04, -0.02, -0.03])
    if _xy(hand, lock) > 0.02 or hand[2] - lock[2] > DOOR_UNLOCK_TURN_HEIGHT:
        return 0
    return 1


def _stage_handle_press(obs: np.ndarray) -> int:
    hand, grip = obs[0:3], obs[4:7] + np.array([0.0, -0.02, 0.0])
    return 0 if _xy(hand, grip) > 0.02 else 1


def _stage_coffee_button(obs: np.ndarray) -> int:
    hand, face = obs[0:3], obs[4:7] + np.array([0.0, 0.0, -0.07])
    return 0 if float(np.linalg.norm((hand - face)[[0, 2]])) > 0.02 else 1


def _stage_drawer_close(obs: np.ndarray) -> int:
    hand, handle = obs[0:3], obs[4:7] + np.array([0.0, 0.0, -0.02])
    if hand[1] > handle[1]:
        return 0  # still beside/over the drawer: go up and over to its front
    if abs(hand[2] - handle[2]) > 0.04:
        return 1
    return 2


# How far above door-lock's lock point the hand is when the gripper is on the lock: the lock
# pushed by the scripted expert first moves (3 mm) the next control step, in 40 of 40 layouts.
# The lock point sinks as the lock turns, so this is measured against the moving lock.
DOOR_LOCK_PUSH_HEIGHT = 0.05


def _stage_door_lock(obs: np.ndarray) -> int:
    # The expert's own switch (x-y within 2 cm) comes with the hand 21 cm above the lock, at the
    # start of its descent: a hand high over the lock is not pushing it, and was labelled so.
    hand, lock = obs[0:3], obs[4:7] + np.array([-0.02, -0.02, 0.0])
    if _xy(hand, lock) > 0.02 or hand[2] - lock[2] > DOOR_LOCK_PUSH_HEIGHT:
        return 0
    return 1


# How far (m) a door lock moves within SHOWN_STEPS control steps when it is being turned or
# pushed, wherever the gripper touches it: a policy's gripper 2-4 cm off the expert's point turns it too
# (door-lock's lock pushed 9 cm down while the hand-place rule still said "moving above the lock",
# in 12 of 20 policy-driven episodes: benchmarks/results/sim-eval-2026-12-07-c/lock_moves.py).
# The scripted expert's hand-place rule fires before the lock first moves 3 mm, except in 4 of 40
# door-unlock layouts where its hand turns the lock from 2-3 cm away. A lock let go part of the
# way can also move back by itself: that is not a turn, and MOVED_HAND_RADIUS leaves it out.
OBJECT_MOVED = 0.003

# How near (m) the hand must be to where it holds the object (Task.holds_at) for a moving object
# to be moved by it. A lock let go part of the way swings back or on by itself while the hand is
# 10-20 cm away: door-lock's expert rising 19 cm over a lock springing back up after a short
# push (81 of its 833 pushing steps in 40 layouts), door-unlock's lock turning on after the hand
# left it (385 of 1,729 steps in 40 leaving episodes). Their picture is a hand away from the lock,
# as in the sixth pass's main door-unlock miss ("turning" said with the hand 10 cm over a
# half-turned lock). The scripted expert's hand is within 8.7 cm of the point (door-unlock, p99;
# the policy's within 6.2) while it turns the lock:
# benchmarks/results/sim-eval-2026-12-07-e/hand_rules.py.
MOVED_HAND_RADIUS = 0.08

# A caption is the stage the scene shows now: the best stage of the last SHOWN_STEPS control
# steps (0.2 s, as the ALOHA simulator's 10 periods of 20 ms), not the furthest of the episode.
# The window keeps a label from flickering at a stage boundary (e.g. 2 cm above the handle); a
# longer memory would label a past: door-lock's expert, after a first push that stops short, goes
# back up 20-30 cm and pushes again (10 of 40 layouts), and a policy's hand back 10-20 cm over a
# half-pushed lock shows "moving above the lock" (benchmarks/results/sim-eval-2026-12-07-d/
# label_rules.py). Success, once reported, stays the caption. A moving object (moved_stage) is
# judged over the same window, so its stage lasts up to 2 x SHOWN_STEPS (0.4 s) after it stops
# while the hand stays within MOVED_HAND_RADIUS of it.
SHOWN_STEPS = 16


@dataclass(frozen=True)
class Task:
    """One task. `stages` are the captions before success (index from `stage_of(obs)`),
    `done` the caption once the simulator reports success."""

    name: str  # short name used on the command line and in results
    env_name: str  # Meta-World v3 environment name
    instruction: str
    stages: tuple[str, ...]
    done: str
    stage_of: Stage = field(repr=False)
    # where the hand is when the object starts to move, relative to the object (obs[4:7]):
    # the end of the reach part of `progress`
    contact: tuple[float, float, float] = (0.0, 0.0, 0.0)
    horizon: int = 300  # control steps before the episode times out (12.5 ms each)
    # whether the 64-px camera shows the completion: False where it changes only a few pixels
    # at the moment of success (`claim_audit --checks visibility --episodes 10`: door-unlock 5-8,
    # door-lock 6-16 of 4096, the gripper over the lock, vs 16-22 for the button and 21-34 for the
    # window); then the
    # memory's label stays the last stage the camera shows (memory_caption), never a claim
    done_visible: bool = True
    # the stage the scene is in at least while the hand moves the object (OBJECT_MOVED within
    # the last SHOWN_STEPS control steps, the hand within MOVED_HAND_RADIUS of holds_at; None:
    # the hand's place alone decides)
    moved_stage: int | None = None
    # where the hand is while it moves the object, relative to the object (None: `contact`)
    holds_at: tuple[float, float, float] | None = None

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError(f"task {self.name}: needs at least one stage caption")
        if not 1 <= self.horizon <= 500:
            raise ValueError(f"task {self.name}: horizon {self.horizon} must be 1..500 "
                             "(Meta-World stops an episode after 500 steps)")
        if self.moved_stage is not None and not 0 <= self.moved_stage < len(self.stages):
            raise ValueError(f"task {self.name}: moved_stage {self.moved_stage} is not a stage "
                             f"(0..{len(self.stages) - 1})")

    def caption(self, obs: np.ndarray, success: bool,
                before: np.ndarray | None = None) -> tuple[int, str]:
        """(stage index, caption) of a state; success is the last stage, len(stages). `before`:
        the state SHOWN_STEPS control steps earlier (or at reset, if sooner), for moved_stage:
        an object that moved OBJECT_MOVED since then, the hand at it, is being moved now."""
        if success:
            return len(self.stages), self.done
        i = min(max(self.stage_of(obs), 0), len(self.stages) - 1)
        if (self.moved_stage is not None and before is not None
                and float(np.linalg.norm(obs[4:7] - before[4:7])) > OBJECT_MOVED
                and self.hand_at_object(obs)):
            i = max(i, self.moved_stage)
        return i, self.stages[i]

    @property
    def hold_point(self) -> tuple[float, float, float]:
        """Where the hand is while it moves the object, relative to the object."""
        return self.holds_at if self.holds_at is not None else self.contact

    def hand_at_object(self, obs: np.ndarray) -> bool:
        """Whether the hand is within MOVED_HAND_RADIUS of where it holds the object now."""
        at = obs[4:7] + np.asarray(self.hold_point)
        return float(np.linalg.norm(obs[0:3] - at)) < MOVED_HAND_RADIUS

    def memory_caption(self, caption: str) -> str:
        """The memory's label for a frame whose simulator caption is `caption`: the caption,
        except a success the camera does not show, which is labelled with the last stage (what
        the picture shows: the hand at the object); the memory never learns to claim it."""
        return self.stages[-1] if caption == self.done and not self.done_visible else caption

    @property
    def captions(self) -> tuple[str, ...]:
        return (*self.stages, self.done)


# Chosen so that standing still never does the task and moving in a fixed direction rarely
# (door-lock: forward-down in 8 of 20 layouts; in handle-press, coffee-button and drawer-close a
# fixed motion or standing still does it in most layouts: BLIND_SOLVABLE), though no task needs
# vision entirely: Meta-World places objects within about 16 x 7 cm, and the scripted expert's
# mean trajectory replayed blind succeeds in 8-12 of 20 layouts (`oxygen-sim blind
# --episodes 20`; docs/simulation.md has the table). door-lock and door-unlock share a scene:
# only the instruction tells them apart.
# Horizons: 2.5-3.2x the scripted expert's longest episode (20 layouts: 75, 96, 82, 120 steps),
# so a policy slower than the expert (inference latency, hesitation) still has time, while a lost
# one ends its episode within 3-3.75 s of wall time.
TASKS: dict[str, Task] = {t.name: t for t in (
    Task("button-press-topdown", "button-press-topdown-v3", "press the button from the top",
         ("moving above the button", "pressing the button down"), "the button is pressed",
         _stage_button_topdown, contact=(0.0, 0.0, 0.045), horizon=240),
    Task("window-open", "window-open-v3", "slide the window open",
         ("moving above the window handle", "lowering to the window handle", "sliding the window open"),
         "the window is open", _stage_window_open, contact=(-0.03, -0.03, -0.08), horizon=300),
    Task("door-unlock", "door-unlock-v3", "unlock the door",
         ("reaching the lock", "turning the lock"), "the door is unlocked",
         _stage_door_unlock, contact=(-0.04, -0.02, -0.03), horizon=240, done_visible=False,
         moved_stage=1),
    Task("door-lock", "door-lock-v3", "lock the door",
         ("moving above the lock", "pushing the lock down"),
         "the door is locked", _stage_door_lock, contact=(-0.02, -0.02, 0.0), horizon=300,
         done_visible=False, moved_stage=1, holds_at=(-0.02, -0.02, DOOR_LOCK_PUSH_HEIGHT)),
)}


# Known but not in TASKS (not recorded or evaluated by default): a policy that ignores the camera
# succeeds in most layouts (pushing straight down, pushing forward, standing still). Kept for
# plumbing checks, where a short episode matters more than needing vision.
BLIND_SOLVABLE: dict[str, Task] = {t.name: t for t in (
    Task("handle-press", "handle-press-v3", "press the handle down",
         ("moving above the handle", "pushing the handle down"), "the handle is pressed down",
         _stage_handle_press, contact=(0.0, -0.02, 0.045), horizon=200),
    Task("coffee-button", "coffee-button-v3", "press the button on the coffee machine",
         ("lining up with the coffee button", "pushing the coffee button"),
         "the coffee button is pressed", _stage_coffee_button, contact=(0.0, -0.05, -0.07),
         horizon=200),
    Task("drawer-close", "drawer-close-v3", "close the drawer",
         ("moving over the drawer", "lowering in front of the drawer", "pushing the drawer closed"),
         "the drawer is closed", _stage_drawer_close, contact=(0.0, -0.03, -0.02), horizon=300),
)}
ALL_TASKS: dict[str, Task] = {**TASKS, **BLIND_SOLVABLE}


def get_task(name: str) -> Task:
    try:
        return ALL_TASKS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(ALL_TASKS)}") from None
