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

from ...config.model_config import ModelConfig
from .checkpoint import PWE, VISION, VISION_OLD, WEIGHTS, to_lerobot_name
from ...model.conventions import V050, V051, parse_version
from ...model.formats import CONFIG_KEY, POST_STATE, PRE_STATE
from .model import MoTModel
from ...model.norm import NormStats
from ...model.tokenizer import PALIGEMMA_REPO


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
                            tokenizer_name: str | None = None, embed_config: bool = True,
                            lerobot_version: str | None = None, relative_actions: bool = False,
                            action_names: list[str] | None = None,
                            relative_exclude_joints: tuple[str, ...] = ("gripper",)) -> Path:
    """embed_config=False writes only LeRobot's own fields (the loader then takes the pi05 shape).

    `lerobot_version` writes that version's layout, as its training run leaves it (None: the
    layout this writer always wrote, which names no version): v0.4.x / v0.5.0 the normalizer as
    preprocessor step 2 and a train_config.json (with cudnn_deterministic from v0.5.0); v0.5.1+
    the relative-actions step (`relative_actions`, `action_names`, `relative_exclude_joints`)
    before it and its config.json fields; v0.6+ also the model card's "LeRobot version" row."""
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
    version = parse_version(lerobot_version) if lerobot_version else None
    if relative_actions and (version is None or version < V051):
        raise ValueError("relative actions came with LeRobot v0.5.1: give lerobot_version >= 0.5.1")
    if version is not None and version >= V051:
        cfg.update(use_relative_actions=relative_actions,
                   relative_exclude_joints=list(relative_exclude_joints),
                   action_feature_names=list(action_names) if action_names else None)
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
    pre_file = PRE_STATE
    if version is not None:
        pre_steps, post_steps, pre_file = _versioned_steps(version, pre_steps, post_steps, relative_actions,
                                                           action_names, relative_exclude_joints)
        _write_run_files(folder, version, lerobot_version)
    (folder / "policy_preprocessor.json").write_text(
        json.dumps({"name": "policy_preprocessor", "steps": pre_steps}, indent=2))
    (folder / "policy_postprocessor.json").write_text(
        json.dumps({"name": "policy_postprocessor", "steps": post_steps}, indent=2))
    if norm_stats is not None:
        flat = norm_stats.lerobot_flat()
        np_save_file(flat, str(folder / pre_file))
        np_save_file({k: v for k, v in flat.items() if k.startswith("action.")}, str(folder / POST_STATE))
    _save_tokenizer(tokenizer, folder)
    return folder


def _versioned_steps(version: tuple[int, int, int], pre: list[dict], post: list[dict], relative: bool,
                     names: list[str] | None, exclude: tuple[str, ...]) -> tuple[list[dict], list[dict], str]:
    """The processor steps in the order `version`'s make_pi05_pre_post_processors builds them:
    rename, batch, [relative actions,] normalizer, state prompt, tokenizer, device."""
    by_name = {s["registry_name"]: s for s in pre}
    rel: list[dict] = []
    if version >= V051:
        name = "delta_actions_processor" if version < (0, 6, 0) else "relative_actions_processor"
        rel = [{"registry_name": name, "config": {"enabled": relative, "exclude_joints": list(exclude),
                                                   "action_names": list(names) if names else None}}]
    order = [by_name["rename_observations_processor"], by_name["to_batch_processor"], *rel,
             dict(by_name["normalizer_processor"]), by_name["pi05_prepare_state_tokenizer_processor_step"],
             by_name["tokenizer_processor"], by_name["device_processor"]]
    index = 2 + len(rel)
    pre_file = f"policy_preprocessor_step_{index}_normalizer_processor.safetensors"
    order[index]["state_file"] = pre_file
    if version >= V051:
        post = [post[0], {"registry_name": "absolute_actions_processor", "config": {"enabled": relative}}, post[1]]
    return order, post, pre_file


def _write_run_files(folder: Path, version: tuple[int, int, int], label: str) -> None:
    """What a LeRobot training run of `version` leaves beside the policy: train_config.json (its
    own fields only in part) and, from v0.6, the model card naming the version."""
    train = {"dataset": {"repo_id": "local/demo"}, "env": None, "policy": {"type": "pi05"},
             "seed": 1000, "num_workers": 4, "batch_size": 8, "steps": 1000}
    if version >= V050:
        train["cudnn_deterministic"] = False
    (folder / "train_config.json").write_text(json.dumps(train, indent=2))
    if version >= (0, 6, 0):
        (folder / "README.md").write_text(f"# pi05\n\n| | |\n|---|---|\n| LeRobot version | {label} |\n")


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
