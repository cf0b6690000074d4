"""One rosbags Typestore: ROS 2 Kilted's standard types plus our msg/*.msg, read at run time.

The .msg files are parsed when the typestore is built (not copied into Python), so fields added
to msg/ are picked up without a code change. Where they are looked up, in order: the
OXYGEN_ROS_MSG_DIR environment variable, the source tree's msg/ (next to this package), the
installed share/oxygen_ros/msg (colcon / ament index).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

from rosbags.typesys import Stores, get_typestore, get_types_from_msg
from rosbags.typesys.store import Typestore

PACKAGE = "oxygen_ros"


def msg_dir() -> Path:
    """The folder holding our .msg files. FileNotFoundError naming the places looked at."""
    tried = []
    env = os.environ.get("OXYGEN_ROS_MSG_DIR")
    if env:
        tried.append(Path(env))
    tried.append(Path(__file__).resolve().parents[2] / "msg")
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            tried.append(Path(prefix) / "share" / PACKAGE / "msg")
    for d in tried:
        if d.is_dir() and any(d.glob("*.msg")):
            return d
    raise FileNotFoundError(f"no {PACKAGE} .msg files found; looked in {[str(d) for d in tried]}")


def msg_types(folder: Path | None = None) -> dict[str, str]:
    """{'oxygen_ros/msg/Name': definition text} for every .msg file in the folder."""
    folder = folder or msg_dir()
    return {f"{PACKAGE}/msg/{p.stem}": p.read_text() for p in sorted(folder.glob("*.msg"))}


@functools.lru_cache(maxsize=4)
def typestore(folder: str | None = None) -> Typestore:
    """Kilted's types + ours (cached per folder; the result is shared, do not register into it)."""
    store = get_typestore(Stores.ROS2_KILTED)
    types: dict = {}
    for name, text in msg_types(Path(folder) if folder else None).items():
        types.update(get_types_from_msg(text, name))
    store.register(types)
    return store


FRAME_STATS = f"{PACKAGE}/msg/FrameStats"
TEXT_MEMORY = f"{PACKAGE}/msg/TextMemory"
IMAGE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
CAMERA_TYPES = {IMAGE: "raw", COMPRESSED_IMAGE: "compressed"}  # camera message -> transport
JOINT_STATE = "sensor_msgs/msg/JointState"
# the node's ~/joint_command with command_type float64_array (forward_command_controller's)
FLOAT64_ARRAY = "std_msgs/msg/Float64MultiArray"
TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
DIAGNOSTICS = "diagnostic_msgs/msg/DiagnosticArray"
STRING = "std_msgs/msg/String"
