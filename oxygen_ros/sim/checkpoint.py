"""A random-weight LeRobot checkpoint shaped for the simulator: one camera at the sim's image size,
4-D state and actions (JOINT_NAMES) with normalisation statistics spanning the reachable
workspace. For developing and testing the evaluation's plumbing before a trained policy exists
(its success rate is about 0: it is not a policy)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from .env import DEFAULT_IMAGE_SIZE, GRIPPER_CLOSED, GRIPPER_OPEN

# the hand's range over the tasks' layouts (x across the table, y depth, z height), metres
STATE_LOW = np.array([-0.25, 0.35, 0.05, GRIPPER_CLOSED], np.float32)
STATE_HIGH = np.array([0.25, 0.95, 0.45, GRIPPER_OPEN], np.float32)
CAMERA_KEY = "observation.images.sim_camera"


def write_random_checkpoint(folder: str | Path, image_size: int = DEFAULT_IMAGE_SIZE, seed: int = 0,
                            preset: str = "tiny") -> Path:
    from oxygen_ros.engine import (NormStats, build_tiny_tokenizer, init_model, load_model_config,
                                   save_lerobot_checkpoint)

    mc = load_model_config(preset)
    if image_size % mc.vision.patch_size:
        raise ValueError(f"image size {image_size} is not a multiple of the patch size {mc.vision.patch_size}")
    # room for an instruction and the 4 state tokens (the tiny preset's 48 are too few)
    mc = dataclasses.replace(mc, num_cameras=1, max_prompt_tokens=max(mc.max_prompt_tokens, 96),
                             vision=dataclasses.replace(mc.vision, image_size=image_size))
    stats = NormStats.quantiles(STATE_LOW, STATE_HIGH, STATE_LOW, STATE_HIGH)
    return save_lerobot_checkpoint(init_model(mc, seed=seed), mc, folder, norm_stats=stats,
                                   tokenizer=build_tiny_tokenizer(mc.vocab_size), camera_keys=[CAMERA_KEY])


def checkpoint_top_fovy(folder: str | Path) -> float | None:
    """The ALOHA top camera's field of view a checkpoint was trained on (training.json's data
    meta top_fovy; the shipped scene's 78 degrees for an ALOHA recording older than the field);
    None when the folder names no ALOHA training data."""
    import json

    f = Path(folder) / "training.json"
    if not f.is_file():
        return None
    meta = json.loads(f.read_text()).get("data_meta") or {}
    if meta.get("simulator") != "aloha":
        return None
    from .aloha.env import SCENE_TOP_FOVY, check_top_fovy

    return check_top_fovy(meta.get("top_fovy", SCENE_TOP_FOVY))


def checkpoint_rate_hz(folder: str | Path) -> float | None:
    """The rate a checkpoint's action chunk steps at, when its folder names one: training.json's
    control_rate_hz (this project's simulator training), else LeRobot's train_config.json env.fps
    (what the node reads as its chunk rate); None when it names none."""
    import json

    from ..engine import train_fps

    f = Path(folder) / "training.json"
    if f.is_file():
        rate = json.loads(f.read_text()).get("control_rate_hz")
        if rate is not None:
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1000:
                raise ValueError(f"{f}: control_rate_hz {rate!r} is not a rate in (0, 1000] Hz")
            return float(rate)
    return train_fps(Path(folder))
