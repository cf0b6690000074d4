"""Build rosbags message objects from plain values (for writing bags: replay, tests, samples).

`make(store, msgtype, **values)` fills every field not given with its zero value, read from the
typestore's field list, so a message type that gains fields (FrameStats) still builds.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from rosbags.typesys.base import Nodetype
from rosbags.typesys.store import Typestore

from .typestore import (COMPRESSED_IMAGE, DIAGNOSTICS, FLOAT64_ARRAY, FRAME_STATS, IMAGE, JOINT_STATE,
                        TEXT_MEMORY, TRAJECTORY)

_NP = {"bool": np.bool_, "byte": np.uint8, "char": np.uint8, "int8": np.int8, "uint8": np.uint8,
       "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32,
       "int64": np.int64, "uint64": np.uint64, "float32": np.float32, "float64": np.float64}


def _zero(store: Typestore, desc: tuple) -> Any:
    kind, detail = desc
    if kind == Nodetype.NAME:
        return make(store, detail)
    if kind == Nodetype.BASE:
        name = detail[0]
        return "" if name in ("string", "wstring") else False if name == "bool" else \
            0.0 if name.startswith("float") else 0
    sub, n = detail
    if sub[0] == Nodetype.BASE and sub[1][0] in _NP:
        return np.zeros(n if kind == Nodetype.ARRAY else 0, dtype=_NP[sub[1][0]])
    return [_zero(store, sub) for _ in range(n if kind == Nodetype.ARRAY else 0)]


def make(store: Typestore, msgtype: str, **values: Any) -> Any:
    cls = store.types[msgtype]
    _, fields = store.fielddefs[msgtype]
    names = {f for f, _ in fields}
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"{msgtype} has no fields {sorted(unknown)}")
    return cls(**{f: values[f] if f in values else _zero(store, d) for f, d in fields})


def fields_of(store: Typestore, msgtype: str) -> list[str]:
    return [f for f, _ in store.fielddefs[msgtype][1]]


def stamp(store: Typestore, ns: int) -> Any:
    return make(store, "builtin_interfaces/msg/Time", sec=int(ns // 1_000_000_000),
                nanosec=int(ns % 1_000_000_000))


def stamp_ns(t: Any) -> int:
    return int(t.sec) * 1_000_000_000 + int(t.nanosec)


def header(store: Typestore, ns: int, frame_id: str = "") -> Any:
    return make(store, "std_msgs/msg/Header", stamp=stamp(store, ns), frame_id=frame_id)


def image(store: Typestore, rgb: np.ndarray, ns: int, frame_id: str = "camera") -> Any:
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w = rgb.shape[:2]
    return make(store, IMAGE, header=header(store, ns, frame_id), height=h, width=w,
                encoding="rgb8", step=w * 3, data=rgb.reshape(-1))


def compressed_image(store: Typestore, rgb: np.ndarray, ns: int, fmt: str = "jpeg",
                     frame_id: str = "camera", quality: int = 90) -> Any:
    """sensor_msgs/CompressedImage of an RGB image, encoded with Pillow (jpeg or png)."""
    from oxygen_ros.robot.images import encode_compressed

    data = encode_compressed(rgb, fmt, quality)
    return make(store, COMPRESSED_IMAGE, header=header(store, ns, frame_id), format=fmt,
                data=np.frombuffer(data, dtype=np.uint8).copy())


def joint_state(store: Typestore, names: Sequence[str], positions: Sequence[float], ns: int,
                field: str = "position") -> Any:
    """`field`: position, or velocity for velocity commands (as the node's ~/joint_command)."""
    return make(store, JOINT_STATE, header=header(store, ns), name=list(names),
                **{field: np.asarray(positions, dtype=np.float64)})


def float64_array(store: Typestore, values: Sequence[float]) -> Any:
    """std_msgs/Float64MultiArray (the node's command_type float64_array): values only, no stamp."""
    return make(store, FLOAT64_ARRAY, data=np.asarray(values, dtype=np.float64))


def trajectory(store: Typestore, chunk: np.ndarray, names: Sequence[str], ns: int, dt: float,
               frame_id: str = "base_link", field: str = "position") -> Any:
    """Like node/conversions.chunk_to_trajectory: point i at i*dt after the observation stamp
    (`field` velocity: the values in velocities)."""
    key = "velocities" if field == "velocity" else "positions"
    points = []
    for i, row in enumerate(np.asarray(chunk, dtype=np.float64)):
        t = int(round(i * dt * 1e9))
        points.append(make(store, "trajectory_msgs/msg/JointTrajectoryPoint", **{key: row.copy()},
                           time_from_start=make(store, "builtin_interfaces/msg/Duration",
                                                sec=t // 1_000_000_000, nanosec=t % 1_000_000_000)))
    return make(store, TRAJECTORY, header=header(store, ns, frame_id), joint_names=list(names),
                points=points)


def frame_stats(store: Typestore, ns: int, **values: Any) -> Any:
    known = set(fields_of(store, FRAME_STATS))
    return make(store, FRAME_STATS, header=header(store, ns),
                **{k: v for k, v in values.items() if k in known})


def text_memory(store: Typestore, ns: int, **values: Any) -> Any:
    return make(store, TEXT_MEMORY, header=header(store, ns), **values)


def diagnostics(store: Typestore, ns: int, statuses: Sequence[tuple[str, int, str, dict]]) -> Any:
    """statuses: (name, level 0..3, message, {key: value})."""
    out = []
    for name, level, message, values in statuses:
        kvs = [make(store, "diagnostic_msgs/msg/KeyValue", key=str(k), value=str(v))
               for k, v in values.items()]
        out.append(make(store, "diagnostic_msgs/msg/DiagnosticStatus", level=int(level), name=name,
                        message=message, values=kvs))
    return make(store, DIAGNOSTICS, header=header(store, ns), status=out)
