"""The configuration's one import path: the model schema (engine/config/model_config.py), the presets
as data (engine/config/presets.py), the engine knobs and EngineConfig (engine/config/engine_config.py) and
reading a model config file (engine/config/files.py). What a model's family decides (heads,
noise rows, whether a frame can run it) is asked of the family (engine/families/)."""
from __future__ import annotations

from .files import load_model_config
from .engine_config import (ATTENTION_BACKENDS, ENGINE_KNOBS, IMAGE_RESIZE, KNOBS,
                            LINEAR_LAYOUTS, MAX_GUIDANCE, MAX_TARGET_ACTION_HZ, MODES,
                            RTC_JACOBIANS, RTC_METHODS, EngineConfig)
from . import family_registry
from .model_config import DTYPES, ExpertConfig, ModelConfig, VisionConfig, model_config_from_dict
from .presets import (HEADS, PRESET_DATA, PRESETS, STARVLA_GR00T, STARVLA_OFT, STARVLA_PI_V3,
                      STARVLA_TINY_GR00T, STARVLA_TINY_OFT, STARVLA_TINY_PI_V3)

__all__ = [
    "ATTENTION_BACKENDS", "DTYPES", "ENGINE_KNOBS", "FAMILIES", "HEADS", "IMAGE_RESIZE", "KNOBS",
    "LINEAR_LAYOUTS", "MAX_GUIDANCE", "MAX_TARGET_ACTION_HZ", "MODES", "PRESETS", "PRESET_DATA",
    "RTC_JACOBIANS", "RTC_METHODS", "RUNNABLE_PRESETS", "STARVLA_GR00T", "STARVLA_OFT",
    "STARVLA_PI_V3", "STARVLA_TINY_GR00T", "STARVLA_TINY_OFT", "STARVLA_TINY_PI_V3",
    "EngineConfig", "ExpertConfig", "ModelConfig", "VisionConfig", "frame_unsupported_reason",
    "head_names", "load_model_config", "model_config_from_dict", "noise_rows",
]

# the built-in families' names (a registered one, e.g. a test's stub, joins family_registry.names())
FAMILIES = family_registry.names()


def frame_unsupported_reason(config: ModelConfig) -> str | None:
    """Why the engine cannot run ``config`` (None: it can): its family's answer."""
    return family_registry.rules_of(config).unsupported_reason(config)


def head_names(config: ModelConfig) -> tuple[str, ...]:
    """The action chunks a frame gives (FrameOutput.chunks' keys, in order; the first is
    FrameOutput.actions): its family's answer."""
    return family_registry.rules_of(config).head_names(config)


def noise_rows(config: ModelConfig) -> int:
    """Rows of a frame's noise [rows, action_dim]: its family's answer."""
    return family_registry.rules_of(config).noise_rows(config)


# the presets an Engine (oxygen-bench, oxygen-demo, the node) can run
RUNNABLE_PRESETS = tuple(n for n, c in PRESETS.items() if frame_unsupported_reason(c) is None)
