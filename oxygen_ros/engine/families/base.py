"""The model family interface: what the engine asks of a family instead of branching on it.

A family is one object (a Family subclass instance, engine/families/<name>/family.py) registered
under ModelConfig.family (engine/config/family_registry.py). It answers, for a config of its
family, the configuration's questions (engine/config/family_rules.py, its config.py: the schema
rules only it knows, the prefix layout, its heads and noise rows, its capabilities, its cache
spec), the runner's (engine/runner/action_stage.py: the frame's action stage, the kept layers,
the pixel dtype) and those below: the prompt template, the model (init, inference preparation),
the bandwidth floor's per-stage costs (optional) and its checkpoint folders (open, inspect,
write).
"""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..runner.action_stage import ActionStage

if TYPE_CHECKING:
    import torch

    from ..config.model_config import ModelConfig
    from ..model.tokenizer import Tokenizer


@dataclass(frozen=True)
class StageCost:
    """One action-stage entry of the bandwidth floor (bench/floor.py): bytes of weights,
    attention (K/V) and hidden states it moves, run ``per_frame`` times a frame (1, S or k)."""

    name: str
    weights: int
    attention: int
    hidden: int
    per_frame: str


@dataclass(frozen=True)
class HeadParams:
    """One StarVLA head's parameters by how often a frame reads them."""

    name: str  # head_names: pi_v3, gr00t, oft, ...
    kind: str  # hidden-crossattn or regress
    per_frame: int  # once a frame (see count_params)
    per_step: int  # every Euler step (0 for regress)
    unread: int  # learned positions past the chunk: never read


@dataclass(frozen=True)
class ParamCounts:
    vision: int  # tower + projector
    vlm_layers: int  # expert 0's decoder layers and final norm
    lm_head: int  # tied embedding (vocab x width), read by every logits computation
    action_step: int  # action expert layers without adaRMS dense + action in/out projections
    adarms_once: int  # adaRMS dense layers + time MLP: once per S
    heads: tuple[HeadParams, ...] = ()  # StarVLA heads, in frame order
    unread: int = 0  # no stage reads them whole (an untied embedding: P rows a prefill)

    @property
    def total(self) -> int:
        return (self.vision + self.vlm_layers + self.lm_head + self.action_step + self.adarms_once
                + self.unread + sum(h.per_frame + h.per_step + h.unread for h in self.heads))


class Family(ActionStage):
    """One model family. Subclasses set ``name`` and ``capabilities`` and answer the rest: the
    configuration's questions (FamilyRules), the runner's (ActionStage) and the ones below."""

    # said of a question's token count where it is refused (", with the chat template")
    question_note: str = ""
    # what the floor calls one pass of the action stage (bench/floor.py's ratios)
    action_stage_label: str = "denoise"

    # -- the prompt ------------------------------------------------------------------------------
    @abstractmethod
    def prompt_ids(self, config: "ModelConfig", tokenizer: "Tokenizer", text: str) -> list[int]:
        """The prefix's prompt tokens for the formatted instruction + state ``text``."""

    def question_ids(self, config: "ModelConfig", tokenizer: "Tokenizer", prompt: str
                     ) -> list[int]:
        """A language request's tokens after the frame's prefix: the question's text."""
        return tokenizer.encode(prompt, add_bos=False)

    def split_reason(self, config: "ModelConfig", tokenizer: "Tokenizer", prompt_text: str
                     ) -> str | None:
        """Why prompt_ids(prompt_text) + question_ids(...) would not be the tokens of the joined
        text with ``tokenizer`` (None: they are, or the family does not promise it)."""
        return None

    # -- the model -------------------------------------------------------------------------------
    @abstractmethod
    def init_model(self, config: "ModelConfig", seed: int, device: "torch.device",
                   dtype: "torch.dtype") -> "torch.nn.Module":
        """Deterministic random weights (same seed -> same weights on any device)."""

    def prepare(self, model: "torch.nn.Module", linear_layout: str) -> None:
        """Inference-time preparation of loaded weights (fused projections ...)."""

    # -- the bandwidth floor (bench/floor.py): optional, a family without it has no floor --------
    def count_params(self, config: "ModelConfig", expert: int = 1) -> ParamCounts:
        """Parameters by what reads them (counted on the model built on the meta device)."""
        raise NotImplementedError(f"family {self.name} does not count its parameters: the "
                                  f"bandwidth floor (bench/floor.py) cannot price it")

    def action_costs(self, config: "ModelConfig", counts: ParamCounts, prefix_tokens: int,
                     elem: int) -> list[StageCost]:
        """The action stage's entries of the floor, in frame order; an entry named "prefill"
        adds its bytes to the prefill's (what the action stage makes the prefill do more)."""
        raise NotImplementedError(f"family {self.name} does not price its action stage: the "
                                  f"bandwidth floor (bench/floor.py) cannot price it")

    # -- checkpoints -----------------------------------------------------------------------------
    # the loader opens with this family a folder no family's owns_folder claims (one family:
    # the one whose format reader says best what a folder lacks)
    opens_unclaimed: bool = False
    # whether open_folder takes a LeRobot version (lerobot_version=...) whose conventions apply
    # (engine/model/conventions.py); the loader refuses a version for any other family's folder
    lerobot_conventions: bool = False

    def owns_folder(self, folder: Path) -> bool:
        """Whether ``folder`` is a checkpoint of this family's format."""
        return False

    def open_folder(self, folder: Path, device: Any, dtype: Any, tokenizer: Any = None,
                    asset_id: str | None = None, progress: bool | None = None) -> Any:
        """The loaded Checkpoint (engine/families/loader.py)."""
        raise NotImplementedError(f"family {self.name} has no checkpoint format")

    def inspect_folder(self, folder: Path, tokenizer: str | None = None,
                       asset_id: str | None = None) -> dict[str, Any]:
        """oxygen-inspect's report of a folder this family owns (report["problems"]: what
        stops serving), from headers and files, no weights read."""
        raise NotImplementedError(f"family {self.name} has no checkpoint format")

    def write_folder(self, model: "torch.nn.Module", folder: Path) -> None:
        """Write ``model`` as a folder open_folder reads back."""
        raise NotImplementedError(f"family {self.name} has no checkpoint format")


__all__ = ["Family", "HeadParams", "ParamCounts", "StageCost"]
