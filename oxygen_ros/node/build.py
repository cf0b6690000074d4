"""Configure-time construction of the engine from the parameter values (no rclpy).

Raises ValueError with a reason for anything the parameters get wrong; the node stays
unconfigured then. Knows engine types, never message types.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import params as P


@dataclass
class Built:
    engine: Any
    model_config: Any
    norm: Any  # checkpoint normalisation statistics or None
    model_name: str


def build_engine(p: dict[str, Any]) -> Built:
    import torch

    from oxygen_ros.engine.config import EngineConfig, load_model_config
    from oxygen_ros.engine.engine import Engine

    for name, value in p.items():  # the params file bypasses no check
        reason = P.validate_value(P.SPECS[name], value)
        if reason:
            raise ValueError(reason)
    if p["model.num_threads"] > 0:
        torch.set_num_threads(int(p["model.num_threads"]))
    norm, model, tokenizer = None, None, None
    if p["model.checkpoint"]:
        from oxygen_ros.engine.model import load_checkpoint

        model, mc, tokenizer, norm = load_checkpoint(p["model.checkpoint"], device=p["model.device"],
                                                     dtype=p["model.dtype"])
    else:
        mc = load_model_config(p["model.preset"])
    names, cams = list(p["joint_names"]), list(p["camera_topics"])
    if len(names) > mc.action_dim:
        raise ValueError(f"{len(names)} joint_names but the model has action_dim {mc.action_dim}")
    if len(cams) > mc.num_cameras:
        raise ValueError(f"{len(cams)} camera_topics but the model takes at most {mc.num_cameras}")
    reason = P.validate({"joint_limits_lower": p["joint_limits_lower"],
                         "joint_limits_upper": p["joint_limits_upper"]}, p, False)
    if reason:
        raise ValueError(reason)
    ec = EngineConfig(device=p["model.device"], dtype=p["model.dtype"],
                      num_blocks=int(p["kv.num_blocks"]), **P.engine_changes(p))
    engine = Engine(mc, ec, model=model, tokenizer=tokenizer)
    # first frames allocate and pick kernels: pay that now, not in the first control frames
    engine.warmup()
    return Built(engine, mc, norm, p["model.checkpoint"] or f"preset:{p['model.preset']}")
