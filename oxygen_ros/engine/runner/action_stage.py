"""What the runner asks of a model family beyond the configuration's questions
(engine/config/family_rules.py): the frame's action stage (ActionInputs in, one chunk per head
out), the layers whose prefill hidden states it reads, the vision tower's pixel dtype and, for
families whose action stage is one flow-matching expert, its denoising. A family answers them
(engine/families/base.py: Family); the runner holds its family as an ActionStage, so it never
imports the families."""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ..config.family_rules import FamilyRules

if TYPE_CHECKING:
    import torch

    from ..config.model_config import ModelConfig
    from ..model.rtc import Guide
    from .model_runner import ModelRunner, SeqView


@dataclass(frozen=True)
class ActionInputs:
    """What a frame's action stage reads, after its prefill (ModelRunner.action_chunks)."""

    seq: "SeqView"  # the frame's action sequence: prefix + its scratch slots
    prefix_len: int
    noise: "torch.Tensor"  # [noise_rows, action_dim]
    num_steps: int  # S
    guide: "Guide | None" = None  # real-time chunking (capabilities.rtc only)
    state: "torch.Tensor | None" = None  # the normalised joint state [action_dim]
    num_images: int = 0
    prompt_ids: Sequence[int] = ()


class ActionStage(FamilyRules):
    """The runner's questions to one family."""

    def pixel_dtype(self, model: "torch.nn.Module", dtype: "torch.dtype") -> "torch.dtype":
        """The dtype the vision tower takes its pixels in (a model of `dtype`): the model's own,
        unless the family keeps its vision tower in another (pi0.5 in bf16, as LeRobot does)."""
        return dtype

    def kept_layers(self, config: "ModelConfig") -> tuple[int, ...]:
        """Backbone layers whose prefill hidden states the action stage reads."""
        return ()

    @abstractmethod
    def action_chunks(self, runner: "ModelRunner", a: ActionInputs) -> dict[str, "torch.Tensor"]:
        """The frame's action stage: one chunk per head name, in head_names' order."""

    def denoise(self, runner: "ModelRunner", seq: "SeqView", prefix_len: int,
                noise: "torch.Tensor", num_steps: int, expert: int, guide: "Guide | None",
                state: "torch.Tensor | None") -> "torch.Tensor":
        """Flow-matching denoising of one expert on the paged prefix (ModelRunner.denoise), for
        families whose action stage is one."""
        raise ValueError(f"family {self.name} has no denoising expert: action_chunks runs its "
                         f"action stage")


__all__ = ["ActionInputs", "ActionStage"]
