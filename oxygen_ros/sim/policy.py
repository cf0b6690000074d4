"""The simulator policy's shape, vocabulary and prompts: what training and serving must agree on.

The policy is this project's pi0.5 architecture (engine/families/pi05/model.py) at a size that trains on a
shared 2-core CPU within about an hour: one 64 x 64 camera in 16 x 16 patches (16 image tokens:
measured, a pilot at patch 8 (64 tokens) ran 1.8x slower per step and reached a higher loss
after the same 8 minutes), a 4-layer VLM and a 4-layer action expert of width 64, 4-D
proprioception and 4-D absolute targets (end-effector x, y, z and gripper opening); 0.64 M
parameters. docs/training.md has the numbers.

Actions: a chunk of ACTION_HORIZON absolute targets, one every ACTION_PERIOD_STEPS env steps
(Meta-World steps at 80 Hz, so a target every 50 ms = 20 Hz and a chunk covers 0.4 s). Why 20 Hz
and not one target per 12.5 ms step: the hand lags the target by 3-5 env steps anyway, so
consecutive 80 Hz targets carry little new information; a chunk of 8 coarser targets looks twice
as far ahead as 16 fine ones for half the action tokens, and 0.4 s covers the node's inference
latency on this CPU (tens of ms, more with language in the same frame) with room to spare.

Prompts: the engine's own Intake builds them (format_prompt with the discretised state, BOS
first; the memory prompt as a suffix without BOS), so training and serving tokenise identically.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch

from ..engine import (EngineConfig, ExpertConfig, HFTokenizer, Intake, ModelConfig, VisionConfig,
                      build_tiny_tokenizer)

ACTION_HORIZON = 8  # targets per chunk
ACTION_PERIOD_STEPS = 4  # env steps per target: 4 x 12.5 ms = 50 ms (20 Hz)
STATE_DIM = 4  # [ee_x, ee_y, ee_z, gripper]
ACTION_DIM = 4  # absolute targets [x, y, z, gripper]
IMAGE_SIZE = 64
VOCAB_SIZE = 512
# What the engine sends as its memory request by default: the caption is trained after it.
MEMORY_PROMPT: str = EngineConfig().memory_prompt


def policy_config(name: str = "sim-policy", width: int = 64, expert_width: int = 64,
                  depth: int = 4, vision_width: int = 64, vision_depth: int = 2,
                  horizon: int = ACTION_HORIZON, patch: int = 16, num_cameras: int = 1,
                  action_dim: int = ACTION_DIM, image_size: int = IMAGE_SIZE,
                  max_prompt_tokens: int = 64) -> ModelConfig:
    """The trainable simulator policy (see the module docstring for the sizes' reasons; ALOHA
    passes 3 cameras, 14-D actions and a longer prompt for its 14 state values)."""
    return ModelConfig(
        name=name, vocab_size=VOCAB_SIZE, depth=depth, num_heads=4, num_kv_heads=1, head_dim=32,
        vlm=ExpertConfig(width, 2 * width), action_experts=(ExpertConfig(expert_width, 2 * expert_width),),
        vision=VisionConfig(image_size=image_size, patch_size=patch, width=vision_width,
                            depth=vision_depth, num_heads=2, mlp_dim=2 * vision_width),
        num_cameras=num_cameras, max_prompt_tokens=max_prompt_tokens, action_horizon=horizon,
        action_dim=action_dim)


def corpus(texts: Iterable[str]) -> list[str]:
    """The tokenizer's training text: every instruction and caption, the prompt's fixed words and
    every state bin, so a prompt never falls back to single bytes."""
    texts = sorted(set(texts))
    lines = [" ".join(str(n) for n in range(-1, 256))] * 4
    lines += [f"Task: {t}, State: 0 1 2 3;\nAction: " for t in texts]
    lines += [MEMORY_PROMPT + t for t in texts] * 4
    return lines


def build_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE) -> HFTokenizer:
    """A deterministic byte-level BPE (pad 0, eos 1, bos 2) learnt from the instructions and
    captions; saved with the checkpoint as tokenizer.json."""
    return build_tiny_tokenizer(vocab_size, corpus=corpus(texts))


@dataclass
class PromptCodec:
    """Token ids for training, made by the engine's Intake exactly as when serving."""

    config: ModelConfig
    tokenizer: HFTokenizer
    memory_prompt: str = MEMORY_PROMPT

    def __post_init__(self) -> None:
        self.intake = Intake(self.config, self.tokenizer, num_blocks=1, reserved_blocks=0,
                             device=torch.device("cpu"))

    def prompt_ids(self, instruction: str, norm_state: np.ndarray) -> list[int]:
        ids = self.intake.prompt_ids(instruction, np.asarray(norm_state, dtype=np.float32))
        if len(ids) > self.config.max_prompt_tokens:
            raise ValueError(f"prompt of {len(ids)} tokens exceeds max_prompt_tokens "
                             f"{self.config.max_prompt_tokens}: {instruction!r}")
        return ids

    def memory_ids(self) -> list[int]:
        return self.intake.memory_ids(self.memory_prompt)

    def caption_ids(self, caption: str) -> list[int]:
        """The language target: the caption's tokens then EOS (where the engine stops)."""
        return self.tokenizer.encode(caption, add_bos=False) + [self.config.eos_token_id]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))


EVAL_SEED_BASE = 9_000_000  # evaluation layouts: far from the seeds demonstrations use (0..)


def policy_observation(built, image: np.ndarray, state: np.ndarray, instruction: str,
                       stamp: float):
    """One engine Observation for the policy: the camera image ([S, S, 3]; several cameras:
    [C, S, S, 3], in the policy's order) and the normalised state."""
    from ..engine import Observation

    norm = built.norm.normalize_state(np.asarray(state, dtype=np.float32))
    images = [image] if image.ndim == 3 else list(image)
    return Observation(images=images, state=norm.astype(np.float32), instruction=instruction,
                       stamp=stamp)
