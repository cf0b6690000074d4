"""Simulated robot for closed-loop evaluation: Meta-World v3 tasks behind a robot-like interface.

ROS-free (the sim node in node.py adds the topics); the oxygen node never imports this package.
Needs `pip install -r requirements-sim.txt` (metaworld, mujoco) and MUJOCO_GL=osmesa with
Debian's libosmesa6 (scripts/setup.sh installs both); importing this package is cheap and does not
import metaworld: SimEnv does, when it is made.

API (stable; docs/simulation.md explains the choices):

    from oxygen_ros.sim import TASKS, SimEnv, JOINT_NAMES, action_from_target, target_from_expert

    TASKS                      name -> Task(name, env_name, instruction, stages, done, horizon, ...):
                               the evaluated tasks (a policy must use the camera to succeed)
    BLIND_SOLVABLE, ALL_TASKS  3 more tasks solvable without vision (plumbing only); get_task(name)
    task.captions              stage captions, the last one is the success caption
    env = SimEnv("door-unlock", image_size=64, camera="corner4")
    state = env.reset(seed)    float64[4] = [ee_x, ee_y, ee_z, gripper opening] (JOINT_NAMES);
                               the layout (object placement) depends on `seed` only
    image = env.render()       uint8 (64, 64, 3) RGB, upright
    info = env.step(target)    target = absolute [x, y, z, opening], one 12.5 ms control period;
                               info.success, .progress (0..1), .stage, .caption, .timed_out, .step
    env.info                   the newest StepInfo (after reset: stage 0, progress 0)
    env.expert_target()        the scripted expert's next action as an absolute target
    env.expert_action()        ... as a raw Meta-World action
    action_from_target(state, target)     -> Meta-World action float32[4] (what step applies)
    target_from_expert(state, action)     -> absolute target (exact inverse for |a| <= 1)

A demo step is: target = env.expert_target(); image = env.render(); state = env.state();
caption = env.info.caption; env.step(target).
"""
from __future__ import annotations

from .env import (CAMERAS, CONTROL_PERIOD_S, DEFAULT_CAMERA, DEFAULT_IMAGE_SIZE, GAIN, GRIPPER_CLOSED,
                  GRIPPER_OPEN, JOINT_NAMES, FastCamera, SimEnv, StepInfo, action_from_target,
                  gripper_command, gripper_opening, target_from_expert)
from .tasks import ALL_TASKS, BLIND_SOLVABLE, TASKS, Task, get_task

__all__ = ["ALL_TASKS", "BLIND_SOLVABLE", "CAMERAS", "CONTROL_PERIOD_S", "DEFAULT_CAMERA",
           "DEFAULT_IMAGE_SIZE", "GAIN", "GRIPPER_CLOSED", "GRIPPER_OPEN", "JOINT_NAMES", "FastCamera",
           "SimEnv", "StepInfo", "TASKS", "Task", "action_from_target", "get_task", "gripper_command",
           "gripper_opening", "target_from_expert", "metaworld_available", "unavailable_reason"]


def unavailable_reason() -> str | None:
    """Why the simulator cannot run here (None: it can): metaworld / mujoco not installed, or
    MUJOCO_GL=osmesa without the OSMesa library."""
    import ctypes.util
    import importlib.util
    import os

    missing = [m for m in ("metaworld", "mujoco") if importlib.util.find_spec(m) is None]
    if missing:
        return f"{' and '.join(missing)} not importable: pip install -r requirements-sim.txt"
    if os.environ.get("MUJOCO_GL", "osmesa") == "osmesa" and ctypes.util.find_library("OSMesa") is None:
        return "MUJOCO_GL=osmesa but no OSMesa library: apt-get install libosmesa6"
    return None


def metaworld_available() -> bool:
    """True where the simulator can be made and render (unavailable_reason() is None)."""
    return unavailable_reason() is None
