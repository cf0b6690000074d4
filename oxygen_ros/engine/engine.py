"""Engine.step(): one control frame, read top to bottom.

observation -> secure the action path's KV (relieve pressure, allocate) -> the mode arranges
prefill, S-step denoise and the language work (new requests, admission, k batched decode steps)
-> FrameOutput. The four modes (engine/modes.py) share these primitives and these weights; they
differ only in scheduling. Requests live in the Scheduler from birth to their final update; the
Engine keeps none after reporting it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import torch

from .config import EngineConfig, ModelConfig
from .kv import KVManager, KVUsage
from .device import check_device
from .model import format_prompt, init_model
from .model.qwen3vl import pad_state
from .modes import MODES
from .observation import Observation
from .rate_control import FrameCosts, RateController, RateDecision
from .request import Request, RequestKind, RequestStatus, Source
from .rtc import ActionPrior, Guide, build_guide, unsupported_reason
from .runner import ModelRunner, SeqView
from .scheduler import Admission, Scheduler, blocks_for, request_blocks
from .timer import STAGES, StageTimer, TimedKV
from .tokenizer import Tokenizer, build_tiny_tokenizer

__all__ = ["STAGES", "Engine", "FrameOutput", "RequestUpdate"]


def _tensor_bytes(t: torch.Tensor) -> np.ndarray:
    """The bytes of a tensor, as numpy (any dtype, any device)."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy()


@dataclass(frozen=True)
class RequestUpdate:
    """A language request's progress in one frame (streamed to ~/memory and ~/answer)."""

    id: int
    kind: str
    prompt: str
    new_tokens: tuple[int, ...]
    text: str
    num_tokens: int
    is_final: bool
    frames_spanned: int
    birth_frame: int
    stamp: float
    finish_reason: str | None  # "length" | "eos" | "refused" (then `reason` says why)
    new_margins: tuple[float, ...] = ()  # top1 - top2 logit of each new token (near ties)
    admitted_frame: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class FrameOutput:
    frame: int
    stamp: float
    mode: str
    k: int
    n: int
    s: int
    actions: np.ndarray  # [horizon, action_dim], model space (normalised, padded)
    updates: tuple[RequestUpdate, ...]
    timings_ms: dict[str, float]
    frame_ms: float
    batch_size: int  # requests advanced by decode this frame (largest batch)
    tokens_this_frame: int
    num_waiting: int
    num_running: int
    kv: KVUsage
    decode_steps: int = 0  # batched decode steps run this frame
    admitted: int = 0  # requests admitted (suffix prefilled) this frame
    # action-rate target (EngineConfig.target_action_hz, 0 = off), the decode steps per frame
    # the engine used (oxygen: chosen for the target; else the configured k), and whether the
    # frame fits 1/target (oxygen: predicted at k_min; other modes: this frame as measured)
    target_action_hz: float = 0.0
    k_chosen: int = 0
    target_feasible: bool = True


@dataclass
class Frame:
    """One control frame's inputs and counters, handed to the mode."""

    index: int
    stamp: float
    source: Source
    noise: torch.Tensor
    guide: Guide | None = None  # real-time chunking toward the previous chunk (engine/rtc.py)
    state: np.ndarray | None = None  # normalised joints (an action expert with state tokens)
    batch_size: int = 0
    decode_steps: int = 0
    admitted: int = 0


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


