"""Model families, one folder each (engine/families/<name>/: its family class, model, checkpoint
folders and config section); engine/families/base.py: the Family interface; the registry of names
is the configuration's (engine/config/family_registry.py)."""
from .base import Family, HeadParams, ParamCounts, StageCost

__all__ = ["Family", "HeadParams", "ParamCounts", "StageCost"]
