"""The node's parameters: one table (name, default, type, range, when it may change) + validation.

The engine's knobs come from engine/config/engine_config.py (ENGINE_KNOBS: their parameter names, defaults,
the node's ranges, live or fixed); NODE_PARAMETERS below holds the rest (topics, control rate,
pairing, player, safety, recording). PARAMETERS is both; config/oxygen.yaml and the docs'
parameter table are generated from it (node/param_files.py, checked by
test/node/test_package_files.py).

Kinds (documented in docs/node.md, section Parameters):
- ``live``: accepted in any state. Engine knobs (every ENGINE_KNOBS entry with a parameter that a
  running engine takes, plus memory.enabled) are validated by Engine.validate_changes in the
  on-set callback and reach the engine (Engine.apply_config) before the NEXT frame; player / pairing knobs (observation_timeout_s, crossfade_s, chunk_blend,
  stamp_tolerance_s, max_stamp_offset_s, joint limits, markers.frame_id, ask.max_open, the
  command shaper's limits, deadman.timeout_s) apply on the next control tick / message.
  instruction and memory.prompt are also checked against the model's prompt budget (a byte
  bound, then the engine's own check) by the node before they are accepted.
- ``configure``: read in on_configure (model, topics, joints, control rate). Accepted while the
  node is unconfigured; REJECTED while configured (inactive or active), with a reason saying so:
  run `ros2 lifecycle set /oxygen cleanup`, set them, then configure again.
- ``read_only``: only from the command line / params file (autostart).

This module imports nothing from ROS or torch at import time (the table and `validate` are
pure); `declare` builds rcl_interfaces descriptors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from oxygen_ros.engine import ENGINE_KNOBS, RUNNABLE_PRESETS, Knob, num_text
from oxygen_ros.robot.command_config import BLENDS, EXECUTIONS, MAX_REPLAN_STEPS, CommandConfig
from oxygen_ros.robot.interface import KINDS, RobotInterface
from oxygen_ros.robot.shaper import DEFAULT_TRACKING_ERROR, limit  # pure numpy: the shaper's own check
from oxygen_ros.robot.threads import check_cpus
from oxygen_ros.node.recorder import STORAGES  # no rosbags import: the writer loads lazily

CAMERA_TRANSPORTS = ("raw", "compressed")
COMMAND_TYPES = ("joint_state", "float64_array")
SHAPER_LIMITS = {"joint_velocity_limits": False, "joint_acceleration_limits": False,
                 "max_start_deviation": True}  # name -> zero allowed (0 = off)
TRACKING = "max_tracking_error"  # the shaper's restart tolerance
CPU_SPECS = ("inference_cpus", "control_cpus")  # thread affinities (robot/threads.py)
# the robot's state and commands (robot/interface.py): any change is checked as a whole
INTERFACE_KEYS = ("joint_names", "state_names", "command_names", "command_kinds", "command_type")

# the live parameters that make the command path's CommandConfig (robot/command_config.py): a
# change of any of them builds a new one from ALL of them (command_config below)
COMMAND_KEYS = ("joint_limits_lower", "joint_limits_upper", "crossfade_s", "observation_timeout_s",
                "max_stamp_offset_s", "chunk_blend", "chunk_skip_latency", "chunk_execution",
                "chunk_replan_steps",
                *SHAPER_LIMITS, TRACKING)

LIVE, CONFIGURE, READ_ONLY = "live", "configure", "read_only"


@dataclass(frozen=True)
class Spec:
    name: str
    type: str  # bool | int | double | string | string_array | double_array | int_array
    default: Any
    description: str
    kind: str = LIVE
    range: tuple[float, float] | None = None  # inclusive
    choices: tuple[str, ...] | None = None
    nonempty: bool = False
    unit: str = ""
    constraint: str = ""  # what range / choices cannot say, for the descriptor and the docs
    field: str | None = None  # the EngineConfig field it sets (engine knobs)

    @property
    def range_text(self) -> str:
        parts = []
        if self.range:
            lo, hi = self.range
            parts.append(f"[{_num(lo)}, {_num(hi)}]" + (f" {self.unit}" if self.unit else ""))
        elif self.choices:
            parts.append(" | ".join(self.choices))
        elif self.nonempty and self.type == "string":
            parts.append("non-empty")
        if self.constraint:
            parts.append(self.constraint)
        return "; ".join(parts)


_num = num_text
_SPEC_TYPE = {bool: "bool", int: "int", float: "double", str: "string"}


def _from_knob(knob: Knob) -> Spec:
    """An engine knob as a node parameter: its name, default, the node's range, its meaning."""
    rng = knob.param_range or knob.range
    if rng is not None and rng[1] is None:  # a descriptor's range has both ends
        raise ValueError(f"knob {knob.field}: a node parameter needs an upper bound (param_range)")
    return Spec(knob.param, _SPEC_TYPE[knob.type], knob.default,
                f"{knob.symbol}: {knob.description}" if knob.symbol else knob.description,
                LIVE if knob.live else CONFIGURE, rng, knob.choices, knob.nonempty, knob.unit,
                field=knob.field)


