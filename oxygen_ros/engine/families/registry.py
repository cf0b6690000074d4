"""The model families the engine knows, by ModelConfig.family name.

Built-in families are registered lazily, by module path (as vLLM's model registry does): a
family's module (and its model code: transformers for the Qwen families) is imported the first
time a config of that family is resolved, never when only the names are listed. `register` adds
a family object (a test's stub family, a plugin); `unregister` removes one it added.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config.model_config import ModelConfig
    from .base import Family

# name -> "module:attribute" of the family object
_BUILTIN: dict[str, str] = {
    "pi05": "oxygen_ros.engine.families.pi05:FAMILY",
    "qwen3vl": "oxygen_ros.engine.families.xr0:FAMILY",
    "starvla": "oxygen_ros.engine.families.starvla:FAMILY",
    "qwen35": "oxygen_ros.engine.families.qwen35:FAMILY",
}
_LOADED: dict[str, "Family"] = {}
_ADDED: dict[str, "Family"] = {}


def names() -> tuple[str, ...]:
    """Every registered family name (built-ins first), without importing any family module."""
    return tuple(_BUILTIN) + tuple(n for n in _ADDED if n not in _BUILTIN)


def get(name: str) -> "Family":
    """The family registered as ``name``; ValueError naming the known ones otherwise."""
    if name in _ADDED:
        return _ADDED[name]
    if name in _LOADED:
        return _LOADED[name]
    if name not in _BUILTIN:
        raise ValueError(f"unknown model family {name!r}; registered: {', '.join(names())}")
    module, _, attr = _BUILTIN[name].partition(":")
    family = getattr(importlib.import_module(module), attr)
    _LOADED[name] = family
    return family


def family_of(config: "ModelConfig") -> "Family":
    """The family that serves ``config`` (its ModelConfig.family)."""
    return get(config.family)


def all_families() -> tuple["Family", ...]:
    """Every registered family, loaded (checkpoint discovery asks each in turn)."""
    return tuple(get(n) for n in names())


def register(family: "Family") -> None:
    """Add a family under its name; ValueError when the name is taken."""
    if family.name in names():
        raise ValueError(f"model family {family.name!r} is already registered")
    _ADDED[family.name] = family


def unregister(name: str) -> None:
    """Remove a family `register` added (built-ins stay)."""
    if name not in _ADDED:
        raise ValueError(f"model family {name!r} was not added by register()")
    del _ADDED[name]
