"""What a checkpoint folder says about itself: its format, model shape, cameras, state/action
dimensions, normalisation statistics and the tokenizer it names. Reads only the small files.

LeRobot pi05 (``save_pretrained`` + pi05 processors): config.json ("type": "pi05", input/output
features, chunk_size, n_action_steps, image_resolution, normalization_mapping), statistics in the
normalizer processors' safetensors files, the tokenizer named by the tokenizer processor.
openpi PyTorch (openpi's convert_jax_model_to_pytorch): config.json with action_dim,
action_horizon, paligemma_variant, action_expert_variant, precision; statistics in
assets/<asset_id>/norm_stats.json (asset ids may hold a slash, e.g. physical-intelligence/libero);
cameras base_0_rgb, left_wrist_0_rgb, right_wrist_0_rgb; the PaliGemma tokenizer.
Our own ModelConfig may ride along under "oxygen_model_config" (small test checkpoints).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from safetensors.numpy import load_file as np_load_file

from ..config.model_config import ModelConfig, model_config_from_dict
from ..config.presets import PRESETS
from .conventions import AUTO, Conventions, lerobot_conventions, openpi_conventions
from .norm import NormStats
from .tokenizer import PALIGEMMA_REPO

CONFIG_KEY = "oxygen_model_config"
PRE_STATE = "policy_preprocessor_step_3_normalizer_processor.safetensors"
POST_STATE = "policy_postprocessor_step_0_unnormalizer_processor.safetensors"
OPENPI_CAMERAS = ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")
PI05_VARIANTS = ("gemma_2b", "gemma_300m")


@dataclass(frozen=True)
class CheckpointInfo:
    """Facts of a checkpoint beyond its weights, for the node and oxygen-inspect."""

    folder: Path
    format: str  # "lerobot" | "openpi" | "qwen3vl" (qwen3vl_checkpoint.qwen3vl_info)
    camera_keys: tuple[str, ...]  # model camera order
    state_dim: int | None  # robot state values (statistics / features), None if unknown
    action_dim: int | None  # robot action values (unpadded), None if unknown
    n_action_steps: int  # steps of each chunk meant to be executed
    image_resolution: tuple[int, int]
    tokenizer_repos: tuple[str, ...]  # repo ids the checkpoint names for its tokenizer
    asset_id: str | None = None  # openpi statistics used
    dtype: str | None = None  # what the config says the weights are
    fps: float | None = None  # the rate its actions' steps were trained at, when the folder says
    conventions: Conventions | None = None  # pi0.5 pre/post-processing by version (conventions.py)


def detect_format(folder: Path) -> str:
    cfg_file = folder / "config.json"
    if not cfg_file.is_file():
        raise ValueError(f"{cfg_file} not found: not a LeRobot or openpi checkpoint folder")
    cfg = json.loads(cfg_file.read_text())
    if cfg.get("type") == "pi05":
        return "lerobot"
    if "action_horizon" in cfg and "paligemma_variant" in cfg:
        return "openpi"
    if "type" in cfg:
        raise ValueError(f"{cfg_file}: policy type {cfg['type']!r}; only pi05 checkpoints are served")
    raise ValueError(f"{cfg_file} is neither a LeRobot pi05 config (\"type\": \"pi05\") nor an "
                     "openpi one (action_horizon, paligemma_variant)")


def _pi05_config(cfg: dict, where: Path) -> ModelConfig:
    variants = (cfg.get("paligemma_variant"), cfg.get("action_expert_variant"))
    if variants != PI05_VARIANTS:
        raise ValueError(f"{where}: variants {variants}; pi0.5 checkpoints use {PI05_VARIANTS}")
    return PRESETS["pi05"]


def _processor_steps(folder: Path, name: str) -> list[dict]:
    p = folder / name
    return json.loads(p.read_text()).get("steps", []) if p.is_file() else []


def _step(steps: list[dict], registry_name: str) -> dict | None:
    return next((s for s in steps if s.get("registry_name") == registry_name), None)


def _feature_dim(features: dict, key: str) -> int | None:
    shape = (features.get(key) or {}).get("shape")
    return int(shape[0]) if shape else None


def train_fps(folder: Path) -> float | None:
    """The action rate a LeRobot training run names: train_config.json (saved next to
    config.json by LeRobot's training) -> env.fps; None when it names none (no env, no file)."""
    f = folder / "train_config.json"
    if not f.is_file():
        return None
    env = json.loads(f.read_text()).get("env") or {}
    fps = env.get("fps") if isinstance(env, dict) else None
    if fps is None:
        return None
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 0 < fps <= 1000:
        raise ValueError(f"{f}: env.fps {fps!r} is not a rate in (0, 1000] Hz")
    return float(fps)


def _apply(mc: ModelConfig, stats: NormStats | None, conv: Conventions) -> tuple[ModelConfig, NormStats]:
    """The model config with the conventions' prompt / image settings; the statistics with their
    relative actions (identity statistics for a folder without any: LeRobot normalises nothing)."""
    mc = mc.replace(state_prompt_pad=conv.state_prompt_pad, image_pad_value=conv.image_pad_value)
    stats = stats if stats is not None else NormStats.identity()
    return mc, dataclasses.replace(stats, relative=conv.relative)


def read_lerobot(folder: Path, lerobot_version: str = AUTO) -> tuple[ModelConfig, CheckpointInfo, NormStats | None]:
    cfg = json.loads((folder / "config.json").read_text())
    inputs, outputs = cfg.get("input_features") or {}, cfg.get("output_features") or {}
    cams = [k for k, f in inputs.items() if isinstance(f, dict) and f.get("type") == "VISUAL"]
    # LeRobot adds empty_cameras as masked "observation.images.empty_camera_{i}" features
    cams += [k for k in (f"observation.images.empty_camera_{i}" for i in range(int(cfg.get("empty_cameras", 0))))
             if k not in cams]
    cams = tuple(cams)
    if CONFIG_KEY in cfg:
        mc = model_config_from_dict(cfg[CONFIG_KEY])
    else:
        mc = _pi05_config(cfg, folder / "config.json")
        over: dict = {}
        for ours, theirs in (("action_horizon", "chunk_size"), ("action_dim", "max_action_dim"),
                             ("max_prompt_tokens", "tokenizer_max_length")):
            if theirs in cfg:
                over[ours] = int(cfg[theirs])
        if cams:
            over["num_cameras"] = len(cams)
        mc = mc.replace(**over)
    res = tuple(int(v) for v in cfg.get("image_resolution") or (mc.vision.image_size,) * 2)
    if res != (mc.vision.image_size,) * 2:
        raise ValueError(f"{folder}: image_resolution {list(res)} but the vision tower takes "
                         f"{mc.vision.image_size}x{mc.vision.image_size} images")
    if cams and len(cams) != mc.num_cameras:
        raise ValueError(f"{folder}: {len(cams)} camera features but the model takes {mc.num_cameras}")

    pre, post = (_processor_steps(folder, n) for n in ("policy_preprocessor.json", "policy_postprocessor.json"))
    norm_step = _step(pre, "normalizer_processor") or {}
    unnorm_step = _step(post, "unnormalizer_processor") or {}
    pre_file = folder / norm_step.get("state_file", PRE_STATE)
    post_file = folder / unnorm_step.get("state_file", POST_STATE)
    stats = None
    if pre_file.is_file() and post_file.is_file():
        conf = norm_step.get("config") or {}
        norm_map = conf.get("norm_map") or cfg.get("normalization_mapping") or {}
        flat = {**np_load_file(str(pre_file)), **np_load_file(str(post_file))}
        stats = NormStats.from_lerobot(flat, norm_map, float(conf.get("eps", 1e-8)))
    tok_step = _step(pre, "tokenizer_processor") or {}
    named = (tok_step.get("config") or {}).get("tokenizer_name")
    repos = (named,) if named else ((PALIGEMMA_REPO,) if mc.vocab_size == PRESETS["pi05"].vocab_size else ())
    state_dim = (stats.state_dim if stats is not None else None) or _feature_dim(inputs, "observation.state")
    action_dim = (stats.action_dim if stats is not None else None) or _feature_dim(outputs, "action")
    conv = lerobot_conventions(folder, cfg, pre, stats is not None, action_dim, lerobot_version)
    if conv.relative is not None and state_dim is not None and state_dim < len(conv.relative.mask):
        raise ValueError(f"{folder}: use_relative_actions adds the state's first {len(conv.relative.mask)} "
                         f"values to the actions, but the state has {state_dim}")
    mc, stats = _apply(mc, stats, conv)
    info = CheckpointInfo(
        folder=folder, format="lerobot", camera_keys=cams or tuple(f"camera{i}" for i in range(mc.num_cameras)),
        state_dim=state_dim, action_dim=action_dim,
        n_action_steps=int(cfg.get("n_action_steps", mc.action_horizon)), image_resolution=res,
        tokenizer_repos=repos, dtype=cfg.get("dtype"), fps=train_fps(folder), conventions=conv)
    return mc, info, stats


def openpi_asset_ids(folder: Path) -> list[str]:
    assets = folder / "assets"
    if not assets.is_dir():
        return []
    return sorted(str(p.parent.relative_to(assets)) for p in assets.rglob("norm_stats.json"))


def read_openpi(folder: Path, asset_id: str | None, lerobot_version: str = AUTO
                ) -> tuple[ModelConfig, CheckpointInfo, NormStats | None]:
    cfg = json.loads((folder / "config.json").read_text())
    mc = model_config_from_dict(cfg[CONFIG_KEY]) if CONFIG_KEY in cfg else \
        _pi05_config(cfg, folder / "config.json").replace(
            action_horizon=int(cfg["action_horizon"]), action_dim=int(cfg.get("action_dim", 32)),
            num_cameras=len(OPENPI_CAMERAS))
    ids = openpi_asset_ids(folder)
    if asset_id is None:
        if len(ids) > 1:
            raise ValueError(f"{folder}/assets holds statistics for {ids}: choose one with "
                             "asset_id (oxygen-inspect --asset-id, node parameter model.asset_id)")
        asset_id = ids[0] if ids else None
    elif asset_id not in ids:
        raise ValueError(f"{folder}/assets/{asset_id}/norm_stats.json not found; asset ids there: {ids}")
    stats = NormStats.from_openpi(folder / "assets" / asset_id / "norm_stats.json") if asset_id else None
    cams = OPENPI_CAMERAS[: mc.num_cameras] if mc.num_cameras <= len(OPENPI_CAMERAS) else \
        tuple(f"camera{i}" for i in range(mc.num_cameras))
    conv = openpi_conventions(stats is not None, lerobot_version)
    info = CheckpointInfo(
        folder=folder, format="openpi", camera_keys=cams,
        state_dim=stats.state_dim if stats is not None else None,
        action_dim=stats.action_dim if stats is not None else None,
        n_action_steps=mc.action_horizon, image_resolution=(mc.vision.image_size,) * 2,
        tokenizer_repos=(PALIGEMMA_REPO,) if mc.vocab_size == PRESETS["pi05"].vocab_size else (),
        asset_id=asset_id, dtype=cfg.get("precision"), conventions=conv)
    mc, stats = _apply(mc, stats, conv)
    return mc, info, stats


def read_checkpoint_files(folder: str | Path, asset_id: str | None = None, lerobot_version: str = AUTO
                          ) -> tuple[ModelConfig, CheckpointInfo, NormStats | None]:
    """(model config, facts, statistics) of a LeRobot / openpi folder. The statistics are never
    None: a folder without any gets identity statistics (LeRobot normalises nothing then)."""
    folder = Path(folder)
    fmt = detect_format(folder)
    if fmt == "lerobot":
        if asset_id:
            raise ValueError(f"{folder} is a LeRobot checkpoint: asset_id applies to openpi checkpoints only")
        return read_lerobot(folder, lerobot_version)
    return read_openpi(folder, asset_id, lerobot_version)