ENGINE_PARAMETERS: tuple[Spec, ...] = tuple(_from_knob(k) for k in ENGINE_KNOBS if k.param)

NODE_PARAMETERS: tuple[Spec, ...] = (
    # memory.enabled gates memory.every_n_frames (the engine's memory_every_n_frames 0 = off)
    Spec("memory.enabled", "bool", True, "emit a textual memory request periodically", LIVE),
    # control / inputs (live)
    Spec("observation_timeout_s", "double", 0.5,
         "commands go stale (hold) when the newest chunk's observation is older than this; inputs "
         "silent this long are reported stale", LIVE, (0.01, 60.0), unit="s"),
    Spec("crossfade_s", "double", 0.1, "linear blend from the old to a new action chunk", LIVE,
         (0.0, 5.0), unit="s"),
    Spec("chunk_blend", "string", "crossfade", "how a new action chunk replaces the one being "
         "executed: crossfade (crossfade_s), rtc (real-time chunking: the engine continues the "
         "executed steps and the new chunk takes over at step d, the control steps counted since "
         "its observation; docs/rtc.md) or none (switch at once)", LIVE, choices=BLENDS),
    Spec("chunk_skip_latency", "bool", True, "a new action chunk starts at the step due now, "
         "skipping the steps whose time passed since its observation (inference latency); false "
         "plays every chunk from its first step, one latency late: a deliberate fault for "
         "sensitivity tests (docs/simulation.md), never for a robot", LIVE),
    Spec("chunk_execution", "string", "stream", "stream: each new action chunk replaces the "
         "one being executed as soon as it exists (the robot does not stop for inference); sync: "
         "the robot plays each chunk to its end, holds still, and plays the next chunk made from an "
         "observation taken at rest (a synchronous loop: inference time becomes waiting time; not "
         "with chunk_blend rtc)", LIVE, choices=EXECUTIONS),
    Spec("chunk_replan_steps", "int", 0, "stream: a newer action chunk takes over only once the "
         "one playing has played this many chunk steps (or its plan ran out); chunks finished "
         "sooner are passed over, the robot never stops. 0 = every newer chunk at once. For a "
         "policy that dithers when it re-decides every few steps (openpi's replan_steps); sync: "
         "no effect", LIVE, (0, MAX_REPLAN_STEPS), unit="steps"),
    Spec("stamp_tolerance_s", "double", 0.05, "max stamp difference between paired camera frames "
         "and joint states", LIVE, (0.0, 10.0), unit="s"),
    Spec("max_stamp_offset_s", "double", 1.0, "inputs stamped further than this ahead of or behind "
         "the node clock are refused (clock jumps, unsynchronised clocks); a chunk stamped further "
         "ahead is never played", LIVE, (0.01, 3600.0),
         unit="s"),
    Spec("ask.max_open", "int", 1024, "questions queued + decoding at most; more are refused "
         "('refused: queue full' on ~/answer)", LIVE, (1, 100000)),
    Spec("joint_limits_lower", "double_array", [], "per-command lower limits (empty = none): clip "
         "commands; for a joint robot with no checkpoint statistics also the normalisation range "
         "(both live)", LIVE, constraint="one per command or empty"),
    Spec("joint_limits_upper", "double_array", [], "per-command upper limits (empty = none)", LIVE,
         constraint="one per command or empty"),
    Spec("markers.frame_id", "string", "base_link", "frame of the RViz text markers", LIVE,
         nonempty=True),
    # command shaping (robot/shaper.py; docs/command-safety.md)
    Spec("joint_velocity_limits", "double_array", [], "rad/s, one value or one per command (empty = "
         "none): no command moves further than this x 1/control_rate_hz from the previous one; a "
         "velocity command's value is bounded by it", LIVE,
         constraint="one value or one per joint, > 0; empty = none"),
    Spec("joint_acceleration_limits", "double_array", [], "rad/s^2, one value or one per command "
         "(empty = none): the change of command velocity per tick, braking included (a velocity "
         "command's own change)", LIVE,
         constraint="one value or one per joint, > 0; empty = none"),
    Spec("max_start_deviation", "double_array", [], "rad, one value or one per joint (empty or 0 = "
         "off): a chunk whose first playable step is further than this from the measured pose is "
         "not played (the last command is held)", LIVE,
         constraint="one value or one per joint, >= 0; empty / 0 = off"),
    Spec(TRACKING, "double_array", list(DEFAULT_TRACKING_ERROR), "rad, one value or one per "
         "joint (empty = off): after a hold, commands resume from the last command only while the "
         "measured pose is within this of it; further is a glitch (hold, ERROR), never a target",
         LIVE, constraint="one value or one per joint, > 0; empty = off"),
    Spec("deadman.timeout_s", "double", 0.5, "with deadman.topic: commands hold when no true "
         "arrived for this long", LIVE, (0.01, 60.0), unit="s"),
    # configure-time
    Spec("control_rate_hz", "double", 50.0, "rate of ~/joint_command; may be several times "
         "chunk_rate_hz: the player interpolates between chunk steps", CONFIGURE, (1.0, 1000.0),
         unit="Hz"),
    Spec("chunk_rate_hz", "double", 0.0, "rate of the action chunk's steps (step i is meant for "
         "stamp + i / rate): the rate the checkpoint was trained at; 0 = the checkpoint's when it "
         "names one (LeRobot train_config.json env.fps), else control_rate_hz", CONFIGURE,
         (0.0, 1000.0), unit="Hz"),
    Spec("n_action_steps", "int", 0, "steps of each action chunk the robot executes (LeRobot's "
         "n_action_steps; the rest of the chunk is dropped); 0 = the checkpoint's n_action_steps, "
         "else the whole chunk", CONFIGURE, (0, 10000)),
    Spec("control_priority", "int", 0, "SCHED_FIFO priority of the control thread, the inference "
         "thread gets one less (0 = normal scheduling; needs rtprio permission, else a warning)",
         CONFIGURE, (0, 99)),
    Spec("inference_cpus", "int_array", [], "CPUs of the inference thread (empty = any); while "
         "active, every other thread of the process is kept off them, and model.num_threads 0 means "
         "one per CPU here (docs/node.md, CPU affinity)", CONFIGURE,
         constraint="CPUs this process may run on"),
    Spec("control_cpus", "int_array", [], "CPUs of the control thread (empty = any; not with "
         "use_sim_time, whose ticks run in the executor)", CONFIGURE,
         constraint="CPUs this process may run on"),
    Spec("camera_topics", "string_array", ["/camera/image_raw"], "camera image topics (model "
         "camera order unless camera_keys pairs them)", CONFIGURE, nonempty=True,
         constraint="1..model cameras"),
    Spec("camera_keys", "string_array", [], "checkpoint camera key of each camera_topics entry "
         "(e.g. observation.images.base_0_rgb or base_0_rgb; empty = camera_topics in the "
         "checkpoint's camera order); cameras without a topic are fed masked", CONFIGURE,
         constraint="one per topic or empty"),
    Spec("camera_transports", "string_array", [], "raw (sensor_msgs/Image) or compressed "
         "(sensor_msgs/CompressedImage, jpeg / png) for each camera_topics entry; empty = all raw",
         CONFIGURE, constraint="raw | compressed, one per topic or empty"),
    Spec("camera_max_side", "int", 4096, "images wider or taller than this (or with more data "
         "than such a square rgba8 image) are refused before decoding, with the reason in "
         "`oxygen: inputs`", CONFIGURE, (16, 65535), unit="px"),
    Spec("camera_reliability", "string", "auto", "camera subscription QoS: auto (reliable when "
         "every publisher of the topic is reliable, else best effort; checked each second), "
         "best_effort or reliable (docs/cameras.md)", CONFIGURE,
         choices=("auto", "best_effort", "reliable")),
    Spec("max_stamp_skew_s", "double", 0.25, "a camera whose stamps lag the joint states' by more "
         "than this (median over the last 2 s, either way) is named in `oxygen: inputs`",
         CONFIGURE, (0.0, 3600.0), unit="s"),
    Spec("joint_state_topic", "string", "/joint_states", "sensor_msgs/JointState input", CONFIGURE,
         nonempty=True),
    Spec("joint_state_min_rate_hz", "double", 0.0, "joint states sent slower than this are named "
         "in `oxygen: inputs` (0 = only a stream slowed below half the rate it kept before)",
         CONFIGURE, (0.0, 100000.0), unit="Hz"),
    Spec("joint_state_max_age_s", "double", 0.1, "joint states older than this when commands use "
         "them (p99 over the last 2 s; stamped this far behind while inactive) are named in "
         "`oxygen: inputs`", CONFIGURE, (0.001, 3600.0), unit="s"),
    Spec("joint_names", "string_array",
         ["joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_6"],
         "joints of the state vector and of the commands, in model order (what state_names and "
         "command_names default to)", CONFIGURE, nonempty=True,
         constraint="1..action_dim, unique; with a checkpoint exactly its state / action size"),
    Spec("state_names", "string_array", [], "the model's state values, in order, read by name from "
         "joint_state_topic's JointState: `name` its position, `name:velocity` / `name:effort` "
         "those fields (an end-effector pose or gripper fingers published as named values); "
         "empty = joint_names", CONFIGURE,
         constraint="unique; with a checkpoint exactly its state size"),
    Spec("command_names", "string_array", [], "the values the actions command, in action order (the "
         "first action dims); ~/joint_command and ~/action_chunk name them, the per-command limits "
         "follow them; empty = joint_names", CONFIGURE,
         constraint="unique; with a checkpoint exactly its action size"),
    Spec("command_kinds", "string_array", [], "kind of each command_names entry, or one for all: "
         "position (absolute: a joint position, an end-effector pose coordinate, a gripper), "
         "delta (relative to the state value of the same name at the observation: sent made "
         "absolute) or velocity (a rate sent as it is: held per chunk step, 0 when holding); "
         "empty = position", CONFIGURE, constraint=f"{' | '.join(KINDS)}; one per command or one"),
    Spec("model.preset", "string", "tiny", "model shape when no checkpoint is given", CONFIGURE,
         choices=RUNNABLE_PRESETS),
    Spec("model.checkpoint", "string", "", "LeRobot or openpi pi0.5 folder (config.json + "
         "model.safetensors), or a Qwen3-VL folder with our action expert / StarVLA head files "
         "(docs/checkpoints.md); check it with oxygen-inspect; empty = random weights of "
         "model.preset", CONFIGURE),
    Spec("model.tokenizer", "string", "", "tokenizer of model.checkpoint: tokenizer.model / "
         "tokenizer.json file, a folder with one, or a Hugging Face repo id in the local cache; "
         "empty = next to the checkpoint, then the local cache for the repo it names", CONFIGURE),
    Spec("model.asset_id", "string", "", "openpi checkpoint: normalisation statistics of "
         "assets/<asset_id>/ (empty = the only one there)", CONFIGURE),
    Spec("model.lerobot_version", "string", "auto", "LeRobot version whose pi0.5 conventions "
         "model.checkpoint follows (state prompt padding, image bars, relative actions; "
         "docs/pi05-conventions.md): auto = what the folder shows (oxygen-inspect prints it), "
         "or a version such as 0.4.4 for a v0.4.x fine-tune", CONFIGURE),
    Spec("model.num_threads", "int", 0, "torch CPU threads of the model; 0 = every core the "
         "process may use but one (at least 1), which leaves a core to the control loop, the "
         "callbacks and the robot's other processes (with inference_cpus: one per CPU there); a "
         "count that takes every core is warned about at configure", CONFIGURE, (0, 256)),
    Spec("deadman.topic", "string", "", "std_msgs/Bool operator heartbeat (true = go; empty = "
         "off): without a fresh true, commands stop following the chunks and hold", CONFIGURE),
    Spec("command_type", "string", "joint_state", "~/joint_command type: joint_state "
         "(sensor_msgs/JointState: positions, or velocities when every command is a velocity) or "
         "float64_array (std_msgs/Float64MultiArray in command order, for "
         "forward_command_controller; needed for a mix of positions and velocities)", CONFIGURE, choices=COMMAND_TYPES),
    Spec("record.enabled", "bool", False, "record a rosbag2 while active (no `ros2 bag` needed)",
         CONFIGURE),
    Spec("record.path", "string", "oxygen_bag", "bag folder; when it exists, _<date-time> is "
         "appended (a new bag per activation)", CONFIGURE, nonempty=True),
    Spec("record.storage", "string", "mcap", "bag storage", CONFIGURE, choices=STORAGES),
    Spec("record.topics", "string_array", [], "topics to record (empty = the node's inputs and "
         "outputs)", CONFIGURE),
    Spec("record.queue_size", "int", 2000, "messages waiting for the writer thread; beyond: "
         "dropped and counted", CONFIGURE, (1, 1_000_000)),
    Spec("autostart", "bool", False, "configure + activate on start-up (oxygen_node executable)",
         READ_ONLY),
)

