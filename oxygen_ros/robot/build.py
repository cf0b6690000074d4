"""The engine from a model preset or a checkpoint folder: one construction for the node
(node/build.py), oxygen-replay and oxygen-demo, so the three open a checkpoint, pick its
tokenizer, device, dtype and CPU threads the same way and refuse the same mistakes with the same
reasons (spelled with the caller's names: the node's parameters or the tools' flags).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .engine_port import EnginePort

# how a caller spells the model source's settings in refusals: (checkpoint, tokenizer, asset id)
FLAG_NAMES = ("--checkpoint", "--tokenizer", "--asset-id")


@dataclass(frozen=True)
class ModelSource:
    """Where the weights come from: a random-weight preset, or a LeRobot / openpi checkpoint."""

    preset: str = "tiny"
    checkpoint: str = ""  # checkpoint folder; "" = the preset with random weights
    tokenizer: str = ""  # the checkpoint's tokenizer (file, folder or cached repo id); "" = searched
    asset_id: str = ""  # openpi: the statistics of assets/<asset_id>/
    lerobot_version: str = "auto"  # LeRobot version whose pi0.5 conventions apply (auto: detected)
    model_config: str = ""  # JSON / YAML overriding preset fields (a preset only)
    threads: int = 0  # torch CPU threads; 0 = leave torch's setting
    progress: bool | None = None  # weight-loading progress on stderr (None: when it is a terminal)
    names: tuple[str, str, str] = FLAG_NAMES

    def __post_init__(self) -> None:
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0 (0 = torch's default), got {self.threads}")
        from oxygen_ros.engine import check_version_param
        check_version_param(self.lerobot_version)


@dataclass
class BuiltEngine:
    engine: EnginePort  # engine.Engine
    norm: Any  # the checkpoint's normalisation statistics (NormStats) or None
    model_name: str  # the checkpoint folder or preset:<name>
    camera_keys: tuple[str, ...]  # the model's camera names, in model order
    n_action_steps: int = 0  # chunk steps the checkpoint executes (0 = all)
    tokenizer_source: str = ""
    state_dim: int | None = None  # the checkpoint's state / action sizes (None: a preset)
    action_dim: int | None = None
    fps: float | None = None  # the checkpoint's action rate when it names one (chunk_rate_hz 0)


def build_engine(source: ModelSource, config: Any, warmup: bool = False) -> BuiltEngine:
    """An Engine with `config` (EngineConfig: device and dtype apply to the weights too) on
    `source`'s model. The tokenizer and every checkpoint key and shape are checked before a
    weight is read. Raises ValueError (FileNotFoundError for a missing folder) with a reason.
    `warmup`: pay the first frames' allocation and kernel choice now."""
    import torch

    from oxygen_ros.engine import Engine, load_model_config

    ckpt_name, tok_name, asset_name = source.names
    if source.threads > 0:
        torch.set_num_threads(int(source.threads))
    if source.checkpoint:
        from oxygen_ros.engine import open_checkpoint

        if source.model_config:
            raise ValueError(f"a model config file overrides a preset's fields; {ckpt_name} "
                             "brings its own configuration")
        ck = open_checkpoint(source.checkpoint, device=config.device, dtype=config.dtype,
                             tokenizer=source.tokenizer or None, asset_id=source.asset_id or None,
                             progress=source.progress, lerobot_version=source.lerobot_version)
        engine = Engine(ck.config, config, model=ck.model, tokenizer=ck.tokenizer)
        built = BuiltEngine(engine, ck.norm_stats, source.checkpoint, tuple(ck.info.camera_keys),
                            int(ck.info.n_action_steps or 0), ck.tokenizer_source,
                            ck.info.state_dim, ck.info.action_dim, ck.info.fps)
    else:
        if source.lerobot_version != "auto":
            raise ValueError(f"a LeRobot version applies to {ckpt_name}; a random preset has no "
                             "checkpoint conventions")
        for name, value in ((tok_name, source.tokenizer), (asset_name, source.asset_id)):
            if value:
                raise ValueError(f"{name} applies to {ckpt_name}; a random preset uses its "
                                 "built-in tokenizer")
        mc = load_model_config(source.preset, source.model_config or None)
        built = BuiltEngine(Engine(mc, config), None, f"preset:{source.preset}",
                            tuple(f"camera{i}" for i in range(mc.num_cameras)))
    if warmup:
        built.engine.warmup()
    return built
