"""The frame primitives the modes arrange (prefill, denoise, births, admission, batched decode),
implementing modes.FrameOps, and the values one frame carries (Frame, ActionPath).

Engine.step builds a Frame (inputs, the config it runs under, counters, the rate decision),
secures the action path here, hands both to the mode, and reads the Frame back to report. The
primitives reach the runner, the KV manager and the scheduler; the modes reach only them.
"""
from __future__ import annotations

import hashlib
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
import torch

from ..config.engine_config import EngineConfig
from ..config.model_config import ModelConfig
from ..config import family_registry
from ..runner.model_runner import ModelRunner, SeqView
from .intake import Intake
from .observation import Observation
from .rate_control import FrameCosts, RateController, RateDecision
from .request import Request, RequestUpdate, Source
from ..model.rtc import Guide
from .scheduler import Admission, Scheduler
from .timer import StageTimer, TimedKV


def pad_state(state, action_dim: int) -> torch.Tensor:
    """The normalised joint state as the action stage's [action_dim] input (zeros past the robot's
    joints). Here, not in a model module: the core must not load a family's model code."""
    s = torch.zeros(action_dim, dtype=torch.float32)
    v = torch.as_tensor(state, dtype=torch.float32).reshape(-1)[:action_dim]
    s[: v.numel()] = v
    return s


def _tensor_bytes(t: torch.Tensor) -> np.ndarray:
    """The bytes of a tensor, as numpy (any dtype, any device)."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy()


@dataclass
class Frame:
    """One control frame's inputs, the settings it runs under, and its counters, handed to the
    mode. `rate` is the decode-step choice for an action-rate target (set by choose_k, read
    when the frame is accounted); `memory`: this frame gives birth to the periodic memory
    request."""

    index: int
    stamp: float
    source: Source
    noise: torch.Tensor
    config: EngineConfig
    guide: Guide | None = None  # real-time chunking toward the previous chunk (engine/model/rtc.py)
    state: np.ndarray | None = None  # normalised joints (an action expert with state tokens)
    memory: bool = False
    rate: RateDecision | None = None
    batch_size: int = 0
    decode_steps: int = 0
    admitted: int = 0
    # The action chunk leaves the frame as soon as it exists (denoise), before any language
    # work: `on_actions(actions, chunks)` gets the configured head's chunk and every head's by
    # name (numpy, model space); `actions_ms` is when, in ms from `started` (perf_counter).
    on_actions: Callable[[np.ndarray, dict[str, np.ndarray]], None] | None = None
    started: float = 0.0
    actions_ms: float = 0.0
    chunks: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def actions(self) -> np.ndarray:
        """The configured action head's chunk (EngineConfig.action_head; empty: the first)."""
        head = self.config.action_head
        return self.chunks[head] if head else next(iter(self.chunks.values()))


@dataclass
class ActionPath:
    """The action path's KV for one frame: the observation prefix and the action scratch (a fork
    of the prefix), both allocated before any language work."""

    prefix_seq: int
    scratch_seq: int
    prefix_table: tuple[int, ...]
    scratch_table: tuple[int, ...]
    copies: tuple[tuple[int, int, int], ...]  # CoW of the prefix tail, after the prefill
    released: bool = False
    prefix_slot: int | None = None  # the prefix's recurrent-state slot (its snapshot), if any


