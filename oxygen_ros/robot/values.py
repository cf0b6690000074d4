"""Message values <-> numpy, without importing ROS (the pure half of node/conversions.py).

Camera messages are decoded in robot/images.py (decode once, for the inferred frame; no resize:
the engine prepares images for the model).

Functions here take any object with the ROS message's field names (rclpy messages on the robot,
rosbags messages offline in oxygen-replay), so the node and the offline tools convert identically.
node/conversions.py's docstring describes the conventions.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .interface import RobotInterface, state_field


# -- joint states -------------------------------------------------------------------------------
def joint_state_to_vector(msg: Any, joint_names: Sequence[str]) -> np.ndarray:
    """The values `joint_names` name, read from a JointState (float32): `name` its position,
    `name:velocity` / `name:effort` those fields (robot/interface.py, state_names). ValueError
    naming missing, duplicate or NaN values."""
    names = tuple(msg.name)
    fields, picks, missing, gather = joint_layout(names, tuple(joint_names))
    columns: dict[str, np.ndarray] = {}
    for f in fields:
        values = getattr(msg, f)
        if len(values) != len(names):
            what = "positions" if f == "position" else f"{f} values"
            raise ValueError(f"joint state has {len(names)} names but {len(values)} {what}")
        columns[f] = np.asarray(values, dtype=np.float64)
    if missing:
        raise ValueError(f"joint state is missing joints {list(missing)}")
    if len(fields) == 1:  # the usual case: positions only, one gather
        vec = columns[fields[0]][gather]
    else:
        vec = np.array([columns[f][i] for f, i in picks], dtype=np.float64)
    if not np.isfinite(vec).all():
        bad = [joint_names[i] for i in np.flatnonzero(~np.isfinite(vec))]
        what = "positions" if all(f == "position" for f, _ in picks) else "values"
        raise ValueError(f"joint state has non-finite {what} for joints {bad}")
    return vec.astype(np.float32)


@functools.lru_cache(maxsize=16)
def joint_layout(names: tuple[str, ...], joint_names: tuple[str, ...]
                 ) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...], tuple[str, ...], np.ndarray]:
    """Where each of `joint_names` sits in a JointState named `names`: (the fields read, (field,
    index) per joint name, the joint names it lacks, the indices as one gather array, read-only).
    A driver sends the same names every time: this is worked out once per layout, not per
    message (500 Hz - 1 kHz joint states)."""
    index = {n: i for i, n in enumerate(names)}
    if len(index) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"joint state names joints {dup} more than once")
    wanted = [state_field(j) for j in joint_names]
    missing = tuple(j for j, (n, _) in zip(joint_names, wanted) if n not in index)
    fields = tuple(sorted({f for _, f in wanted}))
    picks = tuple((f, index.get(n, -1)) for n, f in wanted)
    gather = np.array([i for _, i in picks], dtype=np.intp)
    gather.flags.writeable = False  # shared by every message of this layout (lru_cache)
    return fields, picks, missing, gather


@dataclass
class StateMapping:
    """Robot units <-> model space (q01..q99 or lower..upper -> -1..1).

    Priority: checkpoint statistics (`norm`: engine NormStats with normalize_state /
    unnormalize_actions) > joint limits (lower..upper maps linearly to -1..1; only for a joint
    robot, whose state and commands are the same joints' positions) > identity.
    The state is not clipped: pi0.5 was trained on the unclipped normalised state (a joint below
    its q01 is prompt bin -1), so the prompt must see the same values.

    `num_joints`: the commands (the first action dims); `interface` (robot/interface.py) names
    the state and the commands' kinds (None: a joint robot of num_joints joints): delta commands
    are made absolute against the observation's state in `to_robot`."""

    num_joints: int
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    norm: Any = None
    interface: RobotInterface | None = None

    def __post_init__(self) -> None:
        if (self.lower is None) != (self.upper is None):
            raise ValueError("joint limits need both lower and upper")
        if self.interface is not None and self.interface.num_commands != self.num_joints:
            raise ValueError(f"{self.num_joints} commands but the interface names "
                             f"{self.interface.num_commands}")
        if self.lower is not None:
            self.lower = np.asarray(self.lower, dtype=np.float32)
            self.upper = np.asarray(self.upper, dtype=np.float32)
            if self.lower.shape != (self.num_joints,) or self.upper.shape != (self.num_joints,):
                raise ValueError(f"joint limits must have {self.num_joints} entries, got "
                                 f"{self.lower.size} lower and {self.upper.size} upper")
            if np.any(self.lower > self.upper):
                raise ValueError("joint_limits_lower must be <= joint_limits_upper for every joint")

    @property
    def _limits_normalise(self) -> bool:
        """Joint limits double as the normalisation range (no statistics, a joint robot)."""
        return self.lower is not None and (self.interface is None or self.interface.joint_shaped)

    def to_model(self, state: np.ndarray) -> np.ndarray:
        return self._normalise(state, None if self.norm is None else self.norm.normalize_state)

    def _normalise(self, values: np.ndarray, by_norm) -> np.ndarray:
        """Robot units -> model space: `by_norm` (checkpoint statistics), else lower..upper to
        -1..1 (a joint robot), else identity."""
        s = np.asarray(values, dtype=np.float32)
        if by_norm is not None:
            out = by_norm(s)
        elif self._limits_normalise:
            span = np.where(self.upper > self.lower, self.upper - self.lower, np.float32(1.0))
            out = 2.0 * (s - self.lower) / span - 1.0
        else:
            out = s
        return np.ascontiguousarray(out, dtype=np.float32)

    def to_robot(self, actions: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
        """[horizon, >= num_joints] model-space actions -> [horizon, num_joints] robot units.
        `state`: the observation's robot-unit state, which a checkpoint with relative actions
        (LeRobot use_relative_actions) adds back (NormStats.actions_to_robot) and which delta
        commands are relative to (RobotInterface.absolute)."""
        a = np.asarray(actions, dtype=np.float32)
        if a.ndim != 2 or a.shape[1] < self.num_joints:
            raise ValueError(f"action chunk shape {list(a.shape)} has fewer than "
                             f"{self.num_joints} action dims")
        if self.norm is not None:
            out = self.norm.actions_to_robot(a, state)[:, : self.num_joints]
        else:
            out = a[:, : self.num_joints]
            if self._limits_normalise:
                out = (out + 1.0) * (self.upper - self.lower) / 2.0 + self.lower
        if self.interface is not None:
            out = self.interface.absolute(out, state)
        return np.ascontiguousarray(out, dtype=np.float32)


def command_stream(num_joints: int, dt: float) -> tuple[int, float]:
    """(num_joints, dt) of a fixed-rate command stream, checked (the player and the shaper)."""
    if num_joints < 1:
        raise ValueError(f"num_joints must be >= 1, got {num_joints}")
    if not dt > 0:
        raise ValueError(f"dt must be > 0, got {dt}")
    return int(num_joints), float(dt)


def actions_to_model(mapping: StateMapping, actions: np.ndarray,
                     state: np.ndarray | None = None) -> np.ndarray:
    """[steps, num_joints] robot-unit actions -> model units (the inverse of
    StateMapping.to_robot on the commands' dims; the padded dims are not executed). `state`:
    the new observation's robot-unit state, which delta commands are made relative to and
    relative actions re-expressed against (as LeRobot's reanchor_relative_rtc_prefix)."""
    if mapping.interface is not None:
        actions = mapping.interface.relative(np.asarray(actions, dtype=np.float64), state)
    if mapping.norm is None:
        return mapping._normalise(actions, None)
    return mapping._normalise(actions, lambda a: mapping.norm.actions_to_model(a, state))


def _short(key: str) -> str:
    return key[len("observation.images."):] if key.startswith("observation.images.") else key


def camera_slots(topics: list[str], keys: list[str], model_keys: tuple[str, ...]) -> tuple[int, ...]:
    """The model camera each topic feeds: camera_keys names them (full LeRobot key or the part
    after observation.images.), else topics follow the model's camera order."""
    if not keys:
        if len(topics) > len(model_keys):
            raise ValueError(f"{len(topics)} camera_topics but the model takes at most "
                             f"{len(model_keys)} cameras {list(model_keys)}")
        return tuple(range(len(topics)))
    if len(keys) != len(topics):
        raise ValueError(f"camera_keys has {len(keys)} entries for {len(topics)} camera_topics: "
                         "give one checkpoint camera key per topic")
    index = {}
    for i, k in enumerate(model_keys):
        index[k] = index[_short(k)] = i
    unknown = [k for k in keys if k not in index]
    if unknown:
        raise ValueError(f"camera_keys {unknown} are not cameras of the model; it has {list(model_keys)}")
    slots = tuple(index[k] for k in keys)
    if len(set(slots)) != len(slots):
        raise ValueError(f"camera_keys {keys} name the same model camera twice")
    return slots


def place_cameras(images: Sequence[np.ndarray], slots: Sequence[int]
                  ) -> tuple[list[np.ndarray], tuple[bool, ...] | None]:
    """Camera images in topic order (each at its camera's own size) -> one image per model
    camera, in model order, plus the camera_valid mask: a model camera without a topic gets a
    1x1 zero image marked invalid (pi0.5 masks missing cameras; a masked camera's image is never
    prepared or seen). Topics already in model order 0..C-1 pass through unmasked."""
    if tuple(slots) == tuple(range(len(images))):
        return list(images), None
    out = [np.zeros((1, 1, 3), dtype=np.uint8) for _ in range(max(slots) + 1)]
    valid = [False] * len(out)
    for img, slot in zip(images, slots):
        out[slot] = img
        valid[slot] = True
    return out, tuple(valid)


def text_kind(update: Any) -> str:
    """Engine kinds 'memory' | 'question' -> TextMemory kinds 'memory' | 'answer'."""
    return "memory" if update.kind == "memory" else "answer"
