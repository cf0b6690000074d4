"""Model families (engine/families/base.py: the Family interface; registry.py: the names)."""
from .base import (ActionInputs, AttentionKV, CacheSpec, Capabilities, Family, HeadParams,
                   ParamCounts, RecurrentState, StageCost, StateTensor)
from .registry import all_families, family_of, get, names, register, unregister

__all__ = ["ActionInputs", "AttentionKV", "CacheSpec", "Capabilities", "Family", "HeadParams",
           "ParamCounts", "RecurrentState", "StageCost", "StateTensor", "all_families", "family_of", "get",
           "names", "register", "unregister"]