class FramePrimitives:
    """What the modes arrange, over the Engine's runner, KV manager and scheduler (modes.FrameOps).
    `lock` serialises the KV manager and scheduler (parallel mode's language thread); `outbox`
    holds the updates until the frame returns them."""

    def __init__(self, model_config: ModelConfig, runner: ModelRunner, scheduler: Scheduler, timer: StageTimer, intake: Intake,
                 lock: threading.Lock) -> None:
        self.model_config = model_config
        self.runner, self.scheduler, self.timer = runner, scheduler, timer
        self.intake = intake
        self.lock = lock
        self.rate = RateController()  # stage-cost estimates for target_action_hz
        self.outbox: list[RequestUpdate] = []  # updates not yet returned in a FrameOutput
        self._seq_ids = itertools.count(1)  # KV sequence ids

    @property
    def kv(self) -> TimedKV:
        # the scheduler's manager: one reference, so that a proxy put in front of it
        # (bench/kv_recorder.py) sees the action path's calls too
        return self.scheduler.kv  # type: ignore[return-value]

    # -- frame inputs ---------------------------------------------------------------------------
    def frame(self, index: int, obs: Observation, cfg: EngineConfig, prompt_ids: list[int],
              guide: Guide | None, periodic: bool) -> Frame:
        """The Frame for `obs` (already checked); `periodic` False: no memory request is born."""
        memory = periodic and bool(cfg.memory_every_n_frames) and \
            index % cfg.memory_every_n_frames == 0
        return Frame(index, obs.stamp, self._source(index, obs, cfg, prompt_ids),
                     self._noise(index, cfg), cfg, guide,
                     state=np.asarray(obs.state, dtype=np.float32), memory=memory)

    def _source(self, index: int, obs: Observation, cfg: EngineConfig, prompt_ids: list[int]
                ) -> Source:
        # The images are prepared once per frame, on the model's device, into a new tensor:
        # requests keep it while they may need a re-prefill, and a caller reusing its image
        # buffers cannot change what a waiting request saw.
        with self.timer.stage("vision_prefill"):
            pixels = self.runner.prepare_images(obs.valid_images(), cfg.image_resize)
        with self.timer.stage("kv"):  # the prefix cache's identity: the pixels the model sees
            h = hashlib.blake2b(_tensor_bytes(pixels), digest_size=8)
            h.update(np.asarray(prompt_ids, dtype=np.int64).tobytes())
            root = int.from_bytes(h.digest(), "little") & ((1 << 62) - 1)
        return Source(index, pixels, tuple(prompt_ids),
                      self.model_config.prefix_tokens(len(pixels), len(prompt_ids)), root)

    def _noise(self, index: int, cfg: EngineConfig) -> torch.Tensor:
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + index)
        mc = self.model_config
        return torch.randn(family_registry.family_of(mc).noise_rows(mc), mc.action_dim, generator=gen)

    # -- the action path ------------------------------------------------------------------------
    def secure_action_path(self, frame: Frame) -> ActionPath:
        """Relieve KV pressure, then allocate this frame's prefix and action scratch: the action
        stream never waits for language, whatever is in flight."""
        source, horizon = frame.source, self.model_config.action_tokens
        prefix_seq, scratch_seq = next(self._seq_ids), next(self._seq_ids)
        with self.timer.stage("sched"), self.lock:
            self.scheduler.relieve()
            kv = self.kv
            kv.create(prefix_seq)
            prefix = kv.append(prefix_seq, source.keys(), cacheable=False)
            scratch = None
            if prefix is not None:
                kv.create(scratch_seq, parent=prefix_seq)
                scratch = kv.append(scratch_seq, [], reserve=horizon, cacheable=False)
            if scratch is None:  # relief leaves frame_blocks free: only a sizing bug gets here
                kv.free(prefix_seq)
                if scratch_seq in kv:
                    kv.free(scratch_seq)
                raise RuntimeError("KV pool cannot hold this frame's action path: raise num_blocks")
        return ActionPath(prefix_seq, scratch_seq, prefix.block_ids, scratch.block_ids,  # type: ignore[union-attr]
                          scratch.copies, prefix_slot=prefix.state_slot)

    def prefill(self, frame: Frame, action: ActionPath) -> None:
        source = frame.source
        with self.timer.stage("vision_prefill"):
            self.runner.prefill_observation(source.images, source.prompt_ids,
                                            SeqView(action.prefix_table, source.num_tokens,
                                                    state_slot=action.prefix_slot),
                                            keep_hidden=True)

    def denoise(self, frame: Frame, action: ActionPath) -> dict[str, torch.Tensor]:
        """The action stage: one chunk per head (runner.action_chunks)."""
        plen = frame.source.num_tokens
        with self.timer.stage("kv"):
            self.runner.copy_blocks(action.copies)  # the prefix's partial tail, now written
        mc = self.model_config
        offset = mc.rope_offset(len(frame.source.images))
        state = None if frame.state is None else pad_state(frame.state, mc.action_dim)
        with self.timer.stage("denoise"):
            chunks = self.runner.action_chunks(
                SeqView(action.scratch_table, plen, offset), plen, frame.noise,
                frame.config.denoise_steps, guide=frame.guide, state=state,
                num_images=len(frame.source.images), prompt_ids=frame.source.prompt_ids)
            # on the host now (a GPU syncs here): the chunk exists, whatever the frame does next
            frame.chunks = {name: c.cpu().numpy() for name, c in chunks.items()}
        frame.actions_ms = (time.perf_counter() - frame.started) * 1e3
        if frame.on_actions is not None:
            frame.on_actions(frame.actions, frame.chunks)
        return chunks

    def release(self, action: ActionPath) -> None:
        if action.released:
            return
        action.released = True
        with self.timer.stage("sched"), self.lock:
            self.kv.free(action.scratch_seq)
            self.kv.free(action.prefix_seq)

    # -- language -------------------------------------------------------------------------------
    def running(self) -> tuple[Request, ...]:
        return self.scheduler.running

    def take_births(self, frame: Frame, prefix_seq: int | None) -> None:
        """Hand the questions asked since the last good frame, and this frame's memory request,
        to the scheduler: forking `prefix_seq`, or (None) to prefill the observation themselves.
        Until then they stay asked, so a frame that fails earlier loses none."""
        source, mc = frame.source, self.model_config
        with self.timer.stage("sched"):
            born = self.intake.take(frame.config if frame.memory else None)
            refused: list[Request] = []
            with self.lock:
                for ask in born:
                    req = Request(
                        id=ask.id, kind=ask.kind, prompt=ask.prompt,
                        prompt_ids=list(ask.prompt_ids), priority=ask.priority,
                        max_new_tokens=ask.max_new_tokens, birth_frame=frame.index,
                        stamp=frame.stamp, seq_id=next(self._seq_ids), prefix_seq_id=prefix_seq,
                        source=source, prefix_len=source.num_tokens,
                        rope_offset=mc.rope_offset(len(source.images)))
                    refused += self.scheduler.add(req)
        self._report(refused)

    def admit(self, frame: Frame, limit: int | None = None, reserve: int | None = None
              ) -> list[Admission]:
        """Admit what fits (priority, FIFO); prepare the admitted requests' KV: copy-on-write of
        a shared tail, and the observation prefix of a request that waited without one."""
        with self.timer.stage("sched"), self.lock:
            admissions = self.scheduler.admit(frame.index, limit, reserve)
        for a in admissions:
            if a.prefill is not None:
                with self.timer.stage("vision_prefill"):
                    self.runner.prefill_observation(
                        a.prefill.images, a.prefill.prompt_ids,
                        SeqView(a.request.block_table, a.prefill.num_tokens,
                                state_slot=a.request.state_slot))
            with self.timer.stage("kv"):
                self.runner.copy_blocks(a.blocks.copies)
                self.runner.copy_state(a.blocks.state_copy)  # its own copy of the snapshot
        frame.admitted += len(admissions)
        return admissions

    def decode(self, frame: Frame, batch: Iterable[Request], k: int) -> None:
        """Advance `batch` (running requests) by up to k tokens each in one batched generate;
        an admitted request's prompt suffix rides in its first step."""
        batch = list(batch)
        if not batch:
            return
        with self.timer.stage("sched"):
            seqs, inputs, steps, read_only = [], [], [], []
            for r in batch:
                n_prompt = len(r.prompt_ids)
                if r.suffix_pending:  # its suffix (less any prefix-cache hit) first
                    skip = min(r.num_cached_tokens, n_prompt - 1)
                    seqs.append(SeqView(r.block_table, r.prefix_len + skip, r.rope_offset,
                                        r.state_slot))
                    inputs.append(r.prompt_ids[skip:])
                    read_only.append(r.num_cached_tokens >= n_prompt)
                else:
                    n_out = len(r.output_ids)
                    seqs.append(SeqView(r.block_table, r.prefix_len + n_prompt + n_out - 1,
                                        r.rope_offset, r.state_slot))
                    inputs.append(r.output_ids[-1:])
                    read_only.append(False)
                steps.append(min(k, r.remaining))
        with self.timer.stage("decode"):
            toks, mars = self.runner.generate(seqs, inputs, steps, read_only)
        frame.decode_steps += max(steps)
        frame.batch_size = max(frame.batch_size, len(batch))
        with self.timer.stage("sched"), self.lock:
            before = [len(r.output_ids) for r in batch]
            self.scheduler.update(frame.index, {r.id: t for r, t in zip(batch, toks)},
                                  {r.id: m for r, m in zip(batch, mars)},
                                  self.model_config.eos_token_id)
        self._report(batch, before)

    def run_one_by_one(self, frame: Frame, reserve: int | None = None) -> None:
        """Isolated execution of the language work: every running request, then every request
        the queue admits (beside `reserve` free blocks), each alone until it finishes."""
        for r in self.scheduler.running:
            self.decode(frame, [r], r.remaining)
        while True:
            admissions = self.admit(frame, limit=1, reserve=reserve)
            if not admissions:
                return
            r = admissions[0].request
            self.decode(frame, [r], r.remaining)

    def _report(self, reqs: list[Request], before: list[int] | None = None) -> None:
        """Updates for `reqs` (tokens after `before[i]`) into the outbox; a final one is the last
        reference the engine keeps to its request."""
        eos = self.model_config.eos_token_id
        tokenizer = self.intake.tokenizer
        with self.timer.stage("detokenize"):
            for i, r in enumerate(reqs):
                b = before[i] if before is not None else len(r.output_ids)
                ids = r.output_ids
                if r.finish_reason == "eos" and ids and ids[-1] == eos:
                    ids = ids[:-1]
                self.outbox.append(RequestUpdate(
                    id=r.id, kind=r.kind.value, prompt=r.prompt,
                    new_tokens=tuple(r.output_ids[b:]), text=tokenizer.decode(ids),
                    num_tokens=len(r.output_ids), is_final=r.is_finished,
                    frames_spanned=len(r.frames_spanned), birth_frame=r.birth_frame,
                    stamp=r.stamp, finish_reason=r.finish_reason,
                    new_margins=tuple(r.margins[b:]), admitted_frame=r.admitted_frame,
                    reason=r.reason))

    def take_updates(self) -> tuple[RequestUpdate, ...]:
        updates, self.outbox = tuple(self.outbox), []
        return updates

    # -- action-rate target ---------------------------------------------------------------------
    def choose_k(self, frame: Frame, batch: int) -> int:
        """Oxygen's decode steps this frame: the configured k, or under an action-rate target the
        largest k in [k_min, k] that the stage costs measured so far (and the time credit carried
        from earlier frames) fit into 1/target. The decision travels in `frame.rate`."""
        cfg = frame.config
        k_max = cfg.decode_steps_per_frame
        frame.rate = self.rate.choose(cfg.target_action_hz, min(cfg.k_min, k_max), k_max, batch,
                                      strict=cfg.target_strict)
        return frame.rate.k

    def account(self, frame: Frame, frame_ms: float, timings_ms: dict[str, float]
                ) -> RateDecision:
        """Teach the controller this frame's stage costs; returns the decision to report (other
        modes choose no k: there, whether the frame as measured fitted 1/target)."""
        cfg = frame.config
        self.rate.observe(FrameCosts(frame_ms / 1e3, timings_ms["vision_prefill"] / 1e3,
                                     timings_ms["denoise"] / 1e3, timings_ms["decode"] / 1e3,
                                     frame.decode_steps, frame.batch_size), frame.rate)
        if frame.rate is not None:  # the mode chose k for the target (oxygen)
            return frame.rate
        budget_ms = 1e3 / cfg.target_action_hz if cfg.target_action_hz else None
        return RateDecision(cfg.decode_steps_per_frame, budget_ms is None or frame_ms <= budget_ms,
                            None, budget_ms)
