"""The model family interface: what the engine asks of a family instead of branching on it.

A family is one object (a Family subclass instance) registered under ModelConfig.family
(engine/families/registry.py). It answers, for a config of its family: the schema rules only it
knows (validate), the prefix layout and prompt template, the BOS rule, its action heads and
noise rows, its capabilities, its cache spec, the model (init, inference preparation), the
frame's action stage, the bandwidth floor's per-stage costs, and its checkpoint folders (open,
inspect, write).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import torch

    from ..config.model_config import ModelConfig
    from ..core.rtc import Guide
    from ..runner.model_runner import ModelRunner, SeqView
    from ..model.tokenizer import Tokenizer


@dataclass(frozen=True)
class Capabilities:
    """What a family's models can do (declared, never probed on the model object)."""

    rtc: bool = False  # takes an action prior (real-time chunking: engine/core/rtc.py)
    cuda_graphs: bool = False  # decode and action stage through captured graphs (engine/runner/graphs.py)
    causal_prefix: bool = True  # the observation prefix attends causally (False: bidirectional)
    bos: bool = False  # prompts start with the tokenizer's BOS (the tokenizer must have one)
    # the action stage reads hidden states the prefill keeps (Family.kept_layers), not only K/V
    keeps_hidden: bool = False


_ELEM_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class AttentionKV:
    """Paged attention K/V of the decoder layers ``layers`` (indices): each token ``kv_heads``
    x ``head_dim`` keys and as many values per layer, in the unified pool's blocks, in the
    engine's dtype (the pool's layer i is ``layers[i]``). pi0.5 and the Qwen3-VL families
    declare every layer; Qwen3.5 its full-attention layers."""

    layers: tuple[int, ...]
    kv_heads: int
    head_dim: int

    def bytes_per_token(self, elem: int) -> int:
        return len(self.layers) * 2 * self.kv_heads * self.head_dim * elem


@dataclass(frozen=True)
class StateTensor:
    """One tensor of a per-sequence recurrent state, per layer."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # float32 | bfloat16 | float16

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * _ELEM_BYTES[self.dtype]


@dataclass(frozen=True)
class RecurrentState:
    """A fixed-size state per sequence in each of the layers ``layers``, updated in place (not
    per token). A Gated DeltaNet layer (Qwen3.5, engine/model/qwen35.py: Qwen35Model.state_shapes)
    declares two tensors: the short convolution's window ("conv", [conv_dim, K], the model's
    dtype) and the recurrent matrix ("recurrent", [Hv, dk, dv], float32); its full-attention
    layers are the AttentionKV's. The pool holds it in state slots, one per sequence, sized
    when the engine is built (engine/runner/state_pool.py, engine/core/kv/state_slots.py; a model's state
    layers read them as ``ctx.states``)."""

    layers: tuple[int, ...]
    tensors: tuple[StateTensor, ...]

    def bytes_per_sequence(self) -> int:
        return len(self.layers) * sum(t.nbytes for t in self.tensors)


@dataclass(frozen=True)
class CacheSpec:
    """What one sequence keeps between steps: attention K/V (paged) and/or recurrent state."""

    attention: AttentionKV | None
    recurrent: RecurrentState | None = None


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


class Family(ABC):
    """One model family. Subclasses set ``name`` and ``capabilities`` and answer the rest."""

    name: str = ""
    capabilities: Capabilities = Capabilities()
    # said of a question's token count where it is refused (", with the chat template")
    question_note: str = ""
    # what the floor calls one pass of the action stage (bench/floor.py's ratios)
    action_stage_label: str = "denoise"

    # -- the schema ------------------------------------------------------------------------------
    def validate(self, config: "ModelConfig") -> None:
        """ValueError when ``config`` breaks a rule of this family (ModelConfig's construction
        runs it after its family-neutral checks)."""

    def unsupported_reason(self, config: "ModelConfig") -> str | None:
        """Why a frame cannot run ``config`` (None: it can)."""
        return None

    # -- prefix layout and prompt --------------------------------------------------------------
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

    # -- the model -------------------------------------------------------------------------------
    @abstractmethod
    def init_model(self, config: "ModelConfig", seed: int, device: "torch.device",
                   dtype: "torch.dtype") -> "torch.nn.Module":
        """Deterministic random weights (same seed -> same weights on any device)."""

    def prepare(self, model: "torch.nn.Module", linear_layout: str) -> None:
        """Inference-time preparation of loaded weights (fused projections ...)."""

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

    # -- the bandwidth floor (bench/floor.py) ----------------------------------------------------
    @abstractmethod
    def count_params(self, config: "ModelConfig", expert: int = 1) -> ParamCounts:
        """Parameters by what reads them (counted on the model built on the meta device)."""

    @abstractmethod
    def action_costs(self, config: "ModelConfig", counts: ParamCounts, prefix_tokens: int,
                     elem: int) -> list[StageCost]:
        """The action stage's entries of the floor, in frame order; an entry named "prefill"
        adds its bytes to the prefill's (what the action stage makes the prefill do more)."""

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
        """The loaded Checkpoint (engine/model/loader.py)."""
        raise NotImplementedError(f"family {self.name} has no checkpoint format")

    def inspect_folder(self, folder: Path, tokenizer: str | None = None,
                       asset_id: str | None = None) -> dict[str, Any]:
        """oxygen-inspect's report of a folder this family owns (report["problems"]: what
        stops serving), from headers and files, no weights read."""
        raise NotImplementedError(f"family {self.name} has no checkpoint format")

    def write_folder(self, model: "torch.nn.Module", folder: Path) -> None:
        """Write ``model`` as a folder open_folder reads back."""
        raise NotImplementedError(f"family {self.name} has no checkpoint format")


__all__ = ["ActionInputs", "AttentionKV", "CacheSpec", "Capabilities", "Family", "HeadParams",
           "ParamCounts", "RecurrentState", "StageCost", "StateTensor"]
