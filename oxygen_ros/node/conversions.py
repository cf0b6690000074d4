"""ROS messages <-> engine values. The ONLY module that knows both ROS message types and engine types.

The parts that need no ROS import (image decoding: robot/images.py; joint-state vectors,
StateMapping, text kinds: robot/values.py) live in the robot layer, imported from there by the
node and the offline tools (oxygen-replay) alike.

Images: sensor_msgs/Image (rgb8, bgr8, mono8, rgba8, bgra8; row padding via `step` honoured)
and sensor_msgs/CompressedImage (jpeg, png) -> RGB uint8 [H, W, 3] at the camera's own size
(robot/images.py: cheap checks in the topic callback, the decode once per inferred frame). No
resize here: the engine prepares each image on the model's device as the checkpoint was trained
(EngineConfig.image_resize; default pad = openpi / LeRobot resize-with-pad, the aspect ratio
kept with black bars; docs/cameras.md). `decode_image` uses ROS 2's cv_bridge when it is
importable (on the robot) and gives the same arrays as the numpy path
(test/node/test_conversions.py checks this where cv_bridge exists).

Joint states: JointState -> float32 vector ordered by `joint_names` (ValueError naming missing
joints or non-finite values), normalised by `StateMapping` (checkpoint statistics, else joint
limits, else passed through), never clipped: pi0.5 bins an out-of-range joint as -1 or 255.

Stamps: every engine float stamp is derived from a header stamp, but outgoing messages use the
exact builtin_interfaces/Time of the source observation (kept by the node per frame), never a
float round trip.
"""
from __future__ import annotations

import array
import math
from typing import Any, Sequence

import numpy as np

from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Float64MultiArray, Header
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from oxygen_ros.engine import FrameOutput, RequestUpdate
from oxygen_ros.msg import FrameStats, TextMemory
from oxygen_ros.robot.frame_stats import frame_stats_fields

from oxygen_ros.robot import images
from oxygen_ros.robot.images import ENCODINGS, decode_image_numpy
from oxygen_ros.robot.values import text_kind

try:  # ROS 2 cv_bridge: only on the robot (PyPI's cv-bridge is a ROS 1 port and is not used)
    from cv_bridge import CvBridge as _CvBridge  # type: ignore[import-not-found]
except Exception:  # noqa: BLE001 - any import failure means "not available"
    _CvBridge = None

_bridge = None


def cv_bridge_available() -> bool:
    return _CvBridge is not None


# -- time -------------------------------------------------------------------------------------
def stamp_to_sec(stamp: Time) -> float:
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


