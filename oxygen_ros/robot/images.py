"""Camera messages -> RGB uint8 arrays at the camera's own size, without importing ROS.

Two transports, chosen per camera topic (node parameter `camera_transports`, oxygen-replay by
the bag's message type):
- raw: sensor_msgs/Image (rgb8, bgr8, mono8, rgba8, bgra8; row padding via `step` honoured);
- compressed: sensor_msgs/CompressedImage in jpeg or png (what image_transport's compressed
  plugin publishes), decoded with Pillow.

A message is checked in two steps, so that a topic callback's cost does not grow with the image:
`check` looks only at the header fields and the byte count (encoding, declared size against the
data length, the compressed format and its magic bytes), and `decode` does the pixel work, once,
for the frame that is inferred. The resize to the model's input is not done here: the engine
prepares images on the model's device (engine/runner.py, ModelRunner.prepare_images).
Functions take any object with the ROS message's field names (rclpy messages on the robot,
rosbags messages offline), so the node and oxygen-replay decode identically.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

ENCODINGS = {"rgb8": 3, "bgr8": 3, "mono8": 1, "rgba8": 4, "bgra8": 4}
RAW, COMPRESSED = "raw", "compressed"
TRANSPORTS = (RAW, COMPRESSED)
# Larger images are refused before their pixels are touched (a corrupt header or a
# decompression bomb must not allocate gigabytes in the inference thread).
MAX_SIDE = 8192
_MAGIC = {"jpeg": (b"\xff\xd8\xff",), "png": (b"\x89PNG\r\n\x1a\n",)}


def _data_len(data: Any) -> int:
    try:
        return memoryview(data).nbytes
    except TypeError:  # a plain list of ints
        return len(data)


def _check_side(w: int, h: int) -> None:
    if h <= 0 or w <= 0:
        raise ValueError(f"image has an empty size {w}x{h}")
    if w > MAX_SIDE or h > MAX_SIDE:
        raise ValueError(f"image {w}x{h} is larger than {MAX_SIDE} pixels on a side")


# -- raw (sensor_msgs/Image) --------------------------------------------------------------------
def check_raw(msg: Any) -> None:
    """The cheap checks of a sensor_msgs/Image: encoding, size, step*height against the data
    length. ValueError naming the problem; reads no pixel."""
    enc = msg.encoding
    if enc not in ENCODINGS:
        raise ValueError(f"unsupported image encoding {enc!r}; supported: {sorted(ENCODINGS)}")
    ch = ENCODINGS[enc]
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    _check_side(w, h)
    if step < w * ch:
        raise ValueError(f"image step {step} is smaller than width*channels = {w * ch} for {enc}")
    n = _data_len(msg.data)
    if n != step * h:
        raise ValueError(f"image data has {n} bytes; {enc} {w}x{h} with step {step} "
                         f"needs step*height = {step * h}")


def decode_image_numpy(msg: Any) -> np.ndarray:
    """sensor_msgs/Image -> RGB uint8 [H, W, 3] (a copy). ValueError naming the problem."""
    check_raw(msg)
    enc, ch = msg.encoding, ENCODINGS[msg.encoding]
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    data = msg.data
    try:
        buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    except TypeError:  # a plain list of ints
        buf = np.asarray(data, dtype=np.uint8).reshape(-1)
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


# -- compressed (sensor_msgs/CompressedImage) ---------------------------------------------------
def compressed_kind(fmt: str) -> str:
    """'jpeg' | 'png' from a CompressedImage format string. image_transport writes e.g. "jpeg",
    "png" or "rgb8; jpeg compressed bgr8"; the pixel order is the codec's (RGB), whatever the
    source encoding named there."""
    f = fmt.lower()
    if "png" in f:
        return "png"
    if "jpeg" in f or "jpg" in f:
        return "jpeg"
    raise ValueError(f"unsupported compressed image format {fmt!r}; supported: jpeg, png")


def check_compressed(msg: Any) -> None:
    """The cheap checks of a sensor_msgs/CompressedImage: a jpeg/png format and data that starts
    with that codec's magic bytes. A truncated or corrupt body is only found by decoding."""
    kind = compressed_kind(str(msg.format))
    data = msg.data
    n = _data_len(data)
    if n == 0:
        raise ValueError("compressed image has no data")
    head = bytes(memoryview(data)[:8]) if not isinstance(data, list) else bytes(data[:8])
    if not head.startswith(_MAGIC[kind]):
        raise ValueError(f"compressed image data does not start like a {kind} file "
                         f"(format {msg.format!r})")


