"""Image preparation (engine/runner/images.py, ModelRunner.prepare_images) against an independent
float64 numpy implementation of openpi / LeRobot resize-with-pad, and what the engine's actions see."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.runner.images import prepare
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.observation import Observation
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["tiny"]
RNG = np.random.default_rng(7)


# -- the reference, written from the formula (not from engine/runner/images.py) -------------------------
def _axis(n_in: int, n_out: int):
    """Source taps of bilinear resampling, align_corners=False: src = (dst + 0.5) * in/out - 0.5,
    clamped at 0; the right tap clamped at the last pixel."""
    src = np.maximum((np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, src - i0


def ref_bilinear(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    r0, r1, ly = _axis(x.shape[0], oh)
    c0, c1, lx = _axis(x.shape[1], ow)
    rows = x[r0] * (1 - ly)[:, None, None] + x[r1] * ly[:, None, None]
    return rows[:, c0] * (1 - lx)[None, :, None] + rows[:, c1] * lx[None, :, None]


def ref_pad(img: np.ndarray, size: int) -> np.ndarray:
    """uint8 [h, w, 3] -> float64 [size, size, 3] in [-1, 1], as LeRobot's resize_with_pad_torch
    then x * 2 - 1."""
    x = img.astype(np.float64) / 255.0
    h, w = x.shape[:2]
    ratio = max(w / size, h / size)
    rh, rw = max(int(h / ratio), 1), max(int(w / ratio), 1)
    y = np.clip(ref_bilinear(x, rh, rw), 0.0, 1.0)
    pad_h0, rem_h = divmod(size - rh, 2)
    pad_w0, rem_w = divmod(size - rw, 2)
    out = np.pad(y, ((pad_h0, pad_h0 + rem_h), (pad_w0, pad_w0 + rem_w), (0, 0)))
    return out * 2.0 - 1.0


def ref_stretch_plain(img: np.ndarray, size: int) -> np.ndarray:
    return np.clip(ref_bilinear(img.astype(np.float64) / 255.0, size, size), 0, 1) * 2 - 1


def ours(img: np.ndarray, size: int, mode: str = "pad") -> np.ndarray:
    return prepare(torch.from_numpy(img), size, mode).permute(1, 2, 0).double().numpy()


@pytest.mark.parametrize("h,w", [(480, 640), (720, 1280), (640, 480), (1280, 720), (300, 300),
                                 (48, 64), (1, 640), (640, 1), (1, 1), (2, 3), (225, 224)])
@pytest.mark.parametrize("size", [224, 32])
def test_pad_matches_the_formula(h, w, size):
    img = RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)
    got, want = ours(img, size), ref_pad(img, size)
    assert got.shape == want.shape == (size, size, 3)
    # torch computes source coordinates in float32 (spacing 6e-5 near x = 640, 1.2e-4 near
    # 1280): that, not the formula, is the difference to float64; a wrong tap or weight is >1e-2
    np.testing.assert_allclose(got, want, atol=3e-4, rtol=0)


def test_pad_geometry_of_a_640x480_camera():
    """224x168 between two 28-row bars of -1; the odd pixel of an odd pad goes to the bottom."""
    img = np.full((480, 640, 3), 200, np.uint8)
    out = ours(img, 224)
    assert (out[:28] == -1).all() and (out[196:] == -1).all()
    np.testing.assert_allclose(out[28:196], 200 / 255 * 2 - 1, atol=1e-6)
    odd = ours(np.full((3, 224, 3), 255, np.uint8), 224)  # 221 rows of padding: 110 top, 111 bottom
    assert (odd[:110] == -1).all() and (odd[113:] == -1).all() and (odd[110:113] > 0.99).all()


def test_model_size_image_passes_unchanged():
    img = RNG.integers(0, 256, (224, 224, 3), dtype=np.uint8)
    for mode in ("pad", "stretch"):
        assert np.array_equal(ours(img, 224, mode), img.astype(np.float32) / 255 * 2 - 1)


def test_stretch_fills_the_square():
    img = RNG.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    out = ours(img, 224, "stretch")
    assert out.shape == (224, 224, 3) and out.min() >= -1 and out.max() <= 1
    assert not (out[:28] == -1).all()  # no bars
    up = ours(RNG.integers(0, 256, (48, 64, 3), dtype=np.uint8), 224, "stretch")
    assert up.shape == (224, 224, 3)  # upscaling: antialias does nothing, plain bilinear
    small = RNG.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    np.testing.assert_allclose(ours(small, 224, "stretch"), ref_stretch_plain(small, 224), atol=2e-5)


def test_runner_prepares_on_its_device_in_its_dtype():
    engine = Engine(MC, EngineConfig(), model=init_model(MC, seed=0), tokenizer=build_tiny_tokenizer(512))
    imgs = [RNG.integers(0, 256, (480, 640, 3), dtype=np.uint8),
            RNG.integers(0, 256, (32, 32, 3), dtype=np.uint8)]
    pix = engine.runner.prepare_images(imgs, "pad")
    assert pix.shape == (2, 3, 32, 32) and pix.dtype == torch.float32
    np.testing.assert_allclose(pix[0].permute(1, 2, 0).numpy(), ref_pad(imgs[0], 32), atol=3e-4)
    assert np.array_equal(pix[1].permute(1, 2, 0).numpy(), imgs[1].astype(np.float32) / 255 * 2 - 1)


# -- what the actions see -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def parts():
    return init_model(MC, seed=0), build_tiny_tokenizer(512)


def _actions(parts, images, inject=None, **cfg) -> np.ndarray:
    """One frame's actions; `inject`: a float [-1, 1] HWC image per camera fed to the vision tower
    instead of the engine's own preparation."""
    engine = Engine(MC, EngineConfig(memory_every_n_frames=0, **cfg), model=parts[0], tokenizer=parts[1])
    if inject is not None:
        pix = torch.stack([torch.from_numpy(np.ascontiguousarray(i)).permute(2, 0, 1).float()
                           for i in inject])
        engine.runner.prepare_images = lambda imgs, resize="pad": pix.clone()
    state = np.linspace(-0.5, 0.5, 6).astype(np.float32)
    return engine.step(Observation(images=images, state=state, instruction="pick up the cube")).actions


