"""Message values <-> numpy, without importing ROS (the pure half of node/conversions.py).

Functions here take any object with the ROS message's field names (rclpy messages on the robot,
rosbags messages offline in oxygen-replay), so the node and the offline tools convert identically.
conversions.py re-exports everything; its docstring describes the conventions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

ENCODINGS = {"rgb8": 3, "bgr8": 3, "mono8": 1, "rgba8": 4, "bgra8": 4}


def decode_image_numpy(msg: Any) -> np.ndarray:
    """sensor_msgs/Image -> RGB uint8 [H, W, 3] (a copy). ValueError naming the problem."""
    enc = msg.encoding
    if enc not in ENCODINGS:
        raise ValueError(f"unsupported image encoding {enc!r}; supported: {sorted(ENCODINGS)}")
    ch = ENCODINGS[enc]
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    if h <= 0 or w <= 0:
        raise ValueError(f"image has an empty size {w}x{h}")
    if step < w * ch:
        raise ValueError(f"image step {step} is smaller than width*channels = {w * ch} for {enc}")
    data = msg.data
    try:
        buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    except TypeError:  # a plain list of ints
        buf = np.asarray(data, dtype=np.uint8).reshape(-1)
    if buf.size != step * h:
        raise ValueError(f"image data has {buf.size} bytes; {enc} {w}x{h} with step {step} "
                         f"needs step*height = {step * h}")
    rows = buf.reshape(h, step)[:, : w * ch].reshape(h, w, ch)
    if enc == "rgb8":
        return rows.copy()
    if enc == "bgr8":
        return rows[:, :, ::-1].copy()
    if enc == "rgba8":
        return rows[:, :, :3].copy()
    if enc == "bgra8":
        return rows[:, :, 2::-1].copy()
    return np.repeat(rows, 3, axis=2)  # mono8


def _area_weights(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] row-stochastic overlap weights of output cells over input cells."""
    scale = n_in / n_out
    edges = np.arange(n_out + 1, dtype=np.float64) * scale
    lo, hi = edges[:-1, None], edges[1:, None]
    j = np.arange(n_in, dtype=np.float64)[None, :]
    overlap = np.clip(np.minimum(hi, j + 1) - np.maximum(lo, j), 0.0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


_weight_cache: dict[tuple[int, int], np.ndarray] = {}


def resize_area(rgb: np.ndarray, size: int | tuple[int, int]) -> np.ndarray:
    """Area (box) resampling of uint8 [H, W, C] to `size` (square int or (height, width))."""
    out_h, out_w = (size, size) if isinstance(size, int) else size
    h, w = rgb.shape[:2]
    if (h, w) == (out_h, out_w):
        return np.ascontiguousarray(rgb)
    wh = _weight_cache.setdefault((h, out_h), _area_weights(h, out_h)).astype(np.float32)
    ww = _weight_cache.setdefault((w, out_w), _area_weights(w, out_w)).astype(np.float32)
    x = rgb.astype(np.float32)
    y = np.einsum("oh,hwc->owc", wh, x)
    y = np.einsum("pw,owc->opc", ww, y)
    return np.clip(np.rint(y), 0, 255).astype(np.uint8)


# -- joint states -------------------------------------------------------------------------------
def joint_state_to_vector(msg: Any, joint_names: Sequence[str]) -> np.ndarray:
    """JointState.position ordered by joint_names (float32). ValueError naming missing,
    duplicate or NaN joints."""
    names = list(msg.name)
    pos = list(msg.position)
    if len(pos) != len(names):
        raise ValueError(f"joint state has {len(names)} names but {len(pos)} positions")
    index = {n: i for i, n in enumerate(names)}
    if len(index) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"joint state names joints {dup} more than once")
    missing = [j for j in joint_names if j not in index]
    if missing:
        raise ValueError(f"joint state is missing joints {missing}")
    vec = np.array([pos[index[j]] for j in joint_names], dtype=np.float64)
    bad = [joint_names[i] for i in np.flatnonzero(~np.isfinite(vec))]
    if bad:
        raise ValueError(f"joint state has non-finite positions for joints {bad}")
    return vec.astype(np.float32)