_KIND_ORDER = (LIVE, CONFIGURE, READ_ONLY)
# engine knobs first within each kind; the order of config/oxygen.yaml and of the docs' table
PARAMETERS: tuple[Spec, ...] = tuple(sorted((*ENGINE_PARAMETERS, *NODE_PARAMETERS),
                                            key=lambda s: _KIND_ORDER.index(s.kind)))
SPECS: dict[str, Spec] = {s.name: s for s in PARAMETERS}
if len(SPECS) != len(PARAMETERS):
    raise ValueError("a node parameter is declared twice (engine knob and node table?)")
# parameters a running engine takes (Engine.validate_changes / apply_config)
ENGINE_KEYS = tuple(s.name for s in PARAMETERS if s.field and s.kind == LIVE) + ("memory.enabled",)


def validate_value(spec: Spec, value: Any) -> str | None:
    """A reason string when `value` is not acceptable for `spec`, else None."""
    t = spec.type
    ok_type = {
        "bool": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "double": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "string": lambda v: isinstance(v, str),
        "string_array": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
        "double_array": lambda v: isinstance(v, (list, tuple)) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in v),
        "int_array": lambda v: isinstance(v, (list, tuple)) and all(
            isinstance(x, int) and not isinstance(x, bool) for x in v),
    }[t]
    if not ok_type(value):
        return f"{spec.name} must be a {t}, got {value!r}"
    if t == "double" and not math.isfinite(value):
        return f"{spec.name} must be finite, got {value!r}"
    if t == "double_array" and not all(math.isfinite(x) for x in value):
        return f"{spec.name} must hold finite numbers, got {list(value)!r}"
    if spec.range is not None:
        lo, hi = spec.range
        if not lo <= value <= hi:
            return f"{spec.name} must be in [{_num(lo)}, {_num(hi)}], got {value!r}"
    if spec.choices is not None and value not in spec.choices:
        return f"{spec.name} must be one of {', '.join(spec.choices)}; got {value!r}"
    if spec.nonempty:
        if t == "string" and not value.strip():
            return f"{spec.name} must not be empty"
        if t == "string_array":
            if not value:
                return f"{spec.name} must not be empty"
            if any(not x.strip() for x in value):
                return f"{spec.name} must not contain empty names"
            if len(set(value)) != len(value):
                return f"{spec.name} has duplicates: {list(value)!r}"
    if spec.name in CPU_SPECS:
        return check_cpus(spec.name, value)
    if spec.name == "camera_keys" and len(set(value)) != len(value):
        return f"camera_keys has duplicates: {list(value)!r}"
    if spec.name == "camera_transports" and any(x not in CAMERA_TRANSPORTS for x in value):
        return f"camera_transports entries must be raw or compressed, got {list(value)!r}"
    if spec.name == "model.device" and not (value == "cpu" or value.startswith("cuda")):
        return f"model.device must be cpu or cuda[:N], got {value!r}"
    if spec.name == "model.lerobot_version":
        from oxygen_ros.engine import check_version_param
        try:
            check_version_param(value)
        except ValueError as err:
            return f"model.lerobot_version: {err}"
    return None


