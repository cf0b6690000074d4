"""What the configuration asks of a model family (torch-free): its capabilities, the schema rules
only it knows, the prefix layout, its heads and noise rows and its cache spec. ModelConfig's
validation and properties ask the family registered under ModelConfig.family
(engine/config/family_registry.py). The runner's questions extend these
(engine/runner/action_stage.py: ActionStage) and a family answers them all
(engine/families/base.py: Family)."""
from __future__ import annotations

from abc import ABC
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .cache_spec import AttentionKV, CacheSpec

if TYPE_CHECKING:
    from .model_config import ModelConfig


@dataclass(frozen=True)
class Capabilities:
    """What a family's models can do (declared, never probed on the model object)."""

    rtc: bool = False  # takes an action prior (real-time chunking: engine/model/rtc.py)
    cuda_graphs: bool = False  # decode and action stage through captured graphs (engine/runner/graphs.py)
    causal_prefix: bool = True  # the observation prefix attends causally (False: bidirectional)
    bos: bool = False  # prompts start with the tokenizer's BOS (the tokenizer must have one)
    # the action stage reads hidden states the prefill keeps (Family.kept_layers), not only K/V
    keeps_hidden: bool = False


class FamilyRules(ABC):
    """The configuration's questions to one family; ``name`` and ``capabilities`` set by it."""

    name: str = ""
    capabilities: Capabilities = Capabilities()

    # -- the schema ------------------------------------------------------------------------------
    def validate(self, config: "ModelConfig") -> None:
        """ValueError when ``config`` breaks a rule of this family (ModelConfig's construction
        runs it after its family-neutral checks)."""

    def unsupported_reason(self, config: "ModelConfig") -> str | None:
        """Why a frame cannot run ``config`` (None: it can)."""
        return None

    # -- the prefix layout -----------------------------------------------------------------------
    def image_tokens(self, config: "ModelConfig") -> int:
        return config.vision.tokens_per_image

    def image_grid(self, config: "ModelConfig") -> tuple[int, int]:
        side = config.vision.image_size // config.vision.patch_size
        return side, side

    def prefix_tokens(self, config: "ModelConfig", num_images: int, num_prompt: int) -> int:
        return num_images * config.image_tokens + num_prompt

    def rope_offset(self, config: "ModelConfig", num_images: int) -> int:
        return 0

    def action_tokens(self, config: "ModelConfig") -> int:
        """Scratch tokens one action pass queries after the prefix."""
        return config.action_horizon

    # -- heads -----------------------------------------------------------------------------------
    def head_names(self, config: "ModelConfig") -> tuple[str, ...]:
        """The chunks a frame gives (FrameOutput.chunks' keys, in order)."""
        return ("action",)

    def noise_rows(self, config: "ModelConfig") -> int:
        """Rows of a frame's noise [rows, action_dim]."""
        return config.action_horizon

    # -- the cache -------------------------------------------------------------------------------
    def cache_spec(self, config: "ModelConfig") -> CacheSpec:
        """What one sequence keeps between steps: K/V of every decoder layer."""
        return CacheSpec(AttentionKV(tuple(range(config.depth)), config.num_kv_heads,
                                     config.head_dim))


__all__ = ["Capabilities", "FamilyRules"]