@dataclass
class StateMapping:
    """Robot units <-> model space (q01..q99 or lower..upper -> -1..1).

    Priority: checkpoint statistics (`norm`: engine NormStats with normalize_state /
    unnormalize_actions) > joint limits (lower..upper maps linearly to -1..1) > identity.
    The state is not clipped: pi0.5 was trained on the unclipped normalised state (a joint below
    its q01 is prompt bin -1), so the prompt must see the same values."""

    num_joints: int
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    norm: Any = None

    def __post_init__(self) -> None:
        if (self.lower is None) != (self.upper is None):
            raise ValueError("joint limits need both lower and upper")
        if self.lower is not None:
            self.lower = np.asarray(self.lower, dtype=np.float32)
            self.upper = np.asarray(self.upper, dtype=np.float32)
            if self.lower.shape != (self.num_joints,) or self.upper.shape != (self.num_joints,):
                raise ValueError(f"joint limits must have {self.num_joints} entries, got "
                                 f"{self.lower.size} lower and {self.upper.size} upper")
            if np.any(self.lower > self.upper):
                raise ValueError("joint_limits_lower must be <= joint_limits_upper for every joint")

    def to_model(self, state: np.ndarray) -> np.ndarray:
        return self._normalise(state, None if self.norm is None else self.norm.normalize_state)

    def _normalise(self, values: np.ndarray, by_norm) -> np.ndarray:
        """Robot units -> model space: `by_norm` (checkpoint statistics), else lower..upper to
        -1..1, else identity."""
        s = np.asarray(values, dtype=np.float32)
        if by_norm is not None:
            out = by_norm(s)
        elif self.lower is not None:
            span = np.where(self.upper > self.lower, self.upper - self.lower, np.float32(1.0))
            out = 2.0 * (s - self.lower) / span - 1.0
        else:
            out = s
        return np.ascontiguousarray(out, dtype=np.float32)

    def to_robot(self, actions: np.ndarray) -> np.ndarray:
        """[horizon, >= num_joints] model-space actions -> [horizon, num_joints] robot units."""
        a = np.asarray(actions, dtype=np.float32)
        if a.ndim != 2 or a.shape[1] < self.num_joints:
            raise ValueError(f"action chunk shape {list(a.shape)} has fewer than "
                             f"{self.num_joints} action dims")
        if self.norm is not None:
            out = self.norm.unnormalize_actions(a)[:, : self.num_joints]
        else:
            out = a[:, : self.num_joints]
            if self.lower is not None:
                out = (out + 1.0) * (self.upper - self.lower) / 2.0 + self.lower
        return np.ascontiguousarray(out, dtype=np.float32)


def actions_to_model(mapping: StateMapping, actions: np.ndarray) -> np.ndarray:
    """[steps, num_joints] robot-unit actions -> model units (the inverse of
    StateMapping.to_robot on the joints' dims; the padded dims are not executed)."""
    return mapping._normalise(actions, None if mapping.norm is None
                              else mapping.norm.normalize_actions)


def place_cameras(images: Sequence[np.ndarray], slots: Sequence[int]
                  ) -> tuple[np.ndarray, tuple[bool, ...] | None]:
    """Camera images in topic order -> [cameras, H, W, 3] in model camera order plus the
    camera_valid mask: a model camera without a topic is a zero image marked invalid (pi0.5
    masks missing cameras; masked tokens change nothing). Topics already in model order 0..C-1
    pass through unmasked."""
    if tuple(slots) == tuple(range(len(images))):
        return np.stack(images), None
    out = np.zeros((max(slots) + 1, *np.shape(images[0])), dtype=np.uint8)
    valid = [False] * out.shape[0]
    for img, slot in zip(images, slots):
        out[slot] = img
        valid[slot] = True
    return out, tuple(valid)


def text_kind(update: Any) -> str:
    """Engine kinds 'memory' | 'question' -> TextMemory kinds 'memory' | 'answer'."""
    return "memory" if update.kind == "memory" else "answer"