def validate(changes: dict[str, Any], current: dict[str, Any], configured: bool) -> str | None:
    """Validate a set of parameter changes against the current values. Returns a reason or None.

    `current` holds every parameter's value; `configured`: the node is inactive or active."""
    for name, value in changes.items():
        spec = SPECS.get(name)
        if spec is None:
            continue  # not ours (e.g. use_sim_time): rclpy handles it
        if spec.kind == READ_ONLY:
            return f"{name} is read-only (set it on the command line or in the params file)"
        if spec.kind == CONFIGURE and configured:
            return (f"{name} is read at configure time and cannot change while the node is "
                    f"configured: run 'ros2 lifecycle set /oxygen cleanup', set it, configure again")
        reason = validate_value(spec, value)
        if reason:
            return reason
    merged = {**current, **changes}
    lo, hi = list(merged.get("joint_limits_lower") or []), list(merged.get("joint_limits_upper") or [])
    names = list(merged.get("joint_names") or [])
    interface_changed = any(k in changes for k in INTERFACE_KEYS)
    if interface_changed and names:
        try:
            robot = interface(merged)
        except ValueError as exc:
            return str(exc)
        reason = robot.message_problem(merged.get("command_type") or "joint_state")
        if reason:
            return reason
    if names:
        names = list(merged.get("command_names") or names)  # the limits are per command
    if ("joint_limits_lower" in changes or "joint_limits_upper" in changes
            or interface_changed):
        if len(lo) != len(hi):
            return (f"joint_limits_lower has {len(lo)} entries and joint_limits_upper {len(hi)}: "
                    "set both (or both empty); use one request to change both")
        if lo and len(lo) != len(names):
            return f"joint limits have {len(lo)} entries for {len(names)} commands {names}"
        bad = [names[i] for i, (a, b) in enumerate(zip(lo, hi)) if a > b]
        if bad:
            return f"joint_limits_lower > joint_limits_upper for joints {bad}"
    rate = float(merged.get("control_rate_hz") or SPECS["control_rate_hz"].default)
    for name in (*SHAPER_LIMITS, TRACKING):  # per control tick: dt = 1 / control_rate_hz
        if name in changes or interface_changed or "control_rate_hz" in changes:
            try:
                limit(name, merged.get(name) or [], len(names), 1.0 / rate)
            except ValueError as exc:
                return str(exc)
    return None


