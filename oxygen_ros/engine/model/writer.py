"""Write a model in the LeRobot pi05 or the openpi PyTorch checkpoint layout (tests, tools).

LeRobot: config.json ("type": "pi05", LeRobot fields, our ModelConfig under
"oxygen_model_config"), model.safetensors, policy_preprocessor.json + normalizer statistics,
policy_postprocessor.json + unnormalizer statistics, optionally tokenizer.json.
openpi: config.json (action_dim, action_horizon, variants, precision), model.safetensors with the
names openpi's converter writes (no ``model.`` prefix, ``vision_tower.vision_model.``), and
assets/<asset_id>/norm_stats.json.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file as np_save_file
from safetensors.torch import save_file

from ..config.model_config import ModelConfig
from .checkpoint import PWE, VISION, VISION_OLD, WEIGHTS, to_lerobot_name
from .formats import CONFIG_KEY, POST_STATE, PRE_STATE
from .mot import MoTModel
from .norm import NormStats
from .tokenizer import PALIGEMMA_REPO


def _is_pi05(config: ModelConfig) -> bool:
    return config.vlm.width == 2048 and config.action_experts[0].width == 1024


def _features(config: ModelConfig, state_dim: int, action_dim: int, camera_keys) -> tuple[dict, dict]:
    img = [3, config.vision.image_size, config.vision.image_size]
    keys = camera_keys or [f"observation.images.camera{i}" for i in range(config.num_cameras)]
    inputs = {k: {"type": "VISUAL", "shape": img} for k in keys}
    inputs["observation.state"] = {"type": "STATE", "shape": [state_dim]}
    return inputs, {"action": {"type": "ACTION", "shape": [action_dim]}}


def _save_tokenizer(tokenizer, folder: Path) -> None:
    if tokenizer is None:
        return
    if not hasattr(tokenizer, "save"):
        raise ValueError(f"tokenizer {type(tokenizer).__name__} cannot be saved as tokenizer.json")
    tokenizer.save(folder / "tokenizer.json")


def save_lerobot_checkpoint(model: MoTModel, config: ModelConfig, folder: str | Path,
                            tokenizer=None, norm_stats: NormStats | None = None,
                            camera_keys=None, n_action_steps: int | None = None,
                            tokenizer_name: str | None = None, embed_config: bool = True) -> Path:
    """embed_config=False writes only LeRobot's own fields (the loader then takes the pi05 shape)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {to_lerobot_name(n): p.detach().to("cpu").contiguous() for n, p in model.state_dict().items()}
    save_file(tensors, str(folder / WEIGHTS), metadata={"format": "pt"})

    state_dim = (norm_stats.state_dim if norm_stats is not None else None) or config.action_dim
    action_dim = (norm_stats.action_dim if norm_stats is not None else None) or config.action_dim
    inputs, outputs = _features(config, state_dim, action_dim, camera_keys)
    norm_map = norm_stats.lerobot_norm_map() if norm_stats is not None else \
        {"VISUAL": "IDENTITY", "STATE": "QUANTILES", "ACTION": "QUANTILES"}
    pi05 = _is_pi05(config)
    cfg = {
        "type": "pi05",
        "paligemma_variant": "gemma_2b" if pi05 else "custom",
        "action_expert_variant": "gemma_300m" if pi05 else "custom",
        "dtype": str(model.dtype).replace("torch.", ""),
        "n_obs_steps": 1, "chunk_size": config.action_horizon,
        "n_action_steps": n_action_steps or config.action_horizon,
        "max_state_dim": config.action_dim, "max_action_dim": config.action_dim,
        "num_inference_steps": 10, "min_period": 4e-3, "max_period": 4.0,
        "image_resolution": [config.vision.image_size, config.vision.image_size],
        "tokenizer_max_length": config.max_prompt_tokens,
        "normalization_mapping": norm_map, "input_features": inputs, "output_features": outputs,
    }
    if embed_config:
        cfg[CONFIG_KEY] = config.to_dict()
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))

    tok_cfg = {"max_length": config.max_prompt_tokens, "task_key": "task", "padding_side": "right",
               "padding": "max_length", "truncation": True}
    if tokenizer_name or (tokenizer is None and pi05):
        tok_cfg["tokenizer_name"] = tokenizer_name or PALIGEMMA_REPO
    pre_steps = [
        {"registry_name": "rename_observations_processor", "config": {"rename_map": {}}},
        {"registry_name": "to_batch_processor", "config": {}},
        {"registry_name": "device_processor", "config": {"device": "cpu", "float_dtype": None}},
        {"registry_name": "normalizer_processor",
         "config": {"eps": 1e-8, "features": {**inputs, **outputs}, "norm_map": norm_map},
         "state_file": PRE_STATE},
        {"registry_name": "pi05_prepare_state_tokenizer_processor_step",
         "config": {"max_state_dim": config.action_dim}},
        {"registry_name": "tokenizer_processor", "config": tok_cfg},
    ]
    post_steps = [
        {"registry_name": "unnormalizer_processor",
         "config": {"eps": 1e-8, "features": outputs, "norm_map": norm_map}, "state_file": POST_STATE},
        {"registry_name": "device_processor", "config": {"device": "cpu", "float_dtype": None}},
    ]
    (folder / "policy_preprocessor.json").write_text(
        json.dumps({"name": "policy_preprocessor", "steps": pre_steps}, indent=2))
    (folder / "policy_postprocessor.json").write_text(
        json.dumps({"name": "policy_postprocessor", "steps": post_steps}, indent=2))
    if norm_stats is not None:
        flat = norm_stats.lerobot_flat()
        np_save_file(flat, str(folder / PRE_STATE))
        np_save_file({k: v for k, v in flat.items() if k.startswith("action.")}, str(folder / POST_STATE))
    _save_tokenizer(tokenizer, folder)
    return folder


