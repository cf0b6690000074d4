"""The model families the engine knows, by ModelConfig.family name, and the config sections they
define.

Built-in families are registered lazily, by module path (as vLLM's model registry does): a
family's module (and its model code) is imported the first time a config of that family is
resolved, never when only the names are listed; the configuration layer names the families, it
never imports them (engine/families/ sits above it). A new family is one folder
(engine/families/<name>/) and one line in _BUILTIN (and one in SECTIONS if it brings a config
section of its own). `register` adds a family object (a test's stub family, a plugin);
`unregister` removes one it added.

What the configuration asks of a family is FamilyRules (engine/config/family_rules.py); the
objects registered are Family instances (engine/families/base.py), which answer the runner's
and the engine's questions too.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .family_rules import FamilyRules

if TYPE_CHECKING:
    from .model_config import ModelConfig

# name -> "module:attribute" of the family object
_BUILTIN: dict[str, str] = {
    "pi05": "oxygen_ros.engine.families.pi05.family:FAMILY",
    "qwen3vl": "oxygen_ros.engine.families.qwen3vl.family:FAMILY",
    "starvla": "oxygen_ros.engine.families.starvla.family:FAMILY",
    "qwen35": "oxygen_ros.engine.families.qwen35.family:FAMILY",
}
# ModelConfig field -> "module:attribute" of the torch-free dataclass a family defines for it
# (model_config_from_dict builds it from plain data; the families that read it validate it)
SECTIONS: dict[str, str] = {
    "qwen": "oxygen_ros.engine.families.qwen3vl.config:QwenVLConfig",
    "hybrid": "oxygen_ros.engine.families.qwen35.config:HybridConfig",
}
_LOADED: dict[str, FamilyRules] = {}
_ADDED: dict[str, FamilyRules] = {}


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def names() -> tuple[str, ...]:
    """Every registered family name (built-ins first), without importing any family module."""
    return tuple(_BUILTIN) + tuple(n for n in _ADDED if n not in _BUILTIN)


def get(name: str) -> FamilyRules:
    """The family registered as ``name``; ValueError naming the known ones otherwise."""
    if name in _ADDED:
        return _ADDED[name]
    if name in _LOADED:
        return _LOADED[name]
    if name not in _BUILTIN:
        raise ValueError(f"unknown model family {name!r}; registered: {', '.join(names())}")
    family = _load(_BUILTIN[name])
    _LOADED[name] = family
    return family


def family_of(config: "ModelConfig") -> FamilyRules:
    """The family that serves ``config`` (its ModelConfig.family)."""
    return get(config.family)


def all_families() -> tuple[FamilyRules, ...]:
    """Every registered family, loaded (checkpoint discovery asks each in turn)."""
    return tuple(get(n) for n in names())


def section_type(name: str) -> type:
    """The dataclass of the config section ``name`` (a key of SECTIONS)."""
    return _load(SECTIONS[name])


def register(family: FamilyRules) -> None:
    """Add a family under its name; ValueError when the name is taken."""
    if family.name in names():
        raise ValueError(f"model family {family.name!r} is already registered")
    _ADDED[family.name] = family


def unregister(name: str) -> None:
    """Remove a family `register` added (built-ins stay)."""
    if name not in _ADDED:
        raise ValueError(f"model family {name!r} was not added by register()")
    del _ADDED[name]
