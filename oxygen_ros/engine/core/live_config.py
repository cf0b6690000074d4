"""Live settings: which EngineConfig changes a running engine accepts, checked before any applies.

Engine.validate_changes / update_config delegate here; the node's parameter callback calls
validate_changes (pure) so that a change is refused with its reason where it enters.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .intake import Intake
from ..config import family_registry
from ..config.engine_config import ENGINE_KNOBS, EngineConfig

# Fixed once the engine is built (the knobs declared not live: they size or place the model,
# the pool and the kernels).
FIXED = tuple(k.field for k in ENGINE_KNOBS if not k.live)


def validate_changes(current: EngineConfig, changes: dict[str, Any], intake: Intake) -> EngineConfig:
    """The EngineConfig that applying `changes` to `current` gives, checked against the engine
    (through its intake) and NOT applied (pure). ValueError with the reason when a change is not
    allowed while running, a value is out of range, action_head names no head of the model, the instruction (with the longest possible
    state text) or the memory prompt does not fit max_prompt_tokens, or a request of N new
    tokens could never fit the KV pool."""
    known = {f.name for f in dataclasses.fields(EngineConfig)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ValueError(f"unknown engine settings {unknown}")
    new = current.replace(**changes)  # EngineConfig.__post_init__ checks the ranges
    for name in FIXED:
        if getattr(new, name) != getattr(current, name):
            raise ValueError(f"{name} cannot change while the engine runs")
    heads = family_registry.family_of(intake.model_config).head_names(intake.model_config)
    if new.action_head and new.action_head not in heads:
        raise ValueError(f"action_head {new.action_head!r} is not a head of model "
                         f"{intake.model_config.name!r}: its heads are {', '.join(heads)}")
    if not isinstance(new.instruction, str) or not new.instruction.strip():
        raise ValueError("instruction must be a non-empty string")
    limit = intake.model_config.max_prompt_tokens
    worst = len(intake.prompt_ids(new.instruction, intake.worst_state))
    if worst > limit:
        raise ValueError(
            f"instruction + state prompt can reach {worst} tokens (with "
            f"{intake.worst_state.size} joints); the model takes at most {limit} (max_prompt_tokens)")
    try:
        intake.encode_suffix(new.memory_prompt)
    except ValueError as exc:
        raise ValueError(f"memory_prompt: {exc}") from None
    intake.check_request_fits(new.max_decode_steps, new)
    return new