def to_openpi_name(name: str) -> str:
    """Our parameter name -> the key openpi's converter writes."""
    key = to_lerobot_name(name)[len("model."):]
    vision = VISION[len("model."):]
    if key.startswith(vision):
        key = VISION_OLD[len("model."):] + key[len(vision):]
    return key


def save_openpi_checkpoint(model: MoTModel, config: ModelConfig, folder: str | Path,
                           norm_stats: dict[str, dict[str, np.ndarray]] | None = None,
                           asset_id: str = "robot", tokenizer=None, tie_lm_head: bool = True,
                           embed_config: bool = True) -> Path:
    """norm_stats: {"state": {"mean", "std", "q01", "q99"}, "actions": {...}} as openpi stores
    it; tie_lm_head stores the tied embedding as paligemma.lm_head.weight only, as openpi does."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {to_openpi_name(n): p.detach().to("cpu").contiguous() for n, p in model.state_dict().items()}
    if tie_lm_head:
        embed = (PWE + "paligemma.model.language_model.embed_tokens.weight")[len("model."):]
        tensors[(PWE + "paligemma.lm_head.weight")[len("model."):]] = tensors.pop(embed)
    save_file(tensors, str(folder / WEIGHTS), metadata={"format": "pt"})
    pi05 = _is_pi05(config)
    cfg = {"action_dim": config.action_dim, "action_horizon": config.action_horizon,
           "paligemma_variant": "gemma_2b" if pi05 else "custom",
           "action_expert_variant": "gemma_300m" if pi05 else "custom",
           "precision": str(model.dtype).replace("torch.", "")}
    if embed_config:
        cfg[CONFIG_KEY] = config.to_dict()
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    if norm_stats is not None:
        out = folder / "assets" / asset_id / "norm_stats.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        data = {k: {n: np.asarray(v, dtype=np.float64).tolist() for n, v in s.items()}
                for k, s in norm_stats.items()}
        out.write_text(json.dumps({"norm_stats": data}, indent=2))
    _save_tokenizer(tokenizer, folder)
    return folder