def interface(values: dict[str, Any]) -> RobotInterface:
    """The robot's state and commands from the parameters (ValueError with the reason)."""
    return RobotInterface.from_params(values["joint_names"], values.get("state_names") or (),
                                      values.get("command_names") or (),
                                      values.get("command_kinds") or ())


def command_config(values: dict[str, Any], step_s: float, tick_s: float) -> CommandConfig:
    """The command path's whole configuration from the FULL parameter map (every COMMAND_KEYS
    value, never a partial change); ValueError names what is wrong."""
    robot = interface(values)
    return CommandConfig(
        robot.num_commands, step_s, tick_s, rates=robot.rates, measured=robot.measured,
        lower=values["joint_limits_lower"] or (), upper=values["joint_limits_upper"] or (),
        crossfade_s=float(values["crossfade_s"]),
        observation_timeout_s=float(values["observation_timeout_s"]),
        future_tolerance_s=float(values["max_stamp_offset_s"]), blend=values["chunk_blend"],
        skip_latency=values["chunk_skip_latency"], execution=values["chunk_execution"],
        replan_steps=int(values["chunk_replan_steps"]),
        velocity_limits=values["joint_velocity_limits"] or (),
        acceleration_limits=values["joint_acceleration_limits"] or (),
        max_start_deviation=values["max_start_deviation"] or (),
        max_tracking_error=values[TRACKING] or ())


