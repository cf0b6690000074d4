"""Camera messages -> RGB uint8 arrays at the camera's own size, without importing ROS.

Two transports, chosen per camera topic (node parameter `camera_transports`, oxygen-replay by
the bag's message type):
- raw: sensor_msgs/Image (rgb8, bgr8, mono8, rgba8, bgra8; row padding via `step` honoured);
- compressed: sensor_msgs/CompressedImage in jpeg or png (what image_transport's compressed
  plugin publishes), decoded with Pillow.

A message is checked in two steps, so that a topic callback's cost does not grow with the image:
`check` looks only at the header fields and the byte count (encoding, declared size against the
data length, the compressed format and its magic bytes, and for jpeg / png the width, height and
bit depth read from the file's header without decoding it), and `decode` does the pixel work,
once, for the frame that is inferred.

Bounds (refused with the reason, before any pixel is decoded):
- a side larger than `max_side` pixels (node parameter `camera_max_side`, default
  DEFAULT_MAX_SIDE), or data larger than a max_side x max_side rgba8 image: an 8192x8192 jpeg
  costs gigabytes and a second to decode in the inference thread, for a model that looks at 224x224;
- 16-bit images (16UC1, mono16, rgb16, ... and 16-bit png) are refused, not converted: a 16-bit
  camera image is usually depth (millimetres) or a raw sensor with 10-12 significant bits, and no
  conversion to the 8-bit colour the checkpoints were trained on is right for all of them. The resize to the model's input is not done here: the engine
prepares images on the model's device (engine/runner/model_runner.py, ModelRunner.prepare_images).
Functions take any object with the ROS message's field names (rclpy messages on the robot,
rosbags messages offline), so the node and oxygen-replay decode identically.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

ENCODINGS = {"rgb8": 3, "bgr8": 3, "mono8": 1, "rgba8": 4, "bgra8": 4}
# sensor_msgs/image_encodings with more than 8 bits per channel: named in their refusal
WIDE_ENCODINGS = ("mono16", "rgb16", "bgr16", "rgba16", "bgra16", "16UC1", "16UC2", "16UC3",
                  "16UC4", "16SC1", "16SC2", "16SC3", "16SC4", "32SC1", "32FC1", "32FC3", "64FC1")
RAW, COMPRESSED = "raw", "compressed"
TRANSPORTS = (RAW, COMPRESSED)
# Larger images are refused before their pixels are touched (a corrupt header or a
# decompression bomb must not allocate gigabytes in the inference thread). 4096 takes a 4K
# camera (3840x2160); common robot cameras are 640x480 to 1920x1080.
DEFAULT_MAX_SIDE = 4096
_MAGIC = {"jpeg": (b"\xff\xd8\xff",), "png": (b"\x89PNG\r\n\x1a\n",)}
_JPEG_HEADER_BYTES = 1 << 16  # a jpeg's size (SOF marker) normally lies in its first 64 KiB


def _data_len(data: Any) -> int:
    try:
        return memoryview(data).nbytes
    except TypeError:  # a plain list of ints
        return len(data)


def max_bytes(max_side: int) -> int:
    """The most data bytes accepted for one image: a max_side x max_side rgba8 image."""
    return 4 * max_side * max_side


def _check_side(w: int, h: int, max_side: int) -> None:
    if h <= 0 or w <= 0:
        raise ValueError(f"image has an empty size {w}x{h}")
    if w > max_side or h > max_side:
        raise ValueError(f"image {w}x{h} is larger than camera_max_side {max_side} pixels on a "
                         "side: refused before decoding (publish a smaller image, or raise "
                         "camera_max_side)")


def _check_bytes(n: int, max_side: int) -> None:
    if n > max_bytes(max_side):
        raise ValueError(f"image data has {n} bytes, more than a {max_side}x{max_side} rgba8 "
                         f"image ({max_bytes(max_side)} bytes, camera_max_side): refused before "
                         "decoding")


def _wide_reason(what: str) -> str:
    return (f"{what}: images of more than 8 bits per channel are refused, not converted (a "
            "16-bit image is usually depth or a raw sensor whose scale the node cannot know; the "
            "model takes 8-bit colour): publish rgb8, bgr8 or mono8, or an 8-bit jpeg / png")


# -- raw (sensor_msgs/Image) --------------------------------------------------------------------
def check_raw(msg: Any, max_side: int = DEFAULT_MAX_SIDE) -> None:
    """The cheap checks of a sensor_msgs/Image: encoding, size, step*height against the data
    length. ValueError naming the problem; reads no pixel."""
    enc = msg.encoding
    if enc in WIDE_ENCODINGS:
        raise ValueError(_wide_reason(f"encoding {enc!r}"))
    if enc not in ENCODINGS:
        raise ValueError(f"unsupported image encoding {enc!r}; supported: {sorted(ENCODINGS)}")
    ch = ENCODINGS[enc]
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    _check_side(w, h, max_side)
    if step < w * ch:
        raise ValueError(f"image step {step} is smaller than width*channels = {w * ch} for {enc}")
    n = _data_len(msg.data)
    _check_bytes(n, max_side)
    if n != step * h:
        raise ValueError(f"image data has {n} bytes; {enc} {w}x{h} with step {step} "
                         f"needs step*height = {step * h}")


def decode_image_numpy(msg: Any, max_side: int = DEFAULT_MAX_SIDE) -> np.ndarray:
    """sensor_msgs/Image -> RGB uint8 [H, W, 3] (a copy). ValueError naming the problem."""
    check_raw(msg, max_side)
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


def _prefix(data: Any, n: int) -> bytes:
    """The first `n` bytes of a message's data, without copying the rest."""
    return bytes(data[:n]) if isinstance(data, list) else bytes(memoryview(data).cast("B")[:n])


