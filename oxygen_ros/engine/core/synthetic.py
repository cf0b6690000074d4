"""A deterministic synthetic camera + joint-state stream (demo, tests, benchmarks)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..config.model_config import ModelConfig
from .observation import Observation


@dataclass
class SyntheticStream:
    """Frame i shows a moving, seed-dependent pattern per camera; joints follow slow sines."""

    config: ModelConfig
    seed: int = 0
    rate_hz: float = 10.0
    num_joints: int = 8  # at most the model's action_dim (a 7-joint StarVLA arm: 7)
    instruction: str = "pick up the red cube and place it in the bowl"
    num_cameras: int | None = None

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.num_joints = min(self.num_joints, self.config.action_dim)
        n = self.num_cameras or self.config.num_cameras
        self._phase = rng.uniform(0, 2 * np.pi, size=(n, 3))
        self._freq = rng.uniform(0.2, 1.0, size=self.num_joints)
        self._texture = rng.integers(0, 64, size=(n, self.config.vision.image_size,
                                                  self.config.vision.image_size, 3), dtype=np.uint8)

    def frame(self, i: int) -> Observation:
        size = self.config.vision.image_size
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
        cams = []
        for c, ph in enumerate(self._phase):
            chans = [
                127 + 100 * np.sin(2 * np.pi * (xx + 0.05 * i) + ph[0]),
                127 + 100 * np.sin(2 * np.pi * (yy - 0.03 * i) + ph[1]),
                127 + 100 * np.sin(2 * np.pi * (xx + yy) + 0.1 * i + ph[2]),
            ]
            img = np.stack(chans, axis=-1) + self._texture[c]
            cams.append(np.clip(img, 0, 255).astype(np.uint8))
        t = i / self.rate_hz
        state = (0.8 * np.sin(self._freq * t)).astype(np.float32)
        return Observation(images=np.stack(cams), state=state, instruction=self.instruction, stamp=t)

    def __iter__(self) -> Iterator[Observation]:
        i = 0
        while True:
            yield self.frame(i)
            i += 1