def chunk_step_s(values: dict[str, Any], checkpoint_fps: float | None) -> float:
    """The chunk's step period: chunk_rate_hz, else the checkpoint's fps, else the control
    period (the chunk steps at the control rate, as before chunk_rate_hz existed)."""
    rate = float(values["chunk_rate_hz"]) or float(checkpoint_fps or 0.0) \
        or float(values["control_rate_hz"])
    return 1.0 / rate


_CAST = {"double": float, "int": int}


def engine_fields(values: dict[str, Any], live_only: bool = False) -> dict[str, Any]:
    """Engine parameter values -> EngineConfig keyword arguments, by each engine parameter's
    field (configure-time ones too unless `live_only`); memory.enabled false turns
    memory_every_n_frames to 0 (off)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        spec = SPECS.get(name)
        if spec is not None and spec.field is not None and (spec.kind == LIVE or not live_only):
            out[spec.field] = _CAST.get(spec.type, lambda v: v)(value)
    if "memory.enabled" in values or "memory.every_n_frames" in values:
        every = SPECS["memory.every_n_frames"]
        n = int(values.get(every.name, every.default))
        out[every.field] = n if values.get("memory.enabled", True) else 0
    return out


def engine_changes(values: dict[str, Any]) -> dict[str, Any]:
    """Live parameter values -> Engine.validate_changes keyword arguments (engine_fields' live ones)."""
    return engine_fields(values, live_only=True)


# -- rclpy glue ---------------------------------------------------------------------------------
_PTYPE = {"bool": "BOOL", "int": "INTEGER", "double": "DOUBLE", "string": "STRING",
          "string_array": "STRING_ARRAY", "double_array": "DOUBLE_ARRAY", "int_array": "INTEGER_ARRAY"}


def descriptor(spec: Spec):
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    d = ParameterDescriptor()
    d.name = spec.name
    d.description = f"{spec.description} [{spec.kind}]"
    d.read_only = spec.kind == READ_ONLY
    notes = [f"one of: {', '.join(spec.choices)}"] if spec.choices else []
    notes += [spec.unit] if spec.unit else []
    notes += [spec.constraint] if spec.constraint else []
    if spec.kind == CONFIGURE:
        notes.append("configure-time: rejected while the node is configured")
    d.additional_constraints = "; ".join(notes)
    if spec.range is not None:
        lo, hi = spec.range
        if spec.type == "int":
            d.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=1)]
        else:
            d.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi),
                                                         step=0.0)]
    return d