def sec_to_stamp(t: float) -> Time:
    ns = int(round(t * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def copy_stamp(stamp: Time) -> Time:
    return Time(sec=stamp.sec, nanosec=stamp.nanosec)


# -- images -----------------------------------------------------------------------------------
def decode_image(msg: Image, use_cv_bridge: bool | None = None) -> np.ndarray:
    """RGB uint8 [H, W, 3]; cv_bridge decodes when available (use_cv_bridge=None: auto)."""
    global _bridge
    if use_cv_bridge is None:
        use_cv_bridge = _CvBridge is not None
    if not use_cv_bridge:
        return decode_image_numpy(msg)
    if _CvBridge is None:
        raise RuntimeError("cv_bridge is not importable")
    if msg.encoding not in ENCODINGS:
        raise ValueError(f"unsupported image encoding {msg.encoding!r}; supported: {sorted(ENCODINGS)}")
    if len(msg.data) != int(msg.step) * int(msg.height):
        raise ValueError(f"image data has {len(msg.data)} bytes; {msg.encoding} {msg.width}x{msg.height} "
                         f"with step {msg.step} needs step*height = {int(msg.step) * int(msg.height)}")
    if _bridge is None:
        _bridge = _CvBridge()
    return np.ascontiguousarray(_bridge.imgmsg_to_cv2(msg, desired_encoding="rgb8"), dtype=np.uint8)


def encode_image(rgb: np.ndarray, encoding: str = "rgb8", stamp: Time | None = None,
                 frame_id: str = "camera", pad: int = 0) -> Image:
    """RGB uint8 [H, W, 3] -> sensor_msgs/Image (tests and tools); `pad` extra bytes per row."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unsupported image encoding {encoding!r}")
    rgb = np.asarray(rgb, dtype=np.uint8)
    h, w = rgb.shape[:2]
    if encoding == "rgb8":
        px = rgb
    elif encoding == "bgr8":
        px = rgb[:, :, ::-1]
    elif encoding == "rgba8":
        px = np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], axis=2)
    elif encoding == "bgra8":
        px = np.concatenate([rgb[:, :, ::-1], np.full((h, w, 1), 255, np.uint8)], axis=2)
    else:
        px = rgb[:, :, :1]
    ch = ENCODINGS[encoding]
    rows = np.zeros((h, w * ch + pad), np.uint8)
    rows[:, : w * ch] = px.reshape(h, w * ch)
    msg = Image()
    msg.header = Header(stamp=stamp or Time(), frame_id=frame_id)
    msg.height, msg.width, msg.encoding = h, w, encoding
    msg.is_bigendian, msg.step = 0, w * ch + pad
    msg.data = rows.tobytes()
    return msg


def encode_compressed(rgb: np.ndarray, fmt: str = "jpeg", stamp: Time | None = None,
                      frame_id: str = "camera", quality: int = 90) -> CompressedImage:
    """RGB uint8 [H, W, 3] -> sensor_msgs/CompressedImage, jpeg or png (tests and tools)."""
    data = images.encode_compressed(rgb, fmt, quality)
    msg = CompressedImage()
    msg.header = Header(stamp=stamp or Time(), frame_id=frame_id)
    msg.format = fmt
    msg.data = data
    return msg


# -- joint states -------------------------------------------------------------------------------
def joint_command(names: Sequence[str], values: np.ndarray, stamp: Time,
                  field: str = "position") -> JointState:
    """The command as a JointState: the values in `field` (position, or velocity for velocity
    commands: robot/interface.py), named by the command names."""
    if field not in ("position", "velocity"):
        raise ValueError(f"a command goes in position or velocity, not {field!r}")
    msg = JointState()
    msg.header.stamp = stamp
    msg.name = list(names)
    setattr(msg, field, _doubles(values))
    return msg


def _doubles(values: np.ndarray) -> array.array:
    """A float64[] field's value: an array('d') is taken as is, where a list is checked element
    by element (control_rate_hz commands: microseconds per message)."""
    return array.array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())


def joint_command_array(values: np.ndarray) -> Float64MultiArray:
    """The command as forward_command_controller takes it: one value per joint, joint_names
    order, no stamp."""
    return Float64MultiArray(data=_doubles(values))


def chunk_to_trajectory(chunk: np.ndarray, names: Sequence[str], stamp: Time, dt: float,
                        frame_id: str = "base_link", field: str = "position") -> JointTrajectory:
    """[horizon, joints] (robot units) -> JointTrajectory; point i at time_from_start i*dt
    relative to header.stamp (the source observation's stamp); the values in each point's
    positions (`field` velocity: velocities)."""
    chunk = np.asarray(chunk, dtype=np.float64)
    if chunk.ndim != 2 or chunk.shape[1] != len(names):
        raise ValueError(f"chunk shape {list(chunk.shape)} does not match {len(names)} joint names")
    msg = JointTrajectory()
    msg.header = Header(stamp=stamp, frame_id=frame_id)
    msg.joint_names = list(names)
    points = []
    for i, row in enumerate(chunk):
        ns = int(round(i * dt * 1e9))
        p = JointTrajectoryPoint()
        setattr(p, "velocities" if field == "velocity" else "positions", [float(v) for v in row])
        p.time_from_start = Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
        points.append(p)
    msg.points = points
    return msg


# -- engine outputs -----------------------------------------------------------------------------
def frame_stats(out: FrameOutput, stamp: Time, action_rate_hz: float = 0.0,
                tokens_per_s: float = 0.0) -> FrameStats:
    """FrameOutput -> FrameStats through robot/frame_stats.py, the mapping oxygen-replay uses too."""
    msg = FrameStats()
    msg.header = Header(stamp=stamp, frame_id="")
    for name, value in frame_stats_fields(out, action_rate_hz, tokens_per_s).items():
        setattr(msg, name, value)
    return msg


def text_memory(update: RequestUpdate, stamp: Time, frame_id: str = "") -> TextMemory:
    """RequestUpdate -> TextMemory; `stamp` is the SOURCE observation's header stamp."""
    msg = TextMemory()
    msg.header = Header(stamp=stamp, frame_id=frame_id)
    msg.request_id = int(update.id)
    msg.kind = text_kind(update)
    msg.prompt = update.prompt
    msg.text = update.text
    msg.token_count = int(update.num_tokens)
    msg.is_final = bool(update.is_final)
    msg.frames_spanned = int(update.frames_spanned)
    msg.source_frame = int(update.birth_frame)
    reason = (update.finish_reason or "") if update.is_final else ""
    if reason == "refused" and getattr(update, "reason", ""):
        reason = f"refused: {update.reason}"  # the engine's refusal, with why
    msg.finish_reason = reason
    return msg


def refusal(prompt: str, reason: str, stamp: Time, request_id: int = 0) -> TextMemory:
    """The final ~/answer of a question that ends without an answer: empty text, is_final,
    finish_reason = why (request_id 0 when it never reached the engine)."""
    msg = TextMemory()
    msg.header = Header(stamp=stamp, frame_id="")
    msg.request_id = int(request_id)
    msg.kind = "answer"
    msg.prompt = prompt
    msg.text = ""
    msg.is_final = True
    msg.finish_reason = reason
    return msg


def markers(memory_text: str, stats_text: str, stamp: Time, frame_id: str = "base_link",
            ns: str = "oxygen") -> MarkerArray:
    """Two view-facing text markers above the robot: latest memory, and engine stats."""
    out = MarkerArray()
    for i, (text, z, scale, rgb) in enumerate((
            (memory_text or "(no memory yet)", 1.2, 0.08, (1.0, 1.0, 1.0)),
            (stats_text, 1.0, 0.05, (0.6, 0.9, 1.0)))):
        m = Marker()
        m.header = Header(stamp=stamp, frame_id=frame_id)
        m.ns, m.id = ns, i
        m.type, m.action = Marker.TEXT_VIEW_FACING, Marker.ADD
        m.pose.position.z = z
        m.pose.orientation.w = 1.0
        m.scale.z = scale
        m.color.r, m.color.g, m.color.b, m.color.a = rgb[0], rgb[1], rgb[2], 1.0
        m.text = text
        out.markers.append(m)
    return out


LEVELS = {"OK": DiagnosticStatus.OK, "WARN": DiagnosticStatus.WARN,
          "ERROR": DiagnosticStatus.ERROR, "STALE": DiagnosticStatus.STALE}


def diagnostic_status(name: str, level: str, message: str, values: dict[str, Any],
                      hardware_id: str = "") -> DiagnosticStatus:
    st = DiagnosticStatus()
    st.level = LEVELS[level]
    st.name, st.message, st.hardware_id = name, message, hardware_id
    st.values = [KeyValue(key=str(k), value=_fmt(v)) for k, v in values.items()]
    return st


def diagnostic_array(statuses: list[DiagnosticStatus], stamp: Time) -> DiagnosticArray:
    msg = DiagnosticArray()
    msg.header = Header(stamp=stamp, frame_id="")
    msg.status = statuses
    return msg


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)
