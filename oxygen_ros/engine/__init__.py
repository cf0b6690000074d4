"""The oxygen engine: model, unified KV cache, scheduler, runner. Never imports rclpy.

This module is the engine's front door: code outside engine/ and bench/ (the node, robot/, bags/,
sim/, cli/, launch/) imports engine names only from here, e.g.
``from oxygen_ros.engine import Engine, EngineConfig``; test/test_front_door.py holds that.
The names resolve lazily (PEP 562): importing this module costs nothing (no torch), and a name's
defining module is imported on its first use. `_EXPORTS` is the one list of names, each with the
module that defines it: a module that moves is re-pointed here, and its importers do not change.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> the module that defines it (one per line, sorted)
_EXPORTS: dict[str, str] = {
    "ActionPrior": "oxygen_ros.engine.model.rtc",
    "ENGINE_KNOBS": "oxygen_ros.engine.config.engine_config",
    "Engine": "oxygen_ros.engine.core.engine",
    "EngineConfig": "oxygen_ros.engine.config.engine_config",
    "ExpertConfig": "oxygen_ros.engine.config.model_config",
    "FrameOutput": "oxygen_ros.engine.core.engine",
    "HFTokenizer": "oxygen_ros.engine.model.tokenizer",
    "Intake": "oxygen_ros.engine.core.intake",
    "KNOBS": "oxygen_ros.engine.config.engine_config",
    "Knob": "oxygen_ros.engine.config.knobs",
    "MASK_VALUE": "oxygen_ros.engine.model.sampler",
    "MODES": "oxygen_ros.engine.config.engine_config",
    "MoTModel": "oxygen_ros.engine.families.pi05.model",
    "ModelConfig": "oxygen_ros.engine.config.model_config",
    "NormStats": "oxygen_ros.engine.model.norm",
    "Observation": "oxygen_ros.engine.core.observation",
    "PRESETS": "oxygen_ros.engine.config.presets",
    "RUNNABLE_PRESETS": "oxygen_ros.engine.config",
    "RequestKind": "oxygen_ros.engine.core.request",
    "RequestUpdate": "oxygen_ros.engine.core.request",
    "SyntheticStream": "oxygen_ros.engine.core.synthetic",
    "VisionConfig": "oxygen_ros.engine.config.model_config",
    "build_tiny_tokenizer": "oxygen_ros.engine.model.tokenizer",
    "check_device": "oxygen_ros.engine.runner.device",
    "check_version_param": "oxygen_ros.engine.model.conventions",
    "folder_family": "oxygen_ros.engine.families.loader",
    "frame_unsupported_reason": "oxygen_ros.engine.config",
    "head_names": "oxygen_ros.engine.config",
    "init_model": "oxygen_ros.engine.families.loader",
    "load_checkpoint": "oxygen_ros.engine.families.loader",
    "load_model_config": "oxygen_ros.engine.config.files",
    "num_text": "oxygen_ros.engine.config.knobs",
    "open_checkpoint": "oxygen_ros.engine.families.loader",
    "range_text": "oxygen_ros.engine.config.knobs",
    "rtc_unsupported_reason": "oxygen_ros.engine.model.rtc",
    "save_lerobot_checkpoint": "oxygen_ros.engine.families.pi05.writer",
    "train_fps": "oxygen_ros.engine.model.formats",
    "version_options": "oxygen_ros.engine.families.loader",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # what type checkers see (the same names and modules as _EXPORTS; a test holds it)
    from oxygen_ros.engine.config import RUNNABLE_PRESETS as RUNNABLE_PRESETS
    from oxygen_ros.engine.config import frame_unsupported_reason as frame_unsupported_reason
    from oxygen_ros.engine.config import head_names as head_names
    from oxygen_ros.engine.config.engine_config import ENGINE_KNOBS as ENGINE_KNOBS
    from oxygen_ros.engine.config.engine_config import KNOBS as KNOBS
    from oxygen_ros.engine.config.engine_config import MODES as MODES
    from oxygen_ros.engine.config.engine_config import EngineConfig as EngineConfig
    from oxygen_ros.engine.config.files import load_model_config as load_model_config
    from oxygen_ros.engine.config.knobs import Knob as Knob
    from oxygen_ros.engine.config.knobs import num_text as num_text
    from oxygen_ros.engine.config.knobs import range_text as range_text
    from oxygen_ros.engine.config.model_config import ExpertConfig as ExpertConfig
    from oxygen_ros.engine.config.model_config import ModelConfig as ModelConfig
    from oxygen_ros.engine.config.model_config import VisionConfig as VisionConfig
    from oxygen_ros.engine.config.presets import PRESETS as PRESETS
    from oxygen_ros.engine.core.engine import Engine as Engine
    from oxygen_ros.engine.core.engine import FrameOutput as FrameOutput
    from oxygen_ros.engine.core.intake import Intake as Intake
    from oxygen_ros.engine.core.observation import Observation as Observation
    from oxygen_ros.engine.core.request import RequestKind as RequestKind
    from oxygen_ros.engine.core.request import RequestUpdate as RequestUpdate
    from oxygen_ros.engine.model.rtc import ActionPrior as ActionPrior
    from oxygen_ros.engine.model.rtc import rtc_unsupported_reason as rtc_unsupported_reason
    from oxygen_ros.engine.core.synthetic import SyntheticStream as SyntheticStream
    from oxygen_ros.engine.model.conventions import check_version_param as check_version_param
    from oxygen_ros.engine.model.formats import train_fps as train_fps
    from oxygen_ros.engine.families.loader import folder_family as folder_family
    from oxygen_ros.engine.families.loader import init_model as init_model
    from oxygen_ros.engine.families.loader import load_checkpoint as load_checkpoint
    from oxygen_ros.engine.families.loader import open_checkpoint as open_checkpoint
    from oxygen_ros.engine.families.loader import version_options as version_options
    from oxygen_ros.engine.families.pi05.model import MoTModel as MoTModel
    from oxygen_ros.engine.model.norm import NormStats as NormStats
    from oxygen_ros.engine.model.sampler import MASK_VALUE as MASK_VALUE
    from oxygen_ros.engine.model.tokenizer import HFTokenizer as HFTokenizer
    from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer as build_tiny_tokenizer
    from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint as save_lerobot_checkpoint
    from oxygen_ros.engine.runner.device import check_device as check_device


def __getattr__(name: str) -> Any:
    """A front-door name, imported from its module on first use (then cached here)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