def declare(node) -> None:
    """Declare every parameter on `node` (values from --params-file / overrides win)."""
    from rclpy.parameter import Parameter

    for spec in PARAMETERS:
        ptype = getattr(Parameter.Type, _PTYPE[spec.type])
        if spec.type.endswith("_array") and not spec.default:
            # an empty list cannot carry its type: declare typed without a value (`get` below
            # returns [] while unset); a params file's `[]` arrives as "not set" too
            node.declare_parameter(spec.name, ptype, descriptor(spec))
        else:
            default = float(spec.default) if spec.type == "double" else spec.default
            node.declare_parameter(spec.name, default, descriptor(spec))


def get(node, name: str) -> Any:
    from rclpy.parameter import Parameter

    spec = SPECS[name]
    ptype = getattr(Parameter.Type, _PTYPE[spec.type])
    p = node.get_parameter_or(name, Parameter(name, ptype, list(spec.default)
                                              if isinstance(spec.default, list) else spec.default))
    value = p.value
    if value is None:
        return list(spec.default) if isinstance(spec.default, list) else spec.default
    if spec.type in ("string_array", "double_array", "int_array"):
        return list(value)
    return value


def values(node) -> dict[str, Any]:
    return {s.name: get(node, s.name) for s in PARAMETERS}


def _our_changes(parameters) -> dict[str, Any]:
    """rclpy Parameters -> {name: value} of this table's parameters (arrays as lists)."""
    return {p.name: (list(p.value) if isinstance(p.value, (list, tuple)) or
                     type(p.value).__name__ == "array" else p.value)
            for p in parameters if p.name in SPECS}


def on_set_callback(node, is_configured: Callable[[], bool],
                    check: Callable[[dict[str, Any], dict[str, Any]], str | None] | None = None):
    """An rclpy on-set-parameters callback that only validates (ros2/demos' pattern): the
    table, then `check(changes, merged)` for what only the running node knows (the model's
    prompt budget, the engine's own check). Nothing is applied here: post_set_callback does
    that once rclpy has stored the values."""
    from rcl_interfaces.msg import SetParametersResult

    def callback(parameters) -> SetParametersResult:
        changes = _our_changes(parameters)
        if not changes:
            return SetParametersResult(successful=True)
        current = values(node)
        reason = validate(changes, current, is_configured())
        if reason is None and check is not None:
            reason = check(changes, {**current, **changes})
        if reason:
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    return callback


def post_set_callback(apply: Callable[[dict[str, Any]], None]):
    """An rclpy post-set-parameters callback: `apply(changes)` for changes on_set_callback
    accepted and rclpy stored (it is called only after a successful set)."""
    def callback(parameters) -> None:
        changes = _our_changes(parameters)
        if changes:
            apply(changes)

    return callback