def decode_compressed(msg: Any) -> np.ndarray:
    """sensor_msgs/CompressedImage (jpeg, png) -> RGB uint8 [H, W, 3]. ValueError for a corrupt or
    truncated image (Pillow refuses a truncated file instead of filling it with grey)."""
    from PIL import Image as PILImage

    check_compressed(msg)
    kind = compressed_kind(str(msg.format))
    data = msg.data
    raw = data if isinstance(data, (bytes, bytearray)) else (
        bytes(data) if isinstance(data, list) else memoryview(data).cast("B").tobytes())
    try:
        im = PILImage.open(io.BytesIO(raw))
    except Exception as exc:  # noqa: BLE001 - any codec failure is a bad input, not a bad frame
        raise ValueError(f"corrupt {kind} image: {exc}") from None
    with im:
        _check_side(*im.size)  # from the header, before the pixels are decoded
        try:
            im.load()
            # a writable array (torch.from_numpy warns on a read-only one)
            out = np.array(im if im.mode == "RGB" else im.convert("RGB"), dtype=np.uint8)
        except Exception as exc:  # noqa: BLE001 - truncated data, bad CRC, zlib errors ...
            raise ValueError(f"corrupt {kind} image: {exc}") from None
    return np.ascontiguousarray(out)


def encode_compressed(rgb: np.ndarray, fmt: str = "jpeg", quality: int = 90) -> bytes:
    """RGB uint8 [H, W, 3] -> jpeg or png bytes with Pillow (for tests, tools, sample bags)."""
    from PIL import Image as PILImage

    if fmt not in _MAGIC:
        raise ValueError(f"compressed format must be jpeg or png, got {fmt!r}")
    buf = io.BytesIO()
    pil = PILImage.fromarray(np.ascontiguousarray(rgb, dtype=np.uint8))
    if fmt == "jpeg":
        pil.save(buf, format="JPEG", quality=quality)
    else:
        pil.save(buf, format="PNG")
    return buf.getvalue()


# -- one camera message, kept undecoded ------------------------------------------------------------
def check_image(msg: Any, transport: str) -> None:
    if transport == RAW:
        check_raw(msg)
    elif transport == COMPRESSED:
        check_compressed(msg)
    else:
        raise ValueError(f"camera transport must be one of {TRANSPORTS}, got {transport!r}")


def decode_image(msg: Any, transport: str) -> np.ndarray:
    """RGB uint8 [H, W, 3] of a camera message of `transport` (raw | compressed)."""
    return decode_compressed(msg) if transport == COMPRESSED else decode_image_numpy(msg)


@dataclass(frozen=True)
class CameraFrame:
    """A camera message that passed the cheap checks, stored as received (its bytes are not
    copied) until a pair that uses it is inferred; then `decode` runs, once."""

    msg: Any
    transport: str = RAW

    @classmethod
    def checked(cls, msg: Any, transport: str = RAW) -> "CameraFrame":
        check_image(msg, transport)
        return cls(msg, transport)

    def decode(self) -> np.ndarray:
        return decode_image(self.msg, self.transport)


class CameraError(ValueError):
    """A camera frame of a pair that could not be decoded; `camera` is its topic index."""

    def __init__(self, camera: int, reason: str) -> None:
        super().__init__(reason)
        self.camera = camera


def decode_frames(frames: Sequence[Any]) -> list[np.ndarray]:
    """The images of a pair's camera frames (CameraFrame, or arrays passed through), in topic
    order. CameraError naming the first camera that does not decode."""
    out = []
    for i, f in enumerate(frames):
        if isinstance(f, CameraFrame):
            try:
                out.append(f.decode())
            except ValueError as exc:
                raise CameraError(i, str(exc)) from None
        else:
            out.append(f)
    return out


def parse_transports(transports: Sequence[str], num_topics: int) -> tuple[str, ...]:
    """One transport per camera topic: empty = every topic raw. ValueError with the reason."""
    if not transports:
        return (RAW,) * num_topics
    if len(transports) != num_topics:
        raise ValueError(f"camera_transports has {len(transports)} entries for {num_topics} "
                         "camera_topics: give one (raw | compressed) per topic, or none")
    bad = [t for t in transports if t not in TRANSPORTS]
    if bad:
        raise ValueError(f"camera_transports must be raw or compressed, got {bad}")
    return tuple(transports)
