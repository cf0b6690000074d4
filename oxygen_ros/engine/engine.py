"""Engine.step(): one control frame, read top to bottom.

observation -> one prefill (vision + prompt) -> S-step denoise to an action chunk -> new language
requests attach to this frame's prefix -> schedule -> suffix prefill of admitted requests ->
k batched decode steps over every running request -> retire finished -> FrameOutput.
The four modes share this code and these weights; they differ only in scheduling.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .config import EngineConfig, ModelConfig
from .kv import KVManager, KVUsage
from .model import format_prompt, init_model
from .observation import Observation
from .request import Request, RequestKind, RequestStatus
from .runner import ModelRunner, SeqView
from .scheduler import Scheduler, request_blocks
from .tokenizer import Tokenizer, build_tiny_tokenizer

# kv: the KV manager's own calls (allocation, forks, frees, block tables, prefix hashing) and the
# copy-on-write block copies; sched: scheduling policy and request bookkeeping around them.
STAGES = ("vision_prefill", "denoise", "decode", "kv", "sched", "detokenize")


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
    finish_reason: str | None


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
    batch_size: int  # requests advanced by decode this frame
    tokens_this_frame: int
    num_waiting: int
    num_running: int
    kv: KVUsage
    decode_steps: int = 0  # batched decode steps run this frame
    admitted: int = 0  # requests admitted (suffix prefilled) this frame
    extra: dict[str, Any] = field(default_factory=dict)


class Engine:
    def __init__(self, model_config: ModelConfig, config: EngineConfig,
                 model: torch.nn.Module | None = None, tokenizer: Tokenizer | None = None) -> None:
        self.model_config = model_config
        self.config = config
        self.model = model if model is not None else init_model(
            model_config, seed=config.seed, device=config.device, dtype=config.dtype)
        self.model.eval()
        if hasattr(self.model, "fuse_projections"):
            self.model.fuse_projections(config.linear_layout)
        self.tokenizer = tokenizer or build_tiny_tokenizer(min(model_config.vocab_size, 2048))
        if self.tokenizer.vocab_size > model_config.vocab_size:
            raise ValueError(f"tokenizer has {self.tokenizer.vocab_size} tokens, model vocab is "
                             f"{model_config.vocab_size}")
        num_blocks = config.num_blocks or self.auto_num_blocks(model_config, config)
        self.runner = ModelRunner(self.model, model_config, num_blocks, config.block_size,
                                  config.device, config.dtype, config.attention_backend,
                                  config.compile_denoise)
        self.kv = KVManager(num_blocks, config.block_size, self.runner.bytes_per_block)
        self.scheduler = Scheduler(self.kv, config.max_active_requests,
                                   reserved_blocks=self.frame_blocks(model_config, config))
        self.requests: dict[int, Request] = {}
        self._ids = itertools.count(1)  # KV sequence ids
        self._req_ids = itertools.count(1)  # request ids: the same in every mode
        self._pending: list[Request] = []  # asked, attaches to the next frame's observation
        self._prefix_len: dict[int, int] = {}  # request id -> its frame's prefix token count
        self._tables: dict[int, tuple[int, ...]] = {}  # running request id -> its block table
        # request id -> (images, prompt ids) of its source observation, kept while it is live so
        # a request parked under KV pressure can be re-prefilled from exactly what it saw
        self._source: dict[int, tuple[np.ndarray, list[int]]] = {}
        self._parked: list[Request] = []
        self._lock = threading.Lock()  # parallel mode: two threads touch the KV manager
        self.frame = 0
        self._worst_state = self._longest_state()
        self.validate_changes()  # the starting config must fit this model and pool too

    # -- sizing ---------------------------------------------------------------------------------
    @staticmethod
    def frame_blocks(mc: ModelConfig, ec: EngineConfig) -> int:
        """Blocks one frame's action path needs: the prefix plus the action scratch (+ CoW)."""
        return -(-(mc.max_prefix_tokens + mc.action_horizon) // ec.block_size) + 2

    @staticmethod
    def auto_num_blocks(mc: ModelConfig, ec: EngineConfig) -> int:
        per_request = -(-(mc.max_prefix_tokens + mc.max_prompt_tokens + ec.max_decode_steps)
                        // ec.block_size) + 2
        return (ec.max_active_requests + 2) * per_request + 2 * Engine.frame_blocks(mc, ec)

    def prefix_tokens(self, images: np.ndarray, prompt_ids: list[int]) -> int:
        """Tokens of an observation prefix: each valid camera's patches, then the prompt."""
        return images.shape[0] * self.model_config.vision.tokens_per_image + len(prompt_ids)

    # -- requests -------------------------------------------------------------------------------
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
              "compile_denoise", "linear_layout")

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
        """k, N, S, mode, memory and instruction changes take effect on the next frame;
        refused (ValueError, nothing applied) as validate_changes refuses them."""
        new = self.validate_changes(**changes)
        self.config = new
        self.scheduler.set_max_active(new.max_active_requests)

    def warmup(self, frames: int = 2) -> None:
        """Run a few frames on a synthetic observation (action path and one language request),
        then forget them: the first real frame then runs at steady-state speed (first calls
        allocate, pick kernels and, with compile_denoise, compile). Call before serving."""
        from .synthetic import SyntheticStream

        if self.frame or self.requests or self._pending:
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
            for rid in [r.id for r in self.scheduler.running + self.scheduler.waiting]:
                self.scheduler.abort(rid)
        finally:
            self.config = saved
        self.frame = 0
        self._req_ids = itertools.count(1)
        self.requests.clear()
        self._pending.clear()
        self._parked.clear()
        self._source.clear()
        self._prefix_len.clear()
        self._tables.clear()
        self.kv.pool.reset_peak()

    def has_unfinished(self) -> bool:
        return bool(self._pending or self._parked) or self.scheduler.num_unfinished > 0

    def abort(self, request_id: int) -> bool:
        """Drop a language request wherever it is (asked, parked, waiting, running) and free its
        KV; it produces no further updates. False when it is not live (unknown or finished).
        Call it between frames (from the thread that runs step)."""
        found = False
        for queue in (self._pending, self._parked):
            for req in [r for r in queue if r.id == request_id]:
                queue.remove(req)
                req.status = RequestStatus.ABORTED
                found = True
        with self._lock:
            found = self.scheduler.abort(request_id) is not None or found
        self._forget(request_id)
        self.requests.pop(request_id, None)
        return found

    # -- one frame ------------------------------------------------------------------------------
    def step(self, obs: Observation) -> FrameOutput:
        cfg = self.config
        obs.validate(self.model_config)
        start = time.perf_counter()
        frame = self.frame
        self.frame += 1
        timings = dict.fromkeys(STAGES, 0.0)
        # Bookkeeping is timed as "sched"; the KV manager's own share of it (its busy_s) is
        # moved to "kv" when the frame ends.
        kv_busy = self.kv.busy_s
        self._counts = {"decode_steps": 0, "admitted": 0}
        prompt_ids = self._action_prompt(obs)
        noise = self._noise(frame)
        born = self._births(frame, obs)
        images = obs.valid_images()  # a copy when a camera is masked: take it once per frame
        if cfg.mode == "parallel":
            actions, updates, batch = self._parallel_frame(frame, images, prompt_ids, noise, born,
                                                           timings)
        else:
            prefix_seq, plen = self._prefill(images, prompt_ids, timings)
            actions = self._denoise(prefix_seq, plen, noise, timings)
            if cfg.mode == "isolated":
                self._free(prefix_seq, timings)
                updates, batch = self._isolated_language(frame, images, prompt_ids, born, timings)
            else:
                for req in born:
                    self._source[req.id] = (images, prompt_ids)
                    self._attach(req, prefix_seq, plen, timings)
                self._free(prefix_seq, timings)
                k = cfg.max_decode_steps if cfg.mode == "shared" else cfg.decode_steps_per_frame
                updates, batch = self._advance(frame, k, timings)
        self._relieve_pressure(timings)
        kv_busy = self.kv.busy_s - kv_busy
        timings["kv"] += kv_busy
        timings["sched"] -= kv_busy
        frame_ms = (time.perf_counter() - start) * 1e3
        return FrameOutput(
            frame=frame, stamp=obs.stamp, mode=cfg.mode, k=cfg.decode_steps_per_frame,
            n=cfg.max_decode_steps, s=cfg.denoise_steps, actions=actions.cpu().numpy(),
            updates=tuple(updates), timings_ms={k_: v * 1e3 for k_, v in timings.items()},
            frame_ms=frame_ms, batch_size=batch,
            tokens_this_frame=sum(len(u.new_tokens) for u in updates),
            num_waiting=len(self.scheduler.waiting) + len(self._parked),
            num_running=len(self.scheduler.running),
            kv=self.kv.usage(), decode_steps=self._counts["decode_steps"],
            admitted=self._counts["admitted"],
        )

    # -- stages ---------------------------------------------------------------------------------
    def _action_prompt(self, obs: Observation) -> list[int]:
        instruction = self.config.instruction if obs.instruction is None else obs.instruction
        ids = self._prompt_ids(instruction, np.asarray(obs.state, dtype=np.float32))
        if len(ids) > self.model_config.max_prompt_tokens:
            raise ValueError(f"instruction + state prompt is {len(ids)} tokens; the model takes at "
                             f"most {self.model_config.max_prompt_tokens} (max_prompt_tokens)")
        return ids

    def _prompt_ids(self, instruction: str, state: np.ndarray) -> list[int]:
        text = format_prompt(instruction, state, bins=self.model_config.state_bins)
        return self.tokenizer.encode(text, add_bos=True)

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

    def _noise(self, frame: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.config.seed * 1_000_003 + frame)
        mc = self.model_config
        return torch.randn(mc.action_horizon, mc.action_dim, generator=gen)

    def _births(self, frame: int, obs: Observation) -> list[Request]:
        cfg = self.config
        born, self._pending = self._pending, []
        if cfg.memory_every_n_frames and frame % cfg.memory_every_n_frames == 0:
            born.insert(0, Request(
                id=next(self._req_ids), kind=RequestKind.MEMORY, prompt=cfg.memory_prompt,
                prompt_ids=self._encode_suffix(cfg.memory_prompt), priority=0,
                max_new_tokens=cfg.max_decode_steps))
        for req in born:
            req.birth_frame, req.stamp = frame, obs.stamp
            self.requests[req.id] = req
        return born

    def _prefill(self, images: np.ndarray, prompt_ids: list[int], timings: dict[str, float]
                 ) -> tuple[int, int]:
        t0 = time.perf_counter()
        n_tokens = self.prefix_tokens(images, prompt_ids)
        keys = self._observation_keys(images, prompt_ids, n_tokens)
        t1 = time.perf_counter()
        seq = next(self._ids)
        with self._lock:
            self.kv.create(seq)
            blocks = self.kv.append(seq, keys, cacheable=False)
        if blocks is None:  # the scheduler keeps frame_blocks free, so this is a sizing bug
            raise RuntimeError("KV pool cannot hold this frame's prefix: raise num_blocks")
        t2 = time.perf_counter()
        self.runner.prefill_observation(images, prompt_ids, SeqView(blocks.block_ids, n_tokens))
        timings["kv"] += t1 - t0  # prefix-cache keys
        timings["sched"] += t2 - t1
        timings["vision_prefill"] += time.perf_counter() - t2
        return seq, n_tokens

    @staticmethod
    def _observation_keys(images: np.ndarray, prompt_ids: list[int], n: int) -> list[int]:
        """Per-token keys for the prefix cache: the prefix is bidirectional, so every token's key
        depends on the whole observation (images and prompt)."""
        h = hashlib.blake2b(images.tobytes(), digest_size=8)
        h.update(np.asarray(prompt_ids, dtype=np.int64).tobytes())
        root = int.from_bytes(h.digest(), "little") & ((1 << 62) - 1)
        return [root ^ (i << 1) for i in range(n)]

    def _denoise(self, prefix_seq: int, plen: int, noise: torch.Tensor,
                 timings: dict[str, float]) -> torch.Tensor:
        t0 = time.perf_counter()
        seq = next(self._ids)
        horizon = self.model_config.action_horizon
        with self._lock:
            self.kv.create(seq, parent=prefix_seq)
            blocks = self.kv.append(seq, [], reserve=horizon, cacheable=False)
        if blocks is None:
            raise RuntimeError("KV pool cannot hold this frame's action scratch: raise num_blocks")
        t1 = time.perf_counter()
        self.runner.copy_blocks(blocks.copies)
        t2 = time.perf_counter()
        actions = self.runner.denoise(SeqView(blocks.block_ids, plen), plen, noise,
                                      self.config.denoise_steps)
        t3 = time.perf_counter()
        self._free(seq, timings)
        timings["sched"] += t1 - t0
        timings["kv"] += t2 - t1
        timings["denoise"] += t3 - t2
        return actions

    def _attach(self, req: Request, prefix_seq: int, plen: int, timings: dict[str, float]) -> None:
        t0 = time.perf_counter()
        req.prefix_seq_id, req.seq_id = prefix_seq, next(self._ids)
        self._prefix_len[req.id] = plen
        with self._lock:
            self.scheduler.add(req)
        timings["sched"] += time.perf_counter() - t0

    def _free(self, seq: int, timings: dict[str, float]) -> None:
        t0 = time.perf_counter()
        with self._lock:
            self.kv.free(seq)
        timings["sched"] += time.perf_counter() - t0

    def _advance(self, frame: int, k: int, timings: dict[str, float]) -> tuple[list[RequestUpdate], int]:
        """Admit what fits, then advance every running request by up to k tokens, batched; the
        admitted requests' prompt suffixes ride in the first decode step's forward pass."""
        self._unpark(timings)
        t0 = time.perf_counter()
        with self._lock:
            out = self.scheduler.schedule(frame, k)
        t1 = time.perf_counter()
        for blocks in out.admitted_blocks:
            self.runner.copy_blocks(blocks.copies)
        t2 = time.perf_counter()
        cached: dict[int, int] = {}
        for r, b in zip(out.admitted, out.admitted_blocks):
            cached[r.id] = b.num_cached_tokens
            # Every decode slot was reserved at admission, so the table is final: no per-frame
            # lookups for running requests.
            self._tables[r.id] = b.block_ids
        decode = out.decode
        seqs, inputs, steps, read_only = [], [], [], []
        tables, prefix_len = self._tables, self._prefix_len
        for r in decode:
            n_prompt = len(r.prompt_ids)
            if r.id in cached:  # newly admitted: its suffix (less any prefix-cache hit) first
                skip = min(cached[r.id], n_prompt - 1)
                seqs.append(SeqView(tables[r.id], prefix_len[r.id] + skip))
                inputs.append(r.prompt_ids[skip:])
                read_only.append(cached[r.id] >= n_prompt)
                steps.append(min(k, r.max_new_tokens))
            else:
                n_out = len(r.output_ids)
                seqs.append(SeqView(tables[r.id], prefix_len[r.id] + n_prompt + n_out - 1))
                inputs.append(r.output_ids[-1:])
                read_only.append(False)
                steps.append(min(k, r.max_new_tokens - n_out))
        t3 = time.perf_counter()
        tokens: dict[int, list[int]] = {}
        margins: dict[int, list[float]] = {}
        if decode:
            toks, mars = self.runner.generate(seqs, inputs, steps, read_only)
            tokens = {r.id: t for r, t in zip(decode, toks)}
            margins = {r.id: m for r, m in zip(decode, mars)}
        t4 = time.perf_counter()
        self._counts["decode_steps"] += max(steps, default=0)
        self._counts["admitted"] += len(out.admitted)
        with self._lock:
            before = {r.id: len(r.output_ids) for r in decode}
            finished = self.scheduler.update(frame, tokens, margins, self.model_config.eos_token_id)
        for r in finished:
            self._forget(r.id)
        t5 = time.perf_counter()
        updates = [self._update(r, r.output_ids[before[r.id]:]) for r in decode]
        t6 = time.perf_counter()
        timings["sched"] += (t1 - t0) + (t3 - t2) + (t5 - t4)
        timings["kv"] += t2 - t1  # copy-on-write of the admitted requests' partial blocks
        timings["decode"] += t4 - t3
        timings["detokenize"] += t6 - t5
        return updates, len(decode)

    def _forget(self, req_id: int) -> None:
        self._source.pop(req_id, None)
        self._prefix_len.pop(req_id, None)
        self._tables.pop(req_id, None)

    def _relieve_pressure(self, timings: dict[str, float]) -> None:
        """Keep room for the next frame's action path. Waiting requests hold their source
        frame's prefix; when the pool runs short, the lowest-priority, newest ones are parked:
        their blocks are freed, their observation is kept, and they are re-prefilled from it
        when room returns (recomputation, like vLLM's preemption), so nothing is lost and the
        tokens they produce are unchanged."""
        t0 = time.perf_counter()
        need = self.scheduler.reserved_blocks
        with self._lock:
            for req in reversed(self.scheduler.waiting):
                if self.kv.can_fit(need):
                    break
                self.scheduler.abort(req.id)
                self._parked.append(req)
        self._parked.sort(key=lambda r: (-r.priority, r.id))
        timings["sched"] += time.perf_counter() - t0

    def _unpark(self, timings: dict[str, float]) -> None:
        bs = self.config.block_size
        while self._parked and len(self.scheduler.running) < self.scheduler.max_active:
            req = self._parked[0]
            images, prompt_ids = self._source[req.id]
            plen = self.prefix_tokens(images, prompt_ids)
            need = -(-plen // bs) + -(-(len(req.prompt_ids) + req.max_new_tokens) // bs) + 1
            t0 = time.perf_counter()
            fits = self.kv.can_fit(need + self.scheduler.reserved_blocks)
            timings["sched"] += time.perf_counter() - t0
            if not fits:
                return
            self._parked.pop(0)
            prefix_seq, plen = self._prefill(images, prompt_ids, timings)
            req.status = RequestStatus.WAITING
            self._attach(req, prefix_seq, plen, timings)
            self._free(prefix_seq, timings)

    def _update(self, r: Request, new_tokens: list[int]) -> RequestUpdate:
        ids = r.output_ids
        if r.finish_reason == "eos" and ids and ids[-1] == self.model_config.eos_token_id:
            ids = ids[:-1]
        return RequestUpdate(
            id=r.id, kind=r.kind.value, prompt=r.prompt, new_tokens=tuple(new_tokens),
            text=self.tokenizer.decode(ids), num_tokens=len(r.output_ids), is_final=r.is_finished,
            frames_spanned=len(r.frames_spanned), birth_frame=r.birth_frame, stamp=r.stamp,
            finish_reason=r.finish_reason)

    def _isolated_language(self, frame: int, images: np.ndarray, prompt_ids: list[int],
                           born: list[Request], timings: dict[str, float]
                           ) -> tuple[list[RequestUpdate], int]:
        """The baseline: every language request prefills the observation again on its own and
        decodes all N tokens at batch 1 before the next frame."""
        updates: list[RequestUpdate] = []
        for req in born:
            self._source[req.id] = (images, prompt_ids)
            prefix_seq, plen = self._prefill(images, prompt_ids, timings)
            self._attach(req, prefix_seq, plen, timings)
            self._free(prefix_seq, timings)
            saved = self.scheduler.max_active
            self.scheduler.set_max_active(1)
            try:
                ups, _ = self._advance(frame, req.max_new_tokens, timings)
            finally:
                self.scheduler.set_max_active(saved)
            updates.extend(ups)
        return updates, 1 if born else 0

    def _parallel_frame(self, frame: int, images: np.ndarray, prompt_ids: list[int],
                        noise: torch.Tensor, born: list[Request], timings: dict[str, float]
                        ) -> tuple[torch.Tensor, list[RequestUpdate], int]:
        """Isolated execution with the two paths in two threads at once (contending)."""
        lang_timings = dict.fromkeys(STAGES, 0.0)
        result: dict[str, Any] = {}

        def language() -> None:
            try:
                result["lang"] = self._isolated_language(frame, images, prompt_ids, born,
                                                         lang_timings)
            except BaseException as exc:  # re-raised in the caller's thread
                result["error"] = exc

        worker = threading.Thread(target=language, name="oxygen-language")
        worker.start()
        prefix_seq, plen = self._prefill(images, prompt_ids, timings)
        actions = self._denoise(prefix_seq, plen, noise, timings)
        self._free(prefix_seq, timings)
        worker.join()
        if "error" in result:
            raise result["error"]
        for key, value in lang_timings.items():
            timings[key] += value
        updates, batch = result["lang"]
        return actions, updates, batch
