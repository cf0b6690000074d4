"""robot/images.py bounds read from a compressed file's header, without decoding: a jpeg whose
frame header lies beyond the first 64 KiB (a large ICC profile) is still measured; the bound is a
parameter; a 16-bit png is refused at decode too."""
from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image as PILImage

from oxygen_ros.robot import images


def _jpeg(w: int, h: int, **kw) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (w, h), (10, 200, 40)).save(buf, format="JPEG", quality=40, **kw)
    return buf.getvalue()


def test_jpeg_size_from_a_header_beyond_64_kib():
    data = _jpeg(640, 480, icc_profile=bytes(200_000))  # APP2 segments push the frame header out
    assert data.find(b"\xff\xc0") > 65536 or data.find(b"\xff\xc2") > 65536
    msg = SimpleNamespace(format="jpeg", data=data)
    assert images.compressed_header(msg) == ("jpeg", 640, 480, 8)
    images.check_compressed(msg)
    with pytest.raises(ValueError, match="640x480 is larger than camera_max_side 320"):
        images.check_compressed(msg, max_side=320)


def test_bytes_bound_before_the_header_is_read():
    msg = SimpleNamespace(format="jpeg", data=b"\xff\xd8\xff" + bytes(4 * 64 * 64))
    with pytest.raises(ValueError, match="more than a 64x64 rgba8 image"):
        images.check_compressed(msg, max_side=64)


def test_frame_keeps_its_bound_for_the_decode():
    rgb = np.zeros((40, 50, 3), np.uint8)
    msg = SimpleNamespace(format="png", data=images.encode_compressed(rgb, "png"))
    frame = images.CameraFrame.checked(msg, images.COMPRESSED, max_side=64)
    assert frame.decode().shape == (40, 50, 3)
    with pytest.raises(ValueError, match="camera_max_side 32"):
        images.CameraFrame.checked(msg, images.COMPRESSED, max_side=32)


def test_16_bit_png_refused_by_decode_too():
    buf = io.BytesIO()
    PILImage.fromarray(np.full((8, 8), 1000, np.uint16)).save(buf, format="PNG")
    msg = SimpleNamespace(format="png", data=buf.getvalue())
    with pytest.raises(ValueError, match="more than 8 bits per channel"):
        images.decode_compressed(msg)
