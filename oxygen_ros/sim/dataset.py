"""The demonstration dataset: one .npz of recorded expert frames, and training batches from it.

File layout (every array has one row per recorded frame unless said otherwise):
  images uint8 [F, S, S, 3]   the camera, RGB, as the policy sees it; [F, C, S, S, 3] with C
                              cameras (meta "cameras" names them, in the policy's order)
  state float32 [F, D]        Meta-World: [ee_x, ee_y, ee_z, gripper] (robot units); ALOHA: 14 joints
  target float32 [F, D]       the expert's ABSOLUTE target at that frame (target_from_expert)
  episode int32 [F], step int32 [F] (env step of the frame), task int16 [F], caption int16 [F]
  tasks, instructions [T] str; captions [C] str; episode_success [E] bool; episode_task [E];
  meta: a JSON string (seed, frame stride in env steps, image size, recorder version)
  caption_only bool [F] (recorder version 2; all False when absent): frames of an episode whose
  expert aimed beside the object on purpose: their caption is trained, their targets are not
  driven bool [F] (all False when absent): frames of an episode a trained policy drove (the
  expert's target beside each); caption-only unless recorded with --policy-actions
A frame's action chunk is the targets of the frames `action_period_steps` env steps apart from it
on (meta "action_period_steps", else Meta-World's ACTION_PERIOD_STEPS) (held at the episode's last target past its end: a finished task holds still).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..engine import NormStats
from .policy import ACTION_PERIOD_STEPS, PromptCodec
from .train_forward import IGNORE, Batch

ARRAYS = ("images", "state", "target", "episode", "step", "task", "caption")


@dataclass
class Demos:
    images: np.ndarray
    state: np.ndarray
    target: np.ndarray
    episode: np.ndarray
    step: np.ndarray
    task: np.ndarray
    caption: np.ndarray
    tasks: list[str]
    instructions: list[str]
    captions: list[str]
    episode_success: np.ndarray
    episode_task: np.ndarray
    meta: dict
    caption_only: np.ndarray | None = None
    driven: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("caption_only", "driven"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(len(self.images), dtype=bool))
            shape = getattr(self, name).shape
            if shape != (len(self.images),):
                raise ValueError(f"{name} has shape {shape}, expected ({len(self.images)},)")

    @property
    def expert_frames(self) -> np.ndarray:
        """[F] bool: frames the scripted expert drove, with the target it meant (not aimed
        beside the object on purpose, not driven by a trained policy)."""
        return ~self.caption_only & ~self.driven

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def frame_stride(self) -> int:
        return int(self.meta["frame_stride"])

    @property
    def action_period_steps(self) -> int:
        return int(self.meta.get("action_period_steps", ACTION_PERIOD_STEPS))

    @property
    def num_cameras(self) -> int:
        return 1 if self.images.ndim == 4 else int(self.images.shape[1])

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **{k: getattr(self, k) for k in ARRAYS},
                 tasks=np.array(self.tasks), instructions=np.array(self.instructions),
                 captions=np.array(self.captions), episode_success=self.episode_success,
                 episode_task=self.episode_task, meta=np.array(json.dumps(self.meta)),
                 caption_only=self.caption_only, driven=self.driven)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Demos":
        with np.load(path, allow_pickle=False) as z:
            return cls(**{k: z[k] for k in ARRAYS}, tasks=[str(s) for s in z["tasks"]],
                       instructions=[str(s) for s in z["instructions"]],
                       captions=[str(s) for s in z["captions"]],
                       episode_success=z["episode_success"], episode_task=z["episode_task"],
                       meta=json.loads(str(z["meta"])),
                       caption_only=z["caption_only"] if "caption_only" in z.files else None,
                       driven=z["driven"] if "driven" in z.files else None)

    def chunk_index(self, horizon: int) -> np.ndarray:
        """[F, horizon] frame indices of each frame's action chunk (held at the episode end)."""
        period = self.action_period_steps
        if period % self.frame_stride:
            raise ValueError(f"frame stride {self.frame_stride} does not divide the action period "
                             f"{period} env steps")
        per = period // self.frame_stride
        idx = np.arange(len(self))[:, None] + per * np.arange(horizon)[None]
        # last frame of each frame's episode (episodes are stored contiguously)
        ends = np.zeros(len(self), dtype=np.int64)
        bounds = np.flatnonzero(np.diff(self.episode)) + 1
        starts = np.concatenate(([0], bounds))
        stops = np.concatenate((bounds, [len(self)])) - 1
        for s, e in zip(starts, stops):
            ends[s:e + 1] = e
        return np.minimum(idx, ends[:, None])

    def split(self, held_out: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Frame indices (train, held-out) by whole episodes, per task, seeded."""
        rng = np.random.default_rng(seed)
        eps = np.unique(self.episode)
        only = np.zeros(len(self.episode_task), dtype=bool)  # caption-only or policy-driven
        only[np.unique(self.episode[~self.expert_frames])] = True
        held = []
        # the expert's episodes drawn exactly as before caption-only episodes existed (the same
        # layouts are held out with or without them), then the caption-only and policy-driven
        # ones apart
        for pick_only, r in ((False, rng), (True, np.random.default_rng(seed + 1))):
            for t in np.unique(self.episode_task):
                mine = eps[(self.episode_task[eps] == t) & (only[eps] == pick_only)]
                k = int(round(held_out * len(mine)))
                held += list(r.choice(mine, size=k, replace=False)) if k else []
        mask = np.isin(self.episode, held)
        return np.flatnonzero(~mask), np.flatnonzero(mask)


def _range(lo: np.ndarray, hi: np.ndarray, floor: float = 1e-2) -> tuple[np.ndarray, np.ndarray]:
    """Widen a degenerate dimension (a constant joint would divide by ~0) to `floor`."""
    mid, half = (lo + hi) / 2, np.maximum((hi - lo) / 2, floor / 2)
    return (mid - half).astype(np.float32), (mid + half).astype(np.float32)


def norm_stats(demos: Demos, frames: np.ndarray) -> NormStats:
    """pi0.5's quantile normalisation (q01 / q99 -> -1 / 1) from the training frames, with
    LeRobot's other statistics stored beside them."""
    extra = {}
    out = []
    for key, x in (("observation.state", demos.state[frames]), ("action", demos.target[frames])):
        x = x.astype(np.float64)
        q01, q99 = _range(np.quantile(x, 0.01, axis=0), np.quantile(x, 0.99, axis=0))
        out += [q01, q99]
        extra.update({f"{key}.mean": x.mean(0), f"{key}.std": x.std(0), f"{key}.min": x.min(0),
                      f"{key}.max": x.max(0), f"{key}.count": np.array([len(x)]),
                      f"{key}.q01": q01, f"{key}.q99": q99})
    return NormStats.quantiles(*out, extra={k: np.asarray(v, dtype=np.float32)
                                            for k, v in extra.items()})


class Batcher:
    """Pre-tokenised training frames -> Batch (normalised state in the prompt, normalised
    action chunk, the caption after the memory prompt)."""

    def __init__(self, demos: Demos, codec: PromptCodec, stats: NormStats) -> None:
        self.demos, self.codec, self.stats = demos, codec, stats
        cfg = codec.config
        self.chunks = demos.chunk_index(cfg.action_horizon)
        self.norm_actions = stats.normalize_actions(demos.target).astype(np.float32)
        norm_state = stats.normalize_state(demos.state)
        prompts = {}
        self.prompt_ids: list[list[int]] = []
        for i in range(len(demos)):
            key = (int(demos.task[i]), tuple(norm_state[i].tolist()))
            if key not in prompts:
                prompts[key] = codec.prompt_ids(demos.instructions[key[0]], norm_state[i])
            self.prompt_ids.append(prompts[key])
        mem = codec.memory_ids()
        self.lang: list[tuple[list[int], list[int]]] = []
        for c in demos.captions:
            target_ids = codec.caption_ids(c)  # caption + EOS
            inputs = mem + target_ids[:-1]
            targets = [IGNORE] * (len(mem) - 1) + target_ids
            self.lang.append((inputs, targets))

    def batch(self, frames: np.ndarray) -> Batch:
        d = self.demos
        pad = self.codec.config.pad_token_id
        prompts = [self.prompt_ids[i] for i in frames]
        langs = [self.lang[int(d.caption[i])] for i in frames]
        lp, lc = max(map(len, prompts)), max(len(x[0]) for x in langs)
        prompt = torch.full((len(frames), lp), pad, dtype=torch.long)
        lang = torch.full((len(frames), lc), pad, dtype=torch.long)
        target = torch.full((len(frames), lc), IGNORE, dtype=torch.long)
        for r, (p, (li, lt)) in enumerate(zip(prompts, langs)):
            prompt[r, :len(p)] = torch.tensor(p)
            lang[r, :len(li)] = torch.tensor(li)
            target[r, :len(lt)] = torch.tensor(lt)
        return Batch(images=images_to_model(d.images[frames]), prompt=prompt,
                     prompt_len=torch.tensor([len(p) for p in prompts]), lang=lang,
                     lang_len=torch.tensor([len(x[0]) for x in langs]), lang_target=target,
                     actions=torch.from_numpy(self.norm_actions[self.chunks[frames]]),
                     action_mask=torch.from_numpy(~d.caption_only[frames]))


def images_to_model(images: np.ndarray) -> torch.Tensor:
    """uint8 [B, S, S, 3] -> float [B, 3, S, S] in [-1, 1], the engine's arithmetic
    (engine/runner/images.py prepare: / 255, * 2, - 1) for model-size images; several cameras
    [B, C, S, S, 3] -> [B, C, 3, S, S]."""
    x = torch.from_numpy(np.ascontiguousarray(images))
    x = (x.permute(0, 3, 1, 2) if x.dim() == 4 else x.permute(0, 1, 4, 2, 3)).to(torch.float32)
    return x.div_(255.0).mul_(2.0).sub_(1.0)