def _png_header(head: bytes) -> tuple[int, int, int]:
    """(width, height, bit depth) from a png's IHDR chunk, the first chunk of every png."""
    if len(head) < 26 or head[12:16] != b"IHDR":
        raise ValueError("corrupt png image: no IHDR chunk at its start")
    return (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big"), head[24])


def _jpeg_size(data: Any, n: int) -> tuple[int, int]:
    """(width, height) of a jpeg from its header (Pillow opens lazily: the markers up to the
    frame header are read, no pixel is decoded); the first 64 KiB first, the whole file only
    when large metadata segments push the frame header further."""
    from PIL import Image as PILImage

    last: Exception | None = None
    for size in ((_JPEG_HEADER_BYTES, n) if n > _JPEG_HEADER_BYTES else (n,)):
        try:
            with PILImage.open(io.BytesIO(_prefix(data, size)), formats=("JPEG",)) as im:
                return im.size
        except Exception as exc:  # noqa: BLE001 - any header failure is a bad input
            last = exc
    raise ValueError(f"corrupt jpeg image: {last}")


def compressed_header(msg: Any) -> tuple[str, int, int, int]:
    """(kind, width, height, bits per channel) of a CompressedImage from the file's header, no
    decode; ValueError for a format, magic or header that is not a jpeg / png."""
    kind = compressed_kind(str(msg.format))
    data = msg.data
    n = _data_len(data)
    if n == 0:
        raise ValueError("compressed image has no data")
    head = _prefix(data, 32)
    if not head.startswith(_MAGIC[kind]):
        raise ValueError(f"compressed image data does not start like a {kind} file "
                         f"(format {msg.format!r})")
    if kind == "png":
        return (kind, *_png_header(head))
    return (kind, *_jpeg_size(data, n), 8)


def check_compressed(msg: Any, max_side: int = DEFAULT_MAX_SIDE) -> None:
    """The cheap checks of a sensor_msgs/CompressedImage: a jpeg/png format, data that starts
    with that codec's magic bytes, at most max_bytes(max_side) of it, and from the file's header
    a size within max_side and 8 bits per channel. A truncated or corrupt body is only found by
    decoding."""
    _check_bytes(_data_len(msg.data), max_side)
    kind, w, h, bits = compressed_header(msg)
    _check_side(w, h, max_side)
    if bits > 8:
        raise ValueError(_wide_reason(f"{w}x{h} {kind} with {bits} bits per channel"))


def decode_compressed(msg: Any, max_side: int = DEFAULT_MAX_SIDE) -> np.ndarray:
    """sensor_msgs/CompressedImage (jpeg, png) -> RGB uint8 [H, W, 3]. ValueError for a corrupt or
    truncated image (Pillow refuses a truncated file instead of filling it with grey)."""
    from PIL import Image as PILImage

    check_compressed(msg, max_side)
    kind = compressed_kind(str(msg.format))
    data = msg.data
    raw = data if isinstance(data, (bytes, bytearray)) else (
        bytes(data) if isinstance(data, list) else memoryview(data).cast("B").tobytes())
    try:
        im = PILImage.open(io.BytesIO(raw))
    except Exception as exc:  # noqa: BLE001 - any codec failure is a bad input, not a bad frame
        raise ValueError(f"corrupt {kind} image: {exc}") from None
    with im:
        _check_side(*im.size, max_side)  # the header again, as Pillow reads it
        if im.mode in ("I", "I;16", "I;16B", "I;16L", "F"):  # a wide mode check_compressed missed
            raise ValueError(_wide_reason(f"{im.size[0]}x{im.size[1]} {kind} (mode {im.mode})"))
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
def check_image(msg: Any, transport: str, max_side: int = DEFAULT_MAX_SIDE) -> None:
    if transport == RAW:
        check_raw(msg, max_side)
    elif transport == COMPRESSED:
        check_compressed(msg, max_side)
    else:
        raise ValueError(f"camera transport must be one of {TRANSPORTS}, got {transport!r}")


def decode_image(msg: Any, transport: str, max_side: int = DEFAULT_MAX_SIDE) -> np.ndarray:
    """RGB uint8 [H, W, 3] of a camera message of `transport` (raw | compressed)."""
    if transport == COMPRESSED:
        return decode_compressed(msg, max_side)
    return decode_image_numpy(msg, max_side)


@dataclass(frozen=True)
class CameraFrame:
    """A camera message that passed the cheap checks, stored as received (its bytes are not
    copied) until a pair that uses it is inferred; then `decode` runs, once."""

    msg: Any
    transport: str = RAW
    max_side: int = DEFAULT_MAX_SIDE

    @classmethod
    def checked(cls, msg: Any, transport: str = RAW,
                max_side: int = DEFAULT_MAX_SIDE) -> "CameraFrame":
        check_image(msg, transport, max_side)
        return cls(msg, transport, max_side)

    def decode(self) -> np.ndarray:
        return decode_image(self.msg, self.transport, self.max_side)


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
