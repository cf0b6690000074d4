"""Reading a model config: a preset, optionally overridden field by field from a JSON or YAML
file (the node's model.config, the tools' --model-config)."""
from __future__ import annotations

import json
from pathlib import Path
import yaml

from .model_config import ModelConfig, model_config_from_dict
from .presets import PRESETS, merged


def load_model_config(preset: str, overrides_file: str | Path | None = None) -> ModelConfig:
    """A preset, optionally overridden field by field from a JSON or YAML file."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    cfg = PRESETS[preset]
    if overrides_file is None:
        return cfg
    path = Path(overrides_file)
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of ModelConfig fields, got {type(data).__name__}")
    return model_config_from_dict(merged(cfg.to_dict(), data))
