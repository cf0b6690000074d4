"""Camera image -> the vision tower's square input in [-1, 1], as pi0.5 checkpoints were trained.

`pad` (the default) is openpi's resize-with-pad, which LeRobot's PI05 copies
(`resize_with_pad_torch`): on the image as float in [0, 1], ratio = max(w / W, h / H); bilinear
(align_corners=False, no antialias) to (int(h / ratio), int(w / ratio)); clamp to [0, 1]; centred
zero padding, the odd pixel at the bottom / right; then x * 2 - 1, so the bars are -1. The
aspect ratio is kept: a 640x480 camera becomes a 224x168 picture between two black bars, which
is what the checkpoint saw in training.
`stretch` resizes to the square (bilinear with antialias, as torchvision's Resize does), the
aspect ratio lost; for checkpoints trained that way.
LeRobot v0.4.x padded with -1 in [0, 1] (bars of -3 after x * 2 - 1): `pad_value` is the bars'
value in model space (ModelConfig.image_pad_value, from the checkpoint's conventions).
A model-size image is only scaled to [-1, 1]. Pure torch functions: the ModelRunner (the only
owner of torch state) calls them on the model's device.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def pad_geometry(h: int, w: int, size: int) -> tuple[int, int, int, int]:
    """(resized height, resized width, top, left) of resize-with-pad into size x size. A side
    that would round to 0 pixels (a 1-pixel-tall wide image) keeps 1 pixel."""
    ratio = max(w / size, h / size)
    rh, rw = max(1, int(h / ratio)), max(1, int(w / ratio))
    return rh, rw, (size - rh) // 2, (size - rw) // 2


def resize_with_pad(x: torch.Tensor, size: int, fill: float = 0.0) -> torch.Tensor:
    """x: float [N, 3, h, w] in [0, 1] -> [N, 3, size, size] in [0, 1], bars of `fill` (0; -1
    for LeRobot v0.4.x)."""
    h, w = x.shape[-2:]
    rh, rw, top, left = pad_geometry(h, w, size)
    if (rh, rw) != (h, w):
        x = F.interpolate(x, size=(rh, rw), mode="bilinear", align_corners=False).clamp_(0.0, 1.0)
    out = x.new_full((x.shape[0], x.shape[1], size, size), fill)
    out[:, :, top: top + rh, left: left + rw] = x
    return out


def stretch(x: torch.Tensor, size: int, fill: float = 0.0) -> torch.Tensor:
    """x: float [N, 3, h, w] in [0, 1] -> [N, 3, size, size] in [0, 1], aspect ratio lost."""
    if tuple(x.shape[-2:]) == (size, size):
        return x
    return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False,
                         antialias=True).clamp_(0.0, 1.0)


RESIZERS = {"pad": resize_with_pad, "stretch": stretch}


def prepare(image: torch.Tensor, size: int, mode: str = "pad", pad_value: float = -1.0) -> torch.Tensor:
    """uint8 [h, w, 3] (on the target device) -> float32 [3, size, size] in [-1, 1] (bars of
    `pad_value` in model space: -1, or -3 for LeRobot v0.4.x)."""
    if mode not in RESIZERS:
        raise ValueError(f"image_resize must be one of {tuple(RESIZERS)}, got {mode!r}")
    x = image.permute(2, 0, 1)[None].to(torch.float32).div_(255.0)
    if tuple(x.shape[-2:]) != (size, size):
        x = RESIZERS[mode](x, size, (pad_value + 1.0) / 2.0)
    return x[0].mul_(2.0).sub_(1.0)
