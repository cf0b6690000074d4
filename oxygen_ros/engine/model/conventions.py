"""Which pi0.5 input / output conventions a checkpoint was trained with, by the LeRobot version
that wrote it (or openpi's), and why we think so.

What changed between LeRobot versions (src/lerobot/policies/pi05/, processor/):
- v0.4.x zero-padded the normalised state to max_state_dim (32) before discretising it into the
  prompt (a LIBERO state of 8 values was followed by 24 bins of "128"); v0.5.0 removed the padding.
- v0.4.x padded non-square images in [0, 1] with -1 before mapping x * 2 - 1: bars of -3. From
  v0.5.0 the bars are 0 in [0, 1], i.e. -1.
- In bf16, v0.4.x (as openpi) keeps the vision patch / position embeddings and every RMS norm in
  float32; from v0.5.0 the whole vision tower and projector and every norm stay float32.
- v0.5.1 added relative actions (config `use_relative_actions`, processor step
  `delta_actions_processor`, renamed `relative_actions_processor` later): actions are learned
  relative to the raw state; after unnormalising, the state's leading values are added back to the
  action dims not excluded by name (`relative_exclude_joints`, default "gripper", matched as a
  lower-case substring of the action names; no names: every dim).
- A folder without statistics (a base model) is not normalised at all (identity).

The version comes from the folder when it says (the model card's "LeRobot version" row, v0.6+;
the relative-actions step or config field, v0.5.1+; train_config.json's `cudnn_deterministic`,
v0.5.0+, or its absence there, v0.4.x) or from the `lerobot_version` parameter; a folder that
says nothing is taken as v0.5 or later (v0.4.x and v0.5.0 processor files are identical).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

AUTO = "auto"
V050 = (0, 5, 0)
V051 = (0, 5, 1)
RELATIVE_STEPS = ("relative_actions_processor", "delta_actions_processor")
# our parameter names kept float32 in a bf16 / fp16 model, by convention
_NORM_MARKERS = (".input_norm.", ".post_norm.")
_V04_EMBEDDINGS = ("vision.tower.embeddings.patch_embedding.", "vision.tower.embeddings.position_embedding.")


def parse_version(text: str) -> tuple[int, int, int]:
    """"0.4" / "0.5.1" / "v0.6.1" -> (major, minor, patch); ValueError otherwise."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.\-+]?\w*)?", str(text).strip())
    if not m:
        raise ValueError(f"lerobot_version must be 'auto' or a LeRobot version such as 0.4.4, 0.5.0 "
                         f"or 0.6.1, got {text!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def check_version_param(text: str) -> str:
    """The parameter's value, checked ('auto' or a version); ValueError with the reason."""
    if str(text).strip() != AUTO:
        parse_version(text)
    return str(text).strip()


@dataclass(frozen=True)
class RelativeActions:
    """v0.5.1+ relative actions: absolute = unnormalised action + state[:dims] * mask (LeRobot's
    to_absolute_actions, float32); `mask[i]`: action dim i is relative to state value i."""

    mask: tuple[bool, ...]
    names: tuple[str, ...] = ()  # the action names the mask was built from (may be empty)

    def _offset(self, actions: np.ndarray, state) -> tuple[np.ndarray, int]:
        s = np.asarray(state, dtype=np.float32).reshape(-1)
        dims = min(len(self.mask), actions.shape[-1])
        if s.size < dims:
            raise ValueError(f"relative actions add the state's first {dims} values back, but the "
                             f"state has {s.size}")
        return s[:dims] * np.asarray(self.mask[:dims], dtype=np.float32), dims

    def to_absolute(self, actions, state) -> np.ndarray:
        a = np.array(actions, dtype=np.float32)
        off, dims = self._offset(a, state)
        a[..., :dims] += off
        return a

    def to_relative(self, actions, state) -> np.ndarray:
        a = np.array(actions, dtype=np.float32)
        off, dims = self._offset(a, state)
        a[..., :dims] -= off
        return a

    def summary(self) -> str:
        kept = [self.names[i] if i < len(self.names) else str(i)
                for i, m in enumerate(self.mask) if not m]
        return (f"relative to the state on {sum(self.mask)} of {len(self.mask)} dims"
                + (f" (absolute: {', '.join(kept)})" if kept else ""))


def relative_mask(action_dim: int, exclude: list[str], names: list[str] | None) -> tuple[bool, ...]:
    """LeRobot's RelativeActionsProcessorStep._build_mask: a dim is excluded when an exclude token
    (lower case) equals or is part of its lower-case action name; no names: all dims relative."""
    tokens = [str(t).lower() for t in exclude if t]
    if not tokens or names is None:
        return (True,) * action_dim
    mask = [not any(t == str(n).lower() or t in str(n).lower() for t in tokens)
            for n in names[:action_dim]]
    return tuple(mask + [True] * (action_dim - len(mask)))


@dataclass(frozen=True)
class Conventions:
    """What a pi0.5 checkpoint's pre- and post-processing are, and why (`sources`)."""

    version: str  # "0.4.x", "0.5.0", ">=0.5.1", "0.6.1", "openpi", ... (what was detected / set)
    state_prompt_pad: int = 0  # the prompt's state zero-padded to this many values (0: none)
    image_pad_value: float = -1.0  # bars of resize-with-pad in model space ([-1, 1] images)
    fp32_vision: str = "tower"  # in bf16 kept float32: "tower" (+ projector) | "embeddings"
    relative: RelativeActions | None = None
    identity_norm: bool = False  # no statistics: no normalisation at all
    sources: dict[str, str] = field(default_factory=dict)  # convention -> why

    def keeps_fp32(self, name: str) -> bool:
        """Whether our parameter `name` stays float32 in a reduced-precision model (every norm,
        and the vision tower + projector or only its patch / position embeddings)."""
        if any(m in name for m in _NORM_MARKERS) or (name.startswith("experts.") and ".norm." in name):
            return True
        if self.fp32_vision == "tower":
            return name.startswith("vision.")
        return name.startswith(_V04_EMBEDDINGS)

    def lines(self) -> list[tuple[str, str]]:
        """(convention, value and why) rows for oxygen-inspect."""
        fp32 = ("vision tower, projector and every norm" if self.fp32_vision == "tower"
                else "vision patch / position embeddings and every norm")
        return [
            ("version", f"{self.version} ({self.sources.get('version', '')})"),
            ("state prompt", (f"state zero-padded to {self.state_prompt_pad} values" if self.state_prompt_pad
                              else "the state's own values, no padding")),
            ("image bars", f"{self.image_pad_value:g} (non-square images, resize-with-pad)"),
            ("bf16 keeps fp32", fp32),
            ("actions", (f"{self.relative.summary()} ({self.sources.get('relative', '')})" if self.relative
                         else "absolute, as the model outputs them (no use_relative_actions)")),
            ("normalisation", "identity (no statistics: LeRobot normalises nothing)" if self.identity_norm
             else "the checkpoint's statistics"),
        ]


def _model_card_version(folder: Path) -> str | None:
    """The version LeRobot (v0.6+) writes into the model card of a trained policy."""
    card = folder / "README.md"
    if not card.is_file():
        return None
    m = re.search(r"\|\s*LeRobot version\s*\|\s*v?([0-9][0-9A-Za-z.\-+]*)\s*\|", card.read_text(errors="replace"))
    return m.group(1) if m else None


def detect_version(folder: Path, cfg: dict, pre_steps: list[dict]) -> tuple[tuple[int, int, int] | None, str, str]:
    """(version or None when the folder does not tell, its label, why) from a LeRobot folder."""
    card = _model_card_version(folder)
    if card:
        try:
            return parse_version(card), card, "README.md model card 'LeRobot version'"
        except ValueError:
            pass
    step = next((s.get("registry_name") for s in pre_steps if s.get("registry_name") in RELATIVE_STEPS), None)
    if step:
        return V051, ">=0.5.1", f"policy_preprocessor.json has a {step} step"
    if "use_relative_actions" in cfg:
        return V051, ">=0.5.1", "config.json has use_relative_actions"
    train = folder / "train_config.json"
    if train.is_file():
        try:
            keys = json.loads(train.read_text())
        except ValueError:
            keys = {}
        if isinstance(keys, dict) and "cudnn_deterministic" in keys:
            return V050, ">=0.5.0", "train_config.json has cudnn_deterministic (added in v0.5.0)"
        if isinstance(keys, dict) and "batch_size" in keys:  # a training run's whole config
            return (0, 4, 0), "0.4.x", "train_config.json lacks cudnn_deterministic (added in v0.5.0)"
    return None, ">=0.5.0 (assumed)", ("nothing in the folder names the version (v0.4.x and v0.5.0 "
                                        "files are alike): a v0.4.x fine-tune needs lerobot_version 0.4")


def lerobot_conventions(folder: Path, cfg: dict, pre_steps: list[dict], has_stats: bool,
                        action_dim: int | None, requested: str = AUTO) -> Conventions:
    """The conventions of a LeRobot pi05 folder (config.json `cfg`, the preprocessor's steps)."""
    requested = check_version_param(requested)
    if requested != AUTO:
        version, label, why = parse_version(requested), requested, "set by lerobot_version"
    else:
        version, label, why = detect_version(folder, cfg, pre_steps)
    old = version is not None and version < V050
    sources = {"version": why}
    pad = 0
    if old:
        prep = next((s for s in pre_steps if s.get("registry_name") == "pi05_prepare_state_tokenizer_processor_step"), {})
        pad = int((prep.get("config") or {}).get("max_state_dim") or cfg.get("max_state_dim") or 32)
    relative = _relative(cfg, pre_steps, action_dim, sources)
    if not has_stats:
        sources["normalisation"] = "no normalizer statistics in the folder"
    return Conventions(label, pad, -3.0 if old else -1.0, "embeddings" if old else "tower", relative,
                       not has_stats, sources)


def _relative(cfg: dict, pre_steps: list[dict], action_dim: int | None, sources: dict) -> RelativeActions | None:
    step = next((s for s in pre_steps if s.get("registry_name") in RELATIVE_STEPS), None)
    conf = (step or {}).get("config") or {}
    enabled = conf.get("enabled", cfg.get("use_relative_actions", False))
    if not enabled:
        return None
    exclude = conf.get("exclude_joints", cfg.get("relative_exclude_joints", ["gripper"])) or []
    names = conf.get("action_names", cfg.get("action_feature_names"))
    if action_dim is None:
        raise ValueError("use_relative_actions is set but the checkpoint names no action size "
                         "(output_features.action.shape or statistics)")
    sources["relative"] = ("policy_preprocessor.json " + step["registry_name"] if step
                           else "config.json use_relative_actions")
    return RelativeActions(relative_mask(action_dim, exclude, names), tuple(str(n) for n in names or ()))


def openpi_conventions(has_stats: bool, requested: str = AUTO) -> Conventions:
    """openpi's PyTorch checkpoints: the state unpadded, -1 bars, bf16 as openpi keeps it (the
    vision embeddings and the norms float32); relative actions live in openpi's training config,
    not in the folder."""
    if check_version_param(requested) != AUTO:
        raise ValueError("lerobot_version applies to LeRobot checkpoints; this is an openpi one")
    sources = {"version": "openpi folder (config.json action_horizon / paligemma_variant)"}
    if not has_stats:
        sources["normalisation"] = "no assets/*/norm_stats.json"
    return Conventions("openpi", 0, -1.0, "embeddings", None, not has_stats, sources)
