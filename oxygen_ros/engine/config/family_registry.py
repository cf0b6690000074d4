"""The model families the engine knows, by ModelConfig.family name, and the config sections they
define.

Built-in families are registered lazily, by module path (as vLLM's model registry does): each is
a folder, engine/families/<name>/, whose config.py holds RULES (its FamilyRules, torch-free:
engine/config/family_rules.py) and family.py FAMILY (its Family, the rules and the model side:
engine/families/base.py). ModelConfig's validation and properties ask rules_of, which imports
only the config.py modules: the configuration stays torch-free and never loads a family's model
code (engine/families/ sits above it). The runner and the engine ask family_of, which imports
family.py the first time a config of that family is served. A new family is one folder and one
line in _BUILTIN (and one in SECTIONS if it brings a config section of its own). `register` adds
a family object (a test's stub family, a plugin: it answers both); `unregister` removes one it
added.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .family_rules import FamilyRules

if TYPE_CHECKING:
    from .model_config import ModelConfig

# name -> the family's folder (a package: config.py's RULES, family.py's FAMILY)
_BUILTIN: dict[str, str] = {
    "pi05": "oxygen_ros.engine.families.pi05",
    "qwen3vl": "oxygen_ros.engine.families.qwen3vl",
    "starvla": "oxygen_ros.engine.families.starvla",
    "qwen35": "oxygen_ros.engine.families.qwen35",
}
# ModelConfig field -> "module:attribute" of the torch-free dataclass a family defines for it
# (model_config_from_dict builds it from plain data; the families that read it validate it)
SECTIONS: dict[str, str] = {
    "qwen": "oxygen_ros.engine.families.qwen3vl.config:QwenVLConfig",
    "hybrid": "oxygen_ros.engine.families.qwen35.config:HybridConfig",
}
_RULES: dict[str, FamilyRules] = {}
_LOADED: dict[str, FamilyRules] = {}
_ADDED: dict[str, FamilyRules] = {}


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def names() -> tuple[str, ...]:
    """Every registered family name (built-ins first), without importing any family module."""
    return tuple(_BUILTIN) + tuple(n for n in _ADDED if n not in _BUILTIN)


def _lookup(name: str, cache: dict[str, FamilyRules], attribute: str) -> FamilyRules:
    if name in _ADDED:
        return _ADDED[name]
    if name not in cache:
        if name not in _BUILTIN:
            raise ValueError(f"unknown model family {name!r}; registered: {', '.join(names())}")
        cache[name] = _load(f"{_BUILTIN[name]}.{attribute}")
    return cache[name]


def rules(name: str) -> FamilyRules:
    """The config rules of the family registered as ``name`` (torch-free); ValueError naming
    the known ones otherwise."""
    return _lookup(name, _RULES, "config:RULES")


def rules_of(config: "ModelConfig") -> FamilyRules:
    """The config rules of ``config``'s family (ModelConfig.family)."""
    return rules(config.family)


def all_rules() -> tuple[FamilyRules, ...]:
    """Every registered family's config rules."""
    return tuple(rules(n) for n in names())


def get(name: str) -> FamilyRules:
    """The family registered as ``name`` (a Family: engine/families/base.py; its model code is
    imported here, the first time); ValueError naming the known ones otherwise."""
    return _lookup(name, _LOADED, "family:FAMILY")


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