def test_a_640x480_camera_gives_the_actions_of_its_padded_image_not_of_the_stretched_one(parts):
    cams = [RNG.integers(0, 256, (480, 640, 3), dtype=np.uint8),
            RNG.integers(0, 256, (720, 1280, 3), dtype=np.uint8)]
    got = _actions(parts, cams)
    padded = _actions(parts, cams, inject=[ref_pad(c, 32) for c in cams])
    stretched = _actions(parts, cams, inject=[ref_stretch_plain(c, 32) for c in cams])
    np.testing.assert_allclose(got, padded, atol=1e-4)
    assert np.abs(got - stretched).max() > 1e-2  # the difference is not rounding
    assert np.abs(_actions(parts, cams, image_resize="stretch") - got).max() > 1e-2


def test_padded_camera_equals_a_model_size_image_with_bars(parts):
    """Through the public API only: a constant 480x640 camera and the 32x32 image resize-with-pad
    makes of it (4-row black bars) give the same actions."""
    cam = np.zeros((480, 640, 3), np.uint8)
    cam[:] = (30, 140, 220)
    square = np.zeros((32, 32, 3), np.uint8)
    square[4:28] = (30, 140, 220)
    np.testing.assert_allclose(_actions(parts, [cam]), _actions(parts, [square]), atol=1e-5)
    stretched = np.zeros((32, 32, 3), np.uint8)
    stretched[:] = (30, 140, 220)
    assert np.abs(_actions(parts, [cam]) - _actions(parts, [stretched])).max() > 1e-2
