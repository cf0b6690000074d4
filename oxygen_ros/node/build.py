"""Configure-time construction of the engine from the parameter values (no rclpy).

Raises ValueError with a reason for anything the parameters get wrong; the node stays
unconfigured then. Knows engine types, never message types.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oxygen_ros.robot.images import parse_transports
from oxygen_ros.robot.values import camera_slots

from . import params as P


@dataclass
class Built:
    engine: Any
    model_config: Any
    norm: Any  # checkpoint normalisation statistics or None
    model_name: str
    camera_slots: tuple[int, ...] = ()  # model camera index of each camera topic
    n_action_steps: int = 0  # chunk steps meant to be executed (0 = all)
    tokenizer_source: str = ""
    camera_transports: tuple[str, ...] = ()  # raw | compressed of each camera topic


def check_joints(names: list[str], state_dim: int | None, action_dim: int | None, padded: int) -> None:
    """joint_names are the state's and the action's leading dims: counts must fit exactly."""
    n = len(names)
    if state_dim is not None and n != state_dim:
        raise ValueError(f"{n} joint_names but the checkpoint's state has {state_dim} values "
                         "(normalisation statistics / input features): list exactly those joints, in order")
    if action_dim is not None and n != action_dim:
        raise ValueError(f"{n} joint_names but the checkpoint's actions have {action_dim} values: "
                         "list exactly those joints, in order")
    if n > padded:
        raise ValueError(f"{n} joint_names but the model has action_dim {padded}")


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
    names, cams = list(p["joint_names"]), list(p["camera_topics"])
    transports = parse_transports(list(p["camera_transports"]), len(cams))
    norm, model, tokenizer, source, steps = None, None, None, "", 0
    if p["model.checkpoint"]:
        from oxygen_ros.engine.model import open_checkpoint

        # tokenizer and every key/shape are checked before the weights are read
        ck = open_checkpoint(p["model.checkpoint"], device=p["model.device"], dtype=p["model.dtype"],
                             tokenizer=p["model.tokenizer"] or None, asset_id=p["model.asset_id"] or None,
                             progress=True)
        model, mc, tokenizer, norm = ck.model, ck.config, ck.tokenizer, ck.norm_stats
        source, steps, model_keys = ck.tokenizer_source, ck.info.n_action_steps, ck.info.camera_keys
        check_joints(names, ck.info.state_dim, ck.info.action_dim, mc.action_dim)
    else:
        for name in ("model.tokenizer", "model.asset_id"):
            if p[name]:
                raise ValueError(f"{name} applies to model.checkpoint; a random preset uses its "
                                 "built-in tokenizer")
        mc = load_model_config(p["model.preset"])
        model_keys = tuple(f"camera{i}" for i in range(mc.num_cameras))
        check_joints(names, None, None, mc.action_dim)
    slots = camera_slots(cams, list(p["camera_keys"]), model_keys)
    reason = P.validate({k: p[k] for k in ("joint_limits_lower", "joint_limits_upper",
                                           *P.SHAPER_LIMITS)}, p, False)
    if reason:
        raise ValueError(reason)
    ec = EngineConfig(device=p["model.device"], dtype=p["model.dtype"],
                      num_blocks=int(p["kv.num_blocks"]), **P.engine_changes(p))
    engine = Engine(mc, ec, model=model, tokenizer=tokenizer)
    # first frames allocate and pick kernels: pay that now, not in the first control frames
    engine.warmup()
    return Built(engine, mc, norm, p["model.checkpoint"] or f"preset:{p['model.preset']}", slots,
                 steps, source, transports)
