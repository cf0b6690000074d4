"""Observation: what one control frame sees (camera images, proprioception, the task)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, Union

import numpy as np

from ..config.model_config import ModelConfig

# Larger camera images are refused (a corrupt size must not allocate gigabytes on the device).
MAX_IMAGE_SIDE = 8192

Images = Union[np.ndarray, Sequence[np.ndarray]]


@dataclass(frozen=True)
class Observation:
    """images: RGB uint8, one per camera in camera order, each at its camera's own size: a list
    of [H, W, 3] arrays (sizes may differ), or one [C, H, W, 3] array when all share a size. The
    engine prepares them for the model (EngineConfig.image_resize); a model-size image passes
    unchanged. camera_valid masks cameras that are missing this frame (their tokens are left
    out, which is what masking them does).
    state: normalised proprioception (float32, q01..q99 -> -1..1, not clipped); stamp: seconds.
    instruction: the task; None uses EngineConfig.instruction (set live by update_config)."""

    images: Images
    state: np.ndarray
    instruction: str | None = None  # None: the engine's configured instruction
    stamp: float = 0.0
    camera_valid: tuple[bool, ...] | None = None
    # real-time chunking: the previous chunk's steps still executed from this observation on
    # (engine/model/rtc.py ActionPrior; None: an unguided chunk)
    prior: Any = None

    def validate(self, config: ModelConfig) -> None:
        cams = self.camera_images()
        if not 1 <= len(cams) <= config.num_cameras:
            raise ValueError(
                f"observation has {len(cams)} cameras; the model takes 1..{config.num_cameras}"
            )
        for i, img in enumerate(cams):
            if not isinstance(img, np.ndarray):
                raise ValueError(f"camera {i} image must be a numpy array, got {type(img).__name__}")
            if img.dtype != np.uint8:
                raise ValueError(f"camera {i} image must be uint8, got {img.dtype}")
            if img.ndim != 3 or img.shape[2] != 3:
                raise ValueError(f"camera {i} image must have shape [H, W, 3], got {list(img.shape)}")
            if not (1 <= img.shape[0] <= MAX_IMAGE_SIDE and 1 <= img.shape[1] <= MAX_IMAGE_SIDE):
                raise ValueError(f"camera {i} image is {img.shape[1]}x{img.shape[0]}; each side "
                                 f"must be in 1..{MAX_IMAGE_SIDE}")
        if self.camera_valid is not None:
            if len(self.camera_valid) != len(cams):
                raise ValueError(
                    f"camera_valid has {len(self.camera_valid)} entries for {len(cams)} cameras"
                )
            if not any(self.camera_valid):
                raise ValueError("every camera is masked: an observation needs at least one image")
        state = np.asarray(self.state)
        if state.ndim != 1:
            raise ValueError(f"state must be a 1-D vector, got shape {list(state.shape)}")
        if state.size > config.action_dim:  # the prompt budget is checked for this many joints
            raise ValueError(f"state has {state.size} joints; the model takes at most "
                             f"{config.action_dim} (action_dim)")
        bad = np.flatnonzero(~np.isfinite(state))
        if bad.size:
            raise ValueError(f"state has non-finite values at joint indices {bad.tolist()}")
        if self.instruction is not None and (
                not isinstance(self.instruction, str) or not self.instruction.strip()):
            raise ValueError("instruction must be a non-empty string")

    def camera_images(self) -> list[np.ndarray]:
        """One [H, W, 3] image per camera (views of a stacked array, not copies)."""
        img = self.images
        if isinstance(img, np.ndarray):
            if img.ndim != 4:
                raise ValueError(f"observation images must be [cameras, H, W, 3] or a list of "
                                 f"[H, W, 3] images, got shape {list(img.shape)}")
            return list(img)
        if isinstance(img, (str, bytes)) or not isinstance(img, Sequence):
            raise ValueError(f"observation images must be a numpy array or a list of arrays, "
                             f"got {type(img).__name__}")
        return list(img)

    def valid_images(self) -> list[np.ndarray]:
        """The images of the cameras not masked, in camera order."""
        cams = self.camera_images()
        if self.camera_valid is None:
            return cams
        return [c for c, ok in zip(cams, self.camera_valid) if ok]
