"""Configure-time construction of the engine from the parameter values (no rclpy), through
robot/build.build_engine as oxygen-replay and oxygen-demo build theirs.

Raises ValueError with a reason for anything the parameters get wrong; the node stays
unconfigured then. Knows engine types, never message types.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from oxygen_ros.robot.build import ModelSource, build_engine
from oxygen_ros.robot.engine_port import EnginePort
from oxygen_ros.robot.images import parse_transports
from oxygen_ros.robot.interface import RobotInterface, check_sizes
from oxygen_ros.robot.threads import resolve_threads
from oxygen_ros.robot.values import camera_slots

from . import params as P

# the model source's parameters, as refusals name them
PARAM_NAMES = ("model.checkpoint", "model.tokenizer", "model.asset_id")


@dataclass
class Built:
    engine: EnginePort
    model_config: Any
    norm: Any  # checkpoint normalisation statistics or None
    model_name: str
    camera_slots: tuple[int, ...] = ()  # model camera index of each camera topic
    n_action_steps: int = 0  # chunk steps meant to be executed (0 = all)
    tokenizer_source: str = ""
    camera_transports: tuple[str, ...] = ()  # raw | compressed of each camera topic
    fps: float | None = None  # the checkpoint's action rate when it names one
    threads: int = 0  # the model's CPU threads (model.num_threads 0: every core but one)
    warnings: tuple[str, ...] = ()  # for the configure log (a thread count that takes every core)
    load_s: float = 0.0  # configure's time: building the engine (weights read), then warming up
    warmup_s: float = 0.0
    warmup_note: str = ""  # what warmup ran (Engine.warmup: full frames or one reduced frame)


def check_joints(names: list[str], state_dim: int | None, action_dim: int | None, padded: int) -> None:
    """A joint robot: joint_names are the state's and the action's leading dims."""
    check_sizes(len(names), len(names), state_dim, action_dim, padded, ("joint_names",) * 2)


def check_interface(robot: RobotInterface, state_dim: int | None, action_dim: int | None,
                    padded: int, state_named: bool = True, commands_named: bool = True) -> None:
    """The robot's state values and commands against the checkpoint's state / action sizes
    (exactly) and the model's padded action_dim; the refusal names the parameter that set them
    (`*_named` False: defaulted to joint_names)."""
    robot.check_model(state_dim, action_dim, padded,
                      ("state_names" if state_named else "joint_names",
                       "command_names" if commands_named else "joint_names"))


def build(p: dict[str, Any]) -> Built:
    """The node's engine from its parameter values (robot/build.build_engine), warmed up."""
    from oxygen_ros.engine import EngineConfig

    for name, value in p.items():  # the params file bypasses no check
        reason = P.validate_value(P.SPECS[name], value)
        if reason:
            raise ValueError(reason)
    reason = P.validate({k: p[k] for k in ("joint_limits_lower", "joint_limits_upper",
                                           *P.SHAPER_LIMITS, *P.INTERFACE_KEYS)}, p, False)
    if reason:
        raise ValueError(reason)
    robot, cams = P.interface(p), list(p["camera_topics"])
    transports = parse_transports(list(p["camera_transports"]), len(cams))
    threads, thread_warning = resolve_threads(int(p["model.num_threads"]),
                                              model_cpus=len(p["inference_cpus"]))
    source = ModelSource(preset=p["model.preset"], checkpoint=p["model.checkpoint"],
                         tokenizer=p["model.tokenizer"], asset_id=p["model.asset_id"],
                         lerobot_version=p["model.lerobot_version"],
                         threads=threads, progress=True, names=PARAM_NAMES)
    ec = EngineConfig(**P.engine_fields(p))  # every engine parameter, by its knob's field
    # the tokenizer and every checkpoint key/shape are checked before the weights are read
    start = time.perf_counter()
    b = build_engine(source, ec)
    load_s = time.perf_counter() - start
    check_interface(robot, b.state_dim, b.action_dim, b.engine.model_config.action_dim,
                    bool(p["state_names"]), bool(p["command_names"]))
    slots = camera_slots(cams, list(p["camera_keys"]), b.camera_keys)
    # first frames allocate and pick kernels: pay that now, not in the first control frames
    start = time.perf_counter()
    # about one frame when frames take seconds, one reduced frame when a full one would take
    # longer than the budget on a CPU (Engine.warmup)
    note = b.engine.warmup()
    return Built(b.engine, b.engine.model_config, b.norm, b.model_name, slots, b.n_action_steps,
                 b.tokenizer_source, transports, b.fps, threads,
                 (thread_warning,) if thread_warning else (), load_s, time.perf_counter() - start,
                 note)
