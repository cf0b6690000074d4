"""Family-neutral loading: the Checkpoint a folder opens to, tokenizer resolution, random
weights for a config, and which family opens a folder (engine/families/: each family's
owns_folder; a folder no family claims opens with the one declaring opens_unclaimed)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..config.model_config import ModelConfig
from ..config import family_registry
from ..runner.device import check_device
from ..model.tokenizer import Tokenizer, check_vocab, find_tokenizer, load_tokenizer_spec

if TYPE_CHECKING:
    from .base import Family
    from ..model.formats import CheckpointInfo
    from ..model.norm import NormStats


@dataclass
class Checkpoint:
    model: torch.nn.Module | None  # None from describe_checkpoint (nothing loaded)
    config: ModelConfig
    tokenizer: Tokenizer | None
    tokenizer_source: str  # where the tokenizer came from, or why none was found
    norm_stats: "NormStats | None"
    info: "CheckpointInfo"


def resolve_tokenizer(folder: str | Path, config: ModelConfig, info: "CheckpointInfo",
                      tokenizer=None) -> tuple[Tokenizer, str]:
    """The given tokenizer (object, file, folder or cached repo id), else the one found next to
    the checkpoint or in the local caches; ValueError when none is found or its vocabulary does
    not fit the embedding."""
    if tokenizer is not None and not isinstance(tokenizer, (str, Path)):
        tok, source = tokenizer, f"{type(tokenizer).__name__} object"
    elif tokenizer:
        tok, source = load_tokenizer_spec(tokenizer)
    else:
        tok, source = find_tokenizer(folder, info.tokenizer_repos, openpi=info.format == "openpi")
    check_vocab(tok, config.vocab_size, source)
    return tok, source


def init_model(config: ModelConfig, seed: int = 0, device: str | torch.device = "cpu",
               dtype: torch.dtype | str = torch.float32) -> torch.nn.Module:
    """Deterministic random weights for ``config`` (same seed -> same weights on any device),
    inference-only, by its family's rules."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    device = check_device(device)
    return family_registry.family_of(config).init_model(config, seed, device, dtype)


def folder_family(folder: str | Path) -> "Family":
    """The family that opens ``folder``: the first claiming it, else the one opening unclaimed
    folders."""
    families = family_registry.all_families()
    for family in families:
        if family.owns_folder(Path(folder)):
            return family
    fallback = [f for f in families if f.opens_unclaimed]
    if not fallback:
        raise ValueError(f"{folder}: no model family opens this folder")
    return fallback[0]


def version_options(family: "Family", folder: Path, lerobot_version: str = "auto") -> dict:
    """The family's keyword for a LeRobot version set by hand: only the pi05 family (LeRobot /
    openpi folders) has version conventions; ValueError for another family's folder."""
    if not lerobot_version or lerobot_version == "auto":
        return {}
    if not family.lerobot_conventions:
        raise ValueError(f"lerobot_version applies to LeRobot pi0.5 checkpoints; {folder} is a "
                         f"{family.name} folder (leave it auto)")
    return {"lerobot_version": lerobot_version}


def open_checkpoint(folder: str | Path, device: str | torch.device = "cpu",
                    dtype: torch.dtype | str = torch.float32, tokenizer=None,
                    asset_id: str | None = None, progress: bool | None = None,
                    lerobot_version: str = "auto") -> Checkpoint:
    """Load a checkpoint folder with its tokenizer (and statistics where it has them), by the
    family whose format it is (a LeRobot or openpi pi0.5 checkpoint; a Qwen3-VL folder: the
    backbone + our experts' files). The tokenizer and every key and shape are checked before
    any weight is read. `lerobot_version`: the LeRobot version whose conventions apply
    ("auto": what the folder shows; engine/model/conventions.py)."""
    check_device(device)
    folder = Path(folder)
    family = folder_family(folder)
    return family.open_folder(folder, device, dtype, tokenizer, asset_id, progress,
                              **version_options(family, folder, lerobot_version))


def load_checkpoint(folder: str | Path, device: str | torch.device = "cpu",
                    dtype: torch.dtype | str = torch.float32, tokenizer=None,
                    asset_id: str | None = None, progress: bool | None = None,
                    lerobot_version: str = "auto"):
    """-> (model, config, tokenizer, NormStats | None); see open_checkpoint."""
    ck = open_checkpoint(folder, device, dtype, tokenizer, asset_id, progress, lerobot_version)
    return ck.model, ck.config, ck.tokenizer, ck.norm_stats