class Engine:
    def __init__(self, model_config: ModelConfig, config: EngineConfig,
                 model: torch.nn.Module | None = None, tokenizer: Tokenizer | None = None) -> None:
        check_device(config.device)  # one clear line, not a torch traceback at the first tensor
        self.model_config = model_config
        self.config = config
        self.model = model if model is not None else init_model(
            model_config, seed=config.seed, device=config.device, dtype=config.dtype)
        self.model.eval()
        if hasattr(self.model, "fuse_projections"):
            self.model.fuse_projections(config.linear_layout)
        if tokenizer is None and model is not None:
            # a loaded model with the tiny random-preset tokenizer would run and emit nonsense
            raise ValueError("a model was given without its tokenizer: pass the checkpoint's "
                             "tokenizer (the built-in tiny BPE is only for random presets)")
        self.tokenizer = tokenizer or build_tiny_tokenizer(min(model_config.vocab_size, 2048))
        if self.tokenizer.vocab_size > model_config.vocab_size:
            raise ValueError(f"tokenizer has {self.tokenizer.vocab_size} tokens, model vocab is "
                             f"{model_config.vocab_size}")
        num_blocks = config.num_blocks or self.auto_num_blocks(model_config, config)
        self.runner = ModelRunner(self.model, model_config, num_blocks, config.block_size,
                                  config.device, config.dtype, config.attention_backend,
                                  config.compile_denoise, config.cuda_graphs)
        self.timer = StageTimer(STAGES)
        # The engine and the scheduler reach the manager through one TimedKV (stage kv): the
        # seam where a measuring proxy can be put in front of it (bench/kv_recorder.py).
        self.kv = TimedKV(KVManager(num_blocks, config.block_size, self.runner.bytes_per_block),
                          self.timer)
        self.scheduler = Scheduler(self.kv, config.max_active_requests,
                                   reserved_blocks=self.frame_blocks(model_config, config),
                                   max_waiting=config.max_waiting_requests)
        self._seq_ids = itertools.count(1)  # KV sequence ids
        self._req_ids = itertools.count(1)  # request ids: the same in every mode
        self._pending: list[Request] = []  # asked, attaches to the next good frame
        self._outbox: list[RequestUpdate] = []  # updates not yet returned in a FrameOutput
        self._memory_prompt: tuple[str, list[int]] = ("", [])
        self._lock = threading.Lock()  # parallel mode: two threads touch the KV manager
        self.rate = RateController()  # stage-cost estimates for target_action_hz
        self._rate: RateDecision | None = None  # this frame's choice of k (oxygen)
        self.frame = 0
        self._worst_state = self._longest_state()
        self.validate_changes()  # the starting config must fit this model and pool too

    # -- sizing ---------------------------------------------------------------------------------
    @staticmethod
    def frame_blocks(mc: ModelConfig, ec: EngineConfig) -> int:
        """Blocks one frame's action path needs: the prefix plus the action scratch (+ CoW)."""
        return blocks_for(mc.max_prefix_tokens + mc.action_tokens, ec.block_size) + 2

    @staticmethod
    def auto_num_blocks(mc: ModelConfig, ec: EngineConfig) -> int:
        per_request = request_blocks(mc.max_prefix_tokens, mc.max_prompt_tokens,
                                     ec.max_decode_steps, ec.block_size, with_prefix=True)
        return (ec.max_active_requests + 2) * per_request + 2 * Engine.frame_blocks(mc, ec)

    def prefix_tokens(self, images: Any, prompt_ids: list[int]) -> int:
        """Tokens of an observation prefix: each valid camera's tokens, then the prompt
        (`images`: one entry per valid camera: a list, an array or the prepared tensor)."""
        return self.model_config.prefix_tokens(len(images), len(prompt_ids))

    # -- requests and live settings -------------------------------------------------------------
    def ask(self, prompt: str, priority: int = 1, kind: RequestKind = RequestKind.QUESTION,
            max_new_tokens: int | None = None) -> int:
        """Queue a language request on the next observation; returns its id. ValueError (with
        the reason) when the prompt or max_new_tokens cannot be served."""
        self.check_question(prompt)
        n = self.config.max_decode_steps if max_new_tokens is None else max_new_tokens
        if not 1 <= n <= 4096:
            raise ValueError(f"max_new_tokens must be in [1, 4096], got {n}")
        self._check_request_fits(n, self.config)
        req = Request(id=next(self._req_ids), kind=kind, prompt=prompt,
                      prompt_ids=self._encode_suffix(prompt), priority=priority, max_new_tokens=n)
        self._pending.append(req)
        return req.id

    def check_question(self, text: str) -> None:
        """ValueError with the reason when `text` cannot be a language request's prompt (empty,
        or longer than max_prompt_tokens); the cheap length bound comes before tokenising."""
        self._encode_suffix(text)

    def _encode_suffix(self, prompt: str) -> list[int]:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("a language request needs a non-empty prompt")
        limit = self.model_config.max_prompt_tokens
        # Every tokenizer here emits at most one token per character plus a few merges' worth
        # of specials: a prompt far longer in characters cannot fit, refuse it before encoding.
        if len(prompt) > 64 * limit:
            raise ValueError(f"prompt is {len(prompt)} characters; it must be at most "
                             f"{limit} tokens (max_prompt_tokens)")
        ids = self.tokenizer.encode(prompt, add_bos=False)
        if not ids or len(ids) > limit:
            raise ValueError(f"prompt is {len(ids)} tokens; it must be 1..{limit} (max_prompt_tokens)")
        return ids

    _FIXED = ("block_size", "num_blocks", "device", "dtype", "seed", "attention_backend",
              "compile_denoise", "linear_layout", "cuda_graphs")

    def validate_changes(self, **changes: Any) -> EngineConfig:
        """The EngineConfig that `update_config(**changes)` would apply, checked against this
        engine and NOT applied (pure). ValueError with the reason when a change is not allowed
        while running, a value is out of range, the instruction (with the longest possible
        state text) or the memory prompt does not fit max_prompt_tokens, or a request of N new
        tokens could never fit the KV pool."""
        known = {f.name for f in dataclasses.fields(EngineConfig)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ValueError(f"unknown engine settings {unknown}")
        new = self.config.replace(**changes)  # EngineConfig.__post_init__ checks the ranges
        for name in self._FIXED:
            if getattr(new, name) != getattr(self.config, name):
                raise ValueError(f"{name} cannot change while the engine runs")
        if not isinstance(new.instruction, str) or not new.instruction.strip():
            raise ValueError("instruction must be a non-empty string")
        worst = len(self._prompt_ids(new.instruction, self._worst_state))
        if worst > self.model_config.max_prompt_tokens:
            raise ValueError(
                f"instruction + state prompt can reach {worst} tokens (with "
                f"{self._worst_state.size} joints); the model takes at most "
                f"{self.model_config.max_prompt_tokens} (max_prompt_tokens)")
        try:
            self._encode_suffix(new.memory_prompt)
        except ValueError as exc:
            raise ValueError(f"memory_prompt: {exc}") from None
        self._check_request_fits(new.max_decode_steps, new)
        return new

    def _check_request_fits(self, max_new_tokens: int, cfg: EngineConfig) -> None:
        """A request that could never fit the pool beside one frame's action path would wait
        forever: refuse it where it enters."""
        mc = self.model_config
        need = request_blocks(mc.max_prefix_tokens, mc.max_prompt_tokens, max_new_tokens,
                              cfg.block_size, with_prefix=True) + self.scheduler.reserved_blocks
        if need > self.kv.pool.num_blocks:
            raise ValueError(
                f"a request of {max_new_tokens} new tokens needs up to {need} KV blocks with the "
                f"next frame's action path; the pool has {self.kv.pool.num_blocks} (num_blocks)")

    def update_config(self, **changes: Any) -> None:
        """k, N, S, mode, max_active, memory and instruction changes take effect on the next
        frame, requests in flight included; refused (ValueError, nothing applied) as
        validate_changes refuses them."""
        new = self.validate_changes(**changes)
        self.config = new
        self.scheduler.set_max_active(new.max_active_requests)
        self.scheduler.set_max_waiting(new.max_waiting_requests)

    def warmup(self, frames: int = 2) -> None:
        """Run a few frames on a synthetic observation (action path and one language request),
        then forget them: the first real frame then runs at steady-state speed (first calls
        allocate, pick kernels and, with compile_denoise, compile). Call before serving."""
        from .synthetic import SyntheticStream

        if self.frame or self.has_unfinished() or self._outbox:
            raise RuntimeError("warmup() must run before the engine serves any frame")
        saved = self.config
        self.config = saved.replace(memory_every_n_frames=1)
        stream = SyntheticStream(self.model_config, seed=self.config.seed)
        try:
            for i in range(frames):
                self.step(stream.frame(i))
            self.config = saved.replace(memory_every_n_frames=0)
            i = frames
            while self.has_unfinished() and i < frames + 4 * self.config.max_decode_steps:
                self.step(stream.frame(i))
                i += 1
            for r in self.scheduler.running + self.scheduler.waiting:
                self.scheduler.abort(r.id)
        finally:
            self.config = saved
        self.frame = 0
        self._req_ids = itertools.count(1)
        self._pending.clear()
        self._outbox.clear()
        self.kv.pool.reset_peak()

    def has_unfinished(self) -> bool:
        return bool(self._pending) or self.scheduler.num_unfinished > 0

    @property
    def num_live_requests(self) -> int:
        """Requests the engine holds: asked and not yet reported final (bounded)."""
        return len(self._pending) + self.scheduler.num_unfinished

    def abort(self, request_id: int) -> bool:
        """Drop a language request wherever it is (asked, waiting, preempted, running) and free
        its KV; it produces no further updates. False when it is not live (unknown or already
        final). Call it between frames (from the thread that runs step)."""
        found = False
        for req in [r for r in self._pending if r.id == request_id]:
            self._pending.remove(req)
            req.status = RequestStatus.ABORTED
            found = True
        with self._lock:
            found = self.scheduler.abort(request_id) is not None or found
        return found

    # -- one frame ------------------------------------------------------------------------------
    def step(self, obs: Observation) -> FrameOutput:
        cfg, mc = self.config, self.model_config
        obs.validate(mc)
        prompt_ids = self._action_prompt(obs)  # refuses a bad prompt before anything changes
        guide = self._guide(obs.prior)  # and a bad action prior
        start = time.perf_counter()
        self.timer.reset()
        self._rate = None  # a frame that raised left its choice of k behind
        frame = Frame(self.frame, obs.stamp, self._source(obs, prompt_ids), self._noise(self.frame),
                      guide, state=np.asarray(obs.state, dtype=np.float32))
        self.frame += 1
        mode = MODES[cfg.mode]
        action = self.secure_action_path(frame)
        try:
            actions = mode.run(self, frame, action)
        finally:
            self.release(action)
        updates, self._outbox = tuple(self._outbox), []
        frame_ms = (time.perf_counter() - start) * 1e3
        timings = self.timer.ms()
        rate = self._rate_account(frame, frame_ms, timings)
        return FrameOutput(
            frame=frame.index, stamp=obs.stamp, mode=cfg.mode, k=cfg.decode_steps_per_frame,
            n=cfg.max_decode_steps, s=cfg.denoise_steps, actions=actions.cpu().numpy(),
            updates=updates, timings_ms=timings, frame_ms=frame_ms, batch_size=frame.batch_size,
            tokens_this_frame=sum(len(u.new_tokens) for u in updates),
            num_waiting=len(self.scheduler.waiting), num_running=len(self.scheduler.running),
            kv=self.kv.usage(), decode_steps=frame.decode_steps, admitted=frame.admitted,
            target_action_hz=cfg.target_action_hz, k_chosen=rate.k, target_feasible=rate.feasible,
        )

    # -- action-rate target ---------------------------------------------------------------------
    def choose_k(self, batch: int) -> int:
        """Oxygen's decode steps this frame: the configured k, or under an action-rate target the
        largest k in [k_min, k] that the stage costs measured so far (and the time credit carried
        from earlier frames) fit into 1/target."""
        cfg = self.config
        k_max = cfg.decode_steps_per_frame
        self._rate = self.rate.choose(cfg.target_action_hz, min(cfg.k_min, k_max), k_max, batch,
                                      strict=cfg.target_strict)
        return self._rate.k

    def _rate_account(self, frame: Frame, frame_ms: float, timings_ms: dict[str, float]
                      ) -> RateDecision:
        """Teach the controller this frame's stage costs; returns the decision to report (other
        modes choose no k: there, whether the frame as measured fitted 1/target)."""
        cfg = self.config
        decision, self._rate = self._rate, None
        self.rate.observe(FrameCosts(frame_ms / 1e3, timings_ms["vision_prefill"] / 1e3,
                                     timings_ms["denoise"] / 1e3, timings_ms["decode"] / 1e3,
                                     frame.decode_steps, frame.batch_size), decision)
        if decision is not None:  # the mode chose k for the target (oxygen)
            return decision
        budget_ms = 1e3 / cfg.target_action_hz if cfg.target_action_hz else None
        return RateDecision(cfg.decode_steps_per_frame, budget_ms is None or frame_ms <= budget_ms,
                            None, budget_ms)

    # -- frame inputs ---------------------------------------------------------------------------
    def _action_prompt(self, obs: Observation) -> list[int]:
        instruction = self.config.instruction if obs.instruction is None else obs.instruction
        ids = self._prompt_ids(instruction, np.asarray(obs.state, dtype=np.float32))
        if len(ids) > self.model_config.max_prompt_tokens:
            raise ValueError(f"instruction + state prompt is {len(ids)} tokens; the model takes at "
                             f"most {self.model_config.max_prompt_tokens} (max_prompt_tokens)")
        return ids

    def _prompt_ids(self, instruction: str, state: np.ndarray) -> list[int]:
        mc = self.model_config
        text = format_prompt(instruction, state, bins=mc.state_bins)
        if mc.qwen is not None:  # the user turn's text, then the chat template's tail
            return self.tokenizer.encode(text, add_bos=False) + list(mc.qwen.tail_ids)
        return self.tokenizer.encode(text, add_bos=True)

    def _guide(self, prior: ActionPrior | None) -> Guide | None:
        """The frame's RTC guide from the observation's ActionPrior (ValueError when it does not
        fit the model), None without one."""
        if prior is None:
            return None
        if not isinstance(prior, ActionPrior):
            raise ValueError(f"observation prior must be an ActionPrior, got {type(prior).__name__}")
        mc, cfg = self.model_config, self.config
        reason = unsupported_reason(mc.family)
        if reason:
            raise ValueError(reason)
        prior.validate(mc.action_horizon, mc.action_dim)
        return build_guide(prior, mc.action_horizon, mc.action_dim, cfg.rtc_method,
                           cfg.rtc_jacobian, cfg.rtc_max_guidance, cfg.rtc_execution_horizon,
                           self.runner.device)

    def _longest_state(self) -> np.ndarray:
        """A state of action_dim joints (the most an observation may carry) all in the bin whose
        text tokenises longest (bins run -1..state_bins-1: a value below -1 is bin -1): the
        worst case an instruction must leave room for."""
        mc = self.model_config
        values = np.concatenate(([-1.5], -1.0 + (2.0 * np.arange(mc.state_bins) + 1.0)
                                 / mc.state_bins))
        lengths = [len(self.tokenizer.encode(" ".join([str(b)] * mc.action_dim)))
                   for b in range(-1, mc.state_bins)]
        return np.full(mc.action_dim, values[int(np.argmax(lengths))], dtype=np.float32)

    def _source(self, obs: Observation, prompt_ids: list[int]) -> Source:
        # The images are prepared once per frame, on the model's device, into a new tensor:
        # requests keep it while they may need a re-prefill, and a caller reusing its image
        # buffers cannot change what a waiting request saw.
        with self.timer.stage("vision_prefill"):
            pixels = self.runner.prepare_images(obs.valid_images(), self.config.image_resize)
        with self.timer.stage("kv"):  # the prefix cache's identity: the pixels the model sees
            h = hashlib.blake2b(_tensor_bytes(pixels), digest_size=8)
            h.update(np.asarray(prompt_ids, dtype=np.int64).tobytes())
            root = int.from_bytes(h.digest(), "little") & ((1 << 62) - 1)
        return Source(self.frame, pixels, tuple(prompt_ids), self.prefix_tokens(pixels, prompt_ids),
                      root)

    def _noise(self, frame: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.config.seed * 1_000_003 + frame)
        mc = self.model_config
        return torch.randn(mc.action_horizon, mc.action_dim, generator=gen)

    # -- primitives the modes arrange -----------------------------------------------------------
    def secure_action_path(self, frame: Frame) -> ActionPath:
        """Relieve KV pressure, then allocate this frame's prefix and action scratch: the action
        stream never waits for language, whatever is in flight."""
        source, horizon = frame.source, self.model_config.action_tokens
        prefix_seq, scratch_seq = next(self._seq_ids), next(self._seq_ids)
        with self.timer.stage("sched"), self._lock:
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
                          scratch.copies)

    def prefill(self, frame: Frame, action: ActionPath) -> None:
        source = frame.source
        with self.timer.stage("vision_prefill"):
            self.runner.prefill_observation(source.images, source.prompt_ids,
                                            SeqView(action.prefix_table, source.num_tokens))

    def denoise(self, frame: Frame, action: ActionPath) -> torch.Tensor:
        plen = frame.source.num_tokens
        with self.timer.stage("kv"):
            self.runner.copy_blocks(action.copies)  # the prefix's partial tail, now written
        mc = self.model_config
        offset = mc.rope_offset(len(frame.source.images))
        state = None if frame.state is None else pad_state(frame.state, mc.action_dim)
        with self.timer.stage("denoise"):
            return self.runner.denoise(SeqView(action.scratch_table, plen, offset), plen,
                                       frame.noise, self.config.denoise_steps, guide=frame.guide,
                                       state=state)

    def release(self, action: ActionPath) -> None:
        if action.released:
            return
        action.released = True
        with self.timer.stage("sched"), self._lock:
            self.kv.free(action.scratch_seq)
            self.kv.free(action.prefix_seq)

    def take_births(self, frame: Frame, prefix_seq: int | None) -> None:
        """Hand the questions asked since the last good frame, and this frame's memory request,
        to the scheduler: forking `prefix_seq`, or (None) to prefill the observation themselves.
        Until then they stay pending, so a frame that fails earlier loses none."""
        cfg = self.config
        with self.timer.stage("sched"):
            born, self._pending = self._pending, []
            if cfg.memory_every_n_frames and frame.index % cfg.memory_every_n_frames == 0:
                born.insert(0, Request(
                    id=next(self._req_ids), kind=RequestKind.MEMORY, prompt=cfg.memory_prompt,
                    prompt_ids=self._memory_ids(cfg.memory_prompt), priority=0,
                    max_new_tokens=cfg.max_decode_steps))
            refused: list[Request] = []
            with self._lock:
                for req in born:
                    req.birth_frame, req.stamp = frame.index, frame.stamp
                    req.seq_id, req.prefix_seq_id = next(self._seq_ids), prefix_seq
                    req.source, req.prefix_len = frame.source, frame.source.num_tokens
                    req.rope_offset = self.model_config.rope_offset(len(frame.source.images))
                    refused += self.scheduler.add(req)
        self._report(refused)

    def _memory_ids(self, prompt: str) -> list[int]:
        if self._memory_prompt[0] != prompt:  # the same prompt every frame: encode it once
            self._memory_prompt = (prompt, self._encode_suffix(prompt))
        return list(self._memory_prompt[1])

    def admit(self, frame: Frame, limit: int | None = None, reserve: int | None = None
              ) -> list[Admission]:
        """Admit what fits (priority, FIFO); prepare the admitted requests' KV: copy-on-write of
        a shared tail, and the observation prefix of a request that waited without one."""
        with self.timer.stage("sched"), self._lock:
            admissions = self.scheduler.admit(frame.index, limit, reserve)
        for a in admissions:
            if a.prefill is not None:
                with self.timer.stage("vision_prefill"):
                    self.runner.prefill_observation(
                        a.prefill.images, a.prefill.prompt_ids,
                        SeqView(a.request.block_table, a.prefill.num_tokens))
            with self.timer.stage("kv"):
                self.runner.copy_blocks(a.blocks.copies)
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
                    seqs.append(SeqView(r.block_table, r.prefix_len + skip, r.rope_offset))
                    inputs.append(r.prompt_ids[skip:])
                    read_only.append(r.num_cached_tokens >= n_prompt)
                else:
                    n_out = len(r.output_ids)
                    seqs.append(SeqView(r.block_table, r.prefix_len + n_prompt + n_out - 1,
                                        r.rope_offset))
                    inputs.append(r.output_ids[-1:])
                    read_only.append(False)
                steps.append(min(k, r.remaining))
        with self.timer.stage("decode"):
            toks, mars = self.runner.generate(seqs, inputs, steps, read_only)
        frame.decode_steps += max(steps)
        frame.batch_size = max(frame.batch_size, len(batch))
        with self.timer.stage("sched"), self._lock:
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
        with self.timer.stage("detokenize"):
            for i, r in enumerate(reqs):
                b = before[i] if before is not None else len(r.output_ids)
                ids = r.output_ids
                if r.finish_reason == "eos" and ids and ids[-1] == eos:
                    ids = ids[:-1]
                self._outbox.append(RequestUpdate(
                    id=r.id, kind=r.kind.value, prompt=r.prompt,
                    new_tokens=tuple(r.output_ids[b:]), text=self.tokenizer.decode(ids),
                    num_tokens=len(r.output_ids), is_final=r.is_finished,
                    frames_spanned=len(r.frames_spanned), birth_frame=r.birth_frame,
                    stamp=r.stamp, finish_reason=r.finish_reason,
                    new_margins=tuple(r.margins[b:]), admitted_frame=r.admitted_frame,
                    reason=r.reason))
