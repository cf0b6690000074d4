"""Observation: what one control frame sees (camera images, proprioception, the task)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .config import ModelConfig


@dataclass(frozen=True)
class Observation:
    """images: uint8 [C, H, W, 3] RGB, one per camera in camera order; camera_valid masks cameras
    that are missing this frame (their tokens are left out, which is what masking them does).
    state: normalised proprioception (float32, q01..q99 -> -1..1, not clipped); stamp: seconds.
    instruction: the task; None uses EngineConfig.instruction (set live by update_config)."""

    images: np.ndarray
    state: np.ndarray
    instruction: str | None = None  # None: the engine's configured instruction
    stamp: float = 0.0
    camera_valid: tuple[bool, ...] | None = None
    meta: dict = field(default_factory=dict, compare=False)
    # real-time chunking: the previous chunk's steps still executed from this observation on
    # (engine/rtc.py ActionPrior; None: an unguided chunk)
    prior: Any = None

    def validate(self, config: ModelConfig) -> None:
        img = self.images
        size = config.vision.image_size
        if not isinstance(img, np.ndarray):
            raise ValueError(f"observation images must be a numpy array, got {type(img).__name__}")
        if img.dtype != np.uint8:
            raise ValueError(f"observation images must be uint8, got {img.dtype}")
        if img.ndim != 4 or img.shape[1:] != (size, size, 3):
            raise ValueError(
                f"observation images must have shape [cameras, {size}, {size}, 3], got {list(img.shape)}"
            )
        if not 1 <= img.shape[0] <= config.num_cameras:
            raise ValueError(
                f"observation has {img.shape[0]} cameras; the model takes 1..{config.num_cameras}"
            )
        if self.camera_valid is not None:
            if len(self.camera_valid) != img.shape[0]:
                raise ValueError(
                    f"camera_valid has {len(self.camera_valid)} entries for {img.shape[0]} cameras"
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

    def valid_images(self) -> np.ndarray:
        if self.camera_valid is None:
            return self.images
        return self.images[np.asarray(self.camera_valid, dtype=bool)]
