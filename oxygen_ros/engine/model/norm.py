"""State / action (un)normalisation as pi0.5 checkpoints define it.

Two conventions, each matched exactly (float32 arithmetic, same operation order):
- LeRobot (NormalizerProcessorStep): range modes (QUANTILES q01/q99, QUANTILE10 q10/q90, MIN_MAX)
  x -> 2 (x - lo) / d - 1 with d = hi - lo, replaced by eps (1e-8) only where hi == lo;
  MEAN_STD x -> (x - mean) / (std + eps), inverse x * std + mean; IDENTITY passes through.
- openpi (transforms.Normalize / Unnormalize): quantiles x -> (x - q01) / (q99 - q01 + 1e-6) * 2 - 1,
  inverse (x + 1) / 2 * (q99 - q01 + 1e-6) + q01; z-score (x - mean) / (std + 1e-6), inverse
  x * (std + 1e-6) + mean. pi0.5 uses quantiles.
Statistics shorter than the vector apply to its leading dims (actions come out padded).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .conventions import RelativeActions

RANGE_STATS = {"QUANTILES": ("q01", "q99"), "QUANTILE10": ("q10", "q90"), "MIN_MAX": ("min", "max")}
OPENPI_EPS = 1e-6


def _f32(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float32).reshape(-1)


@dataclass
class FeatureNorm:
    """One feature's normalisation: kind "range" (lo/hi), "mean_std" (mean/std) or "identity"."""

    kind: str
    lo: np.ndarray | None = None  # range: q01 (or q10 / min); mean_std: mean
    hi: np.ndarray | None = None  # range: q99 (or q90 / max); mean_std: std
    convention: str = "lerobot"  # or "openpi"
    eps: float = 1e-8  # LeRobot's eps; openpi always adds 1e-6
    source: str = "QUANTILES"  # the mode name the checkpoint gives

    def __post_init__(self) -> None:
        if self.kind not in ("range", "mean_std", "identity"):
            raise ValueError(f"unknown normalisation kind {self.kind!r}")
        if self.convention not in ("lerobot", "openpi"):
            raise ValueError(f"unknown normalisation convention {self.convention!r}")
        if self.kind != "identity":
            if self.lo is None or self.hi is None:
                raise ValueError(f"{self.source} normalisation needs both statistics")
            self.lo, self.hi = _f32(self.lo), _f32(self.hi)
            if self.lo.shape != self.hi.shape:
                raise ValueError(f"{self.source} statistics have {self.lo.size} and {self.hi.size} values")
            if not (np.isfinite(self.lo).all() and np.isfinite(self.hi).all()):
                raise ValueError(f"{self.source} statistics are not finite")

    @property
    def dim(self) -> int | None:
        return None if self.lo is None else int(self.lo.size)

    def _stats(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return self.lo[:n], self.hi[:n]

    def _denom(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if self.convention == "openpi":
            return hi - lo + np.float32(OPENPI_EPS)
        d = hi - lo
        return np.where(d == 0, np.float32(self.eps), d)

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        if self.kind == "identity":
            return x
        n = min(x.shape[-1], self.dim)
        lo, hi = self._stats(n)
        head = x[..., :n]
        if self.kind == "mean_std":
            eps = OPENPI_EPS if self.convention == "openpi" else self.eps
            out = (head - lo) / (hi + np.float32(eps))
        elif self.convention == "openpi":
            out = (head - lo) / self._denom(lo, hi) * 2.0 - 1.0
        else:
            out = 2.0 * (head - lo) / self._denom(lo, hi) - 1.0
        return np.concatenate([out, x[..., n:]], axis=-1).astype(np.float32)

    def inverse(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        if self.kind == "identity":
            return x
        n = min(x.shape[-1], self.dim)
        lo, hi = self._stats(n)
        head = x[..., :n]
        if self.kind == "mean_std":
            scale = hi + np.float32(OPENPI_EPS) if self.convention == "openpi" else hi
            out = head * scale + lo
        elif self.convention == "openpi":
            out = (head + 1.0) / 2.0 * self._denom(lo, hi) + lo
        else:
            out = (head + 1.0) * self._denom(lo, hi) / 2.0 + lo
        return np.concatenate([out, x[..., n:]], axis=-1).astype(np.float32)

    def summary(self) -> str:
        if self.kind == "identity":
            return "identity"
        names = ("mean", "std") if self.kind == "mean_std" else RANGE_STATS.get(self.source, ("lo", "hi"))
        return (f"{self.source} ({self.convention}), {self.dim} dims, {names[0]} "
                f"[{self.lo.min():.4g}, {self.lo.max():.4g}], {names[1]} [{self.hi.min():.4g}, "
                f"{self.hi.max():.4g}]")


@dataclass
class NormStats:
    """State and action normalisation of a checkpoint, plus every other stored statistic."""

    state: FeatureNorm
    action: FeatureNorm
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    # LeRobot v0.5.1+ use_relative_actions (engine/model/conventions.py): the model's actions are
    # relative to the raw state; None: absolute
    relative: "RelativeActions | None" = None

    @classmethod
    def identity(cls) -> "NormStats":
        """A checkpoint without statistics (a base model): LeRobot normalises nothing."""
        return cls(FeatureNorm("identity", source="IDENTITY"), FeatureNorm("identity", source="IDENTITY"))

    @classmethod
    def quantiles(cls, state_q01, state_q99, action_q01, action_q99, extra=None,
                  convention: str = "lerobot") -> "NormStats":
        return cls(FeatureNorm("range", state_q01, state_q99, convention),
                   FeatureNorm("range", action_q01, action_q99, convention), dict(extra or {}))

    @property
    def state_dim(self) -> int | None:
        return self.state.dim

    @property
    def action_dim(self) -> int | None:
        return self.action.dim

    def normalize_state(self, state) -> np.ndarray:
        return self.state.forward(state)

    def normalize_actions(self, actions) -> np.ndarray:
        """Robot-unit actions [..., dims] -> model units (the inverse of unnormalize_actions on
        the statistics' dims; real-time chunking hands executed steps back to the model)."""
        return self.action.forward(actions)

    def unnormalize_actions(self, actions) -> np.ndarray:
        """[..., padded dims] model actions -> robot units, cut to the statistics' dims."""
        a = self.action.inverse(actions)
        return a[..., : self.action_dim] if self.action_dim is not None else a

    def actions_to_robot(self, actions, state=None) -> np.ndarray:
        """LeRobot's postprocessor: unnormalise, then (relative actions) add the raw robot
        `state` of the observation back (ValueError without one)."""
        a = self.unnormalize_actions(actions)
        if self.relative is None:
            return a
        if state is None:
            raise ValueError("this checkpoint's actions are relative to the state: the state is needed")
        return self.relative.to_absolute(a, state)

    def actions_to_model(self, actions, state=None) -> np.ndarray:
        """The inverse of actions_to_robot on the statistics' dims (real-time chunking hands
        executed robot-unit steps back, relative to the new observation's `state`)."""
        a = np.asarray(actions, dtype=np.float32)
        if self.relative is not None:
            if state is None:
                raise ValueError("this checkpoint's actions are relative to the state: the state is needed")
            a = self.relative.to_relative(a, state)
        return self.normalize_actions(a)

    # ---- LeRobot processor files (flat "<feature>.<stat>" tensors) -----------------------------
    @classmethod
    def from_lerobot(cls, flat: dict[str, np.ndarray], norm_map: dict[str, str], eps: float = 1e-8,
                     state_key: str = "observation.state", action_key: str = "action") -> "NormStats":
        def feature(key: str, ftype: str) -> FeatureNorm:
            mode = str(norm_map.get(ftype, "IDENTITY")).upper()
            if mode == "IDENTITY":
                return FeatureNorm("identity", source=mode)
            names = ("mean", "std") if mode == "MEAN_STD" else RANGE_STATS.get(mode)
            if names is None:
                raise ValueError(f"unsupported normalisation mode {mode} for {key}")
            missing = [f"{key}.{n}" for n in names if f"{key}.{n}" not in flat]
            if missing:
                raise ValueError(f"{mode} normalisation of {key} needs {missing}, which the "
                                 "normalizer files do not hold")
            kind = "mean_std" if mode == "MEAN_STD" else "range"
            return FeatureNorm(kind, flat[f"{key}.{names[0]}"], flat[f"{key}.{names[1]}"],
                               "lerobot", eps, mode)

        return cls(feature(state_key, "STATE"), feature(action_key, "ACTION"),
                   {k: np.asarray(v) for k, v in flat.items()})

    def lerobot_flat(self) -> dict[str, np.ndarray]:
        out = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in self.extra.items()}
        for key, f in (("observation.state", self.state), ("action", self.action)):
            if f.kind == "identity":
                continue
            names = ("mean", "std") if f.kind == "mean_std" else RANGE_STATS.get(f.source, ("q01", "q99"))
            out[f"{key}.{names[0]}"] = np.ascontiguousarray(f.lo)
            out[f"{key}.{names[1]}"] = np.ascontiguousarray(f.hi)
        return out

    def lerobot_norm_map(self) -> dict[str, str]:
        return {"VISUAL": "IDENTITY", "STATE": self.state.source, "ACTION": self.action.source}

    # ---- openpi assets/<asset_id>/norm_stats.json ----------------------------------------------
    @classmethod
    def from_openpi(cls, path: str | Path) -> "NormStats":
        """{"norm_stats": {"state": {mean, std, q01, q99}, "actions": {...}}}: quantiles when
        q01/q99 are there (pi0.5 trains with them), else mean/std."""
        data = json.loads(Path(path).read_text())
        stats = data.get("norm_stats", data)

        def feature(key: str) -> FeatureNorm:
            s = stats.get(key)
            if not isinstance(s, dict):
                raise ValueError(f"{path} has no {key!r} statistics (found {sorted(stats)})")
            if s.get("q01") is not None and s.get("q99") is not None:
                return FeatureNorm("range", s["q01"], s["q99"], "openpi", source="QUANTILES")
            if s.get("mean") is not None and s.get("std") is not None:
                return FeatureNorm("mean_std", s["mean"], s["std"], "openpi", source="MEAN_STD")
            raise ValueError(f"{path}: {key!r} has neither q01/q99 nor mean/std")

        extra = {f"{k}.{n}": _f32(v) for k, s in stats.items() if isinstance(s, dict)
                 for n, v in s.items() if v is not None}
        return cls(feature("state"), feature("actions"), extra)
