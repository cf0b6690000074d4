"""Engine.step(): one control frame, read top to bottom.

observation -> secure the action path's KV (relieve pressure, allocate) -> the mode arranges
prefill, S-step denoise and the language work (new requests, admission, k batched decode steps)
-> FrameOutput. The four modes (engine/core/modes.py) share the primitives of engine/core/frame_ops.py
(through the modes.FrameOps interface) and these weights; they differ only in scheduling.
What enters (questions, prompts, an observation's prompt and prior) is checked by
engine/core/intake.py, live settings by engine/core/live_config.py. Requests live in the Scheduler from
birth to their final update; the Engine keeps none after reporting it.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import numpy as np
import torch

from . import live_config
from ..config.engine_config import EngineConfig
from ..config.model_config import ModelConfig
from ..config import family_registry
from ..families.loader import init_model
from ..model.tokenizer import Tokenizer, build_tiny_tokenizer, uncovered_reason
from ..runner.device import check_device
from ..runner.model_runner import ModelRunner
from .frame_ops import FramePrimitives
from .intake import Intake
from .kv import KVManager, KVUsage
from .modes import MODES
from .observation import Observation
from .request import RequestKind, RequestUpdate
from .scheduler import Scheduler, blocks_for, request_blocks
from .timer import STAGES, StageTimer, TimedKV
from .synthetic import SyntheticStream

__all__ = ["STAGES", "ActionsReady", "Engine", "FrameOutput", "RequestUpdate"]

DRAIN_FRAMES = 10_000  # drain()'s default bound on the frames it steps
# warmup()'s frames after the first run only while the warmup has taken less than this: a model
# whose frames take seconds (the full pi0.5 on a CPU, ~15 s a frame) warms up with one frame
# instead of a minute of them; a fast one (a GPU, the tiny preset) runs every warmup frame
WARMUP_BUDGET_S = 10.0
_clock = time.perf_counter  # warmup's clock (a test advances its own)
# warmup() on a CPU without CUDA graphs: a full frame estimated past the budget (estimate_frame_s)
# warms up with one reduced frame instead: the first camera only, this many denoise steps and
# no language request (the full pi0.5 at one bf16 thread: a full frame 54 s, configure 85 s)
REDUCED_WARMUP_DENOISE_STEPS = 1
# step()'s early hand-off: (the configured head's chunk, every head's chunk by name), model space
ActionsReady = Callable[[np.ndarray, dict[str, np.ndarray]], None]


@dataclass(frozen=True)
class FrameOutput:
    frame: int
    stamp: float
    mode: str
    k: int
    n: int
    s: int
    # [horizon, action_dim], model space (normalised, padded): the chunk of the configured
    # action head (EngineConfig.action_head; empty: the model's first)
    actions: np.ndarray
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
    # every action head's chunk by head name (config.head_names, in order; `actions` is one of
    # them); a head's horizon is its own (StarVLA: pi_v3 16, gr00t 8, oft 9 steps)
    chunks: dict[str, np.ndarray] = field(default_factory=dict)
    # ms from the frame's start to its chunk existing (handed to step's on_actions then):
    # the frame's action latency; the language work after it is in frame_ms only
    actions_ms: float = 0.0


class Engine:
    """One control frame per `step(observation)`; language requests asked with `ask` are born on
    the next frame and reported in the frames' updates until their final one. The parts: Intake
    (what enters), the Scheduler (a request's life), FramePrimitives (what the modes arrange),
    the ModelRunner (the only torch owner)."""

    def __init__(self, model_config: ModelConfig, config: EngineConfig,
                 model: torch.nn.Module | None = None, tokenizer: Tokenizer | None = None) -> None:
        check_device(config.device)  # one clear line, not a torch traceback at the first tensor
        family = family_registry.family_of(model_config)
        reason = family.unsupported_reason(model_config)  # before building any weights
        if reason:
            raise ValueError(reason)
        self.model_config = model_config
        self.config = config
        self.model = model if model is not None else init_model(
            model_config, seed=config.seed, device=config.device, dtype=config.dtype)
        self.model.eval()
        family.prepare(self.model, config.linear_layout)  # fused projections ...
        if tokenizer is None and model is not None:
            # a loaded model with the tiny random-preset tokenizer would run and emit nonsense
            raise ValueError("a model was given without its tokenizer: pass the checkpoint's "
                             "tokenizer (the built-in tiny BPE is only for random presets)")
        self.tokenizer = tokenizer or build_tiny_tokenizer(min(model_config.vocab_size, 2048))
        if family.capabilities.bos and self.tokenizer.bos_id is None:
            raise ValueError(f"model {model_config.name!r} starts its prompts with a BOS token and "
                             f"this tokenizer has none (a Qwen tokenizer?): pass the tokenizer the "
                             f"checkpoint was trained with")
        uncovered = uncovered_reason(self.tokenizer, model_config.vocab_size)
        if uncovered:  # added tokens past the rows are fine: Intake refuses prompts holding one
            raise ValueError(f"tokenizer {uncovered} (model {model_config.name!r})")
        num_blocks = config.num_blocks or self.auto_num_blocks(model_config, config)
        slots, reserved_slots = self.state_slots(model_config, config)
        self.runner = ModelRunner(self.model, model_config, num_blocks, config.block_size,
                                  config.device, config.dtype, config.attention_backend,
                                  config.compile_denoise, config.cuda_graphs, slots)
        self.timer = StageTimer(STAGES)
        # The engine and the scheduler reach the manager through one TimedKV (stage kv): the
        # seam where a measuring proxy can be put in front of it (bench/kv_recorder.py). With
        # recurrent state the prefix cache is off (docs/qwen35.md, "What the prefix cache
        # caches"): a hit skips tokens the state must see.
        self.kv = TimedKV(KVManager(num_blocks, config.block_size, self.runner.bytes_per_block,
                                    enable_prefix_cache=not slots, state_slots=slots,
                                    bytes_per_slot=self.runner.bytes_per_slot), self.timer)
        reserved = self.frame_blocks(model_config, config)
        self.scheduler = Scheduler(self.kv, config.max_active_requests, reserved_blocks=reserved,
                                   max_waiting=config.max_waiting_requests,
                                   reserved_slots=reserved_slots)
        self.intake = Intake(model_config, self.tokenizer, num_blocks, reserved, self.runner.device)
        self._lock = threading.Lock()  # parallel mode: two threads touch the KV manager
        self.ops = FramePrimitives(model_config, self.runner, self.scheduler, self.timer,
                                   self.intake, self._lock)
        self.frame = 0
        self._last_obs: Observation | None = None  # what drain() steps with by default
        self.validate_changes()  # the starting config must fit this model and pool too

    # -- sizing ---------------------------------------------------------------------------------
    @staticmethod
    def frame_blocks(mc: ModelConfig, ec: EngineConfig) -> int:
        """Blocks one frame's action path needs: the prefix plus the action scratch (+ CoW)."""
        return blocks_for(mc.max_prefix_tokens + mc.action_tokens, ec.block_size) + 2

    @staticmethod
    def state_slots(mc: ModelConfig, ec: EngineConfig) -> tuple[int, int]:
        """(state slots in the pool, slots kept free for a frame's action path) when the
        family's cache spec has a recurrent state, else (0, 0). A frame's prefix takes one (its
        snapshot; an action stage writing scratch tokens a second, its own copy); each running
        request one; two more hold the snapshots of frames whose requests still wait (more
        wait without one: relief preempts them, and they prefill again when admitted)."""
        if family_registry.family_of(mc).cache_spec(mc).recurrent is None:
            return 0, 0
        frame = 1 + (mc.action_tokens > 0)
        return ec.max_active_requests + frame + 2, frame

    @staticmethod
    def prefix_frames(ec: EngineConfig) -> int:
        """Frames whose observation prefix running requests may hold at once: a request is
        admitted on its birth frame or the next (when the pool has room) and decodes at least
        k tokens a frame (k_min under an action-rate target), so it is done within
        ceil(N / k) frames of admission; never more than the requests themselves."""
        k = ec.k_min if ec.target_action_hz else ec.decode_steps_per_frame
        return min(ec.max_active_requests + 2, -(-ec.max_decode_steps // k) + 1)

    @staticmethod
    def auto_num_blocks(mc: ModelConfig, ec: EngineConfig) -> int:
        """The pool when num_blocks is 0: what the configured serving needs with prefix sharing.
        Requests born on one frame fork that frame's prefix (one copy however many), so the
        pool holds prefix_frames prefixes, the own blocks (prompt suffix, N decode slots, one
        copy-on-write block) of max_active_requests + 2 requests and two frames' action paths. A request that
        lost its fork under pressure (preempted) needs its own prefix copy when admitted again:
        past this size such requests wait in the queue (the Scheduler admits what fits; the
        action path's blocks stay reserved); one always fits (Intake refuses a request that
        cannot). Sizing every request with its own prefix (the worst case) took 3x the blocks
        at pi0.5's shape: 0.75 GiB in bfloat16 for 32 requests."""
        prefix = blocks_for(mc.max_prefix_tokens, ec.block_size)
        own = request_blocks(mc.max_prefix_tokens, mc.max_prompt_tokens, ec.max_decode_steps,
                             ec.block_size, with_prefix=False)
        return (Engine.prefix_frames(ec) * prefix + (ec.max_active_requests + 2) * own
                + 2 * Engine.frame_blocks(mc, ec))

    def prefix_tokens(self, images: Any, prompt_ids: list[int]) -> int:
        """Tokens of an observation prefix: each valid camera's tokens, then the prompt
        (`images`: one entry per valid camera: a list, an array or the prepared tensor)."""
        return self.model_config.prefix_tokens(len(images), len(prompt_ids))

    # -- requests and live settings (engine/core/intake.py, engine/core/live_config.py) -------------------
    def ask(self, prompt: str, priority: int = 1, kind: RequestKind = RequestKind.QUESTION,
            max_new_tokens: int | None = None, prompt_ids: list[int] | None = None) -> int:
        """Queue a language request on the next observation; returns its id. ValueError (with
        the reason) when the prompt or max_new_tokens cannot be served. `prompt_ids`: what
        check_question returned for `prompt` (the text is then not tokenised again)."""
        return self.intake.ask(prompt, priority, kind, max_new_tokens, self.config, prompt_ids)

    def check_question(self, text: str) -> list[int]:
        """The token ids `ask` takes for `text`; ValueError with the reason when it cannot be a
        language request's prompt (empty, or longer than max_prompt_tokens); the cheap length
        bound comes before tokenising."""
        return self.intake.check_question(text)

    def validate_changes(self, **changes: Any) -> EngineConfig:
        """The EngineConfig that `update_config(**changes)` would apply, checked against this
        engine and NOT applied (pure); ValueError with the reason (live_config.validate_changes)."""
        return live_config.validate_changes(self.config, changes, self.intake)

    def update_config(self, **changes: Any) -> None:
        """k, N, S, mode, max_active, memory and instruction changes take effect on the next
        frame, requests in flight included; refused (ValueError, nothing applied) as
        validate_changes refuses them."""
        self.apply_config(self.validate_changes(**changes))

    def apply_config(self, new: EngineConfig) -> None:
        """Take `new`, an EngineConfig that validate_changes returned for this engine, on the
        next frame, without checking it again (the node validates in its parameter callback and
        applies on the worker thread). ValueError when a fixed setting differs (a config of
        another engine)."""
        for name in live_config.FIXED:
            if getattr(new, name) != getattr(self.config, name):
                raise ValueError(f"{name} cannot change while the engine runs")
        self.config = new
        self.scheduler.set_max_active(new.max_active_requests)
        self.scheduler.set_max_waiting(new.max_waiting_requests)

    def estimate_frame_s(self) -> float:
        """A rough, high estimate of one full frame's seconds here, before any frame ran: its
        prefill's multiply-adds (every weight but the embeddings over every token of the
        longest prefix, 2 P T) at the speed of a timed [T, width] x [width, width] matmul in the
        engine's dtype on its device (the prefill dominates a frame of a large model)."""
        mc, runner = self.model_config, self.runner
        embeddings = sum(m.weight.numel() for m in self.model.modules()
                         if isinstance(m, torch.nn.Embedding))
        weights = sum(p.numel() for p in self.model.parameters()) - embeddings
        tokens, width = mc.max_prefix_tokens, mc.vlm.width
        a = torch.randn(tokens, width, dtype=runner.dtype, device=runner.device)
        b = torch.randn(width, width, dtype=runner.dtype, device=runner.device)
        best = float("inf")
        for i in range(3):  # the first call allocates and picks a kernel: not timed
            start = time.perf_counter()
            torch.matmul(a, b)  # warmup asks only on a CPU: no device sync needed
            if i:
                best = min(best, time.perf_counter() - start)
        per_s = 2.0 * tokens * width * width / max(best, 1e-9)
        return 2.0 * weights * tokens / per_s

    def warmup(self, frames: int = 2, instruction: str | None = None,
               budget_s: float | None = WARMUP_BUDGET_S) -> str:
        """Run a few frames on a synthetic observation (action path and one language request),
        then forget them: the first real frame then runs at steady-state speed (first calls
        allocate, pick kernels and, with compile_denoise, compile). Call before serving.
        The prompt's instruction is `instruction`, else the configured one (checked to fit
        max_prompt_tokens when the engine was made): a small model whose real prompts are
        short must not fail to start on a longer synthetic one.
        The first frame always runs (it pays the allocations); the others (the second action
        frame, the language request's decode frames) only while the warmup has taken less than
        `budget_s` seconds (None: all of them), so warming up costs about one frame when
        frames are slow. On a CPU without CUDA graphs, a full frame estimated past `budget_s`
        (estimate_frame_s) is not run at all: one reduced frame warms up instead (the first
        camera, REDUCED_WARMUP_DENOISE_STEPS denoise steps, no language request), and the first
        served frames pay the first-call costs of the shapes it did not run. With CUDA graphs
        (or on CUDA) the full frames run: capture needs the real shapes. Returns one line
        saying what ran (the node logs it at configure)."""
        if budget_s is not None and budget_s < 0:
            raise ValueError(f"warmup budget_s must be >= 0 seconds or None, got {budget_s}")
        if self.frame or self.has_unfinished() or self.ops.outbox:
            raise RuntimeError("warmup() must run before the engine serves any frame")
        reduce = (budget_s is not None and self.runner.device.type == "cpu"
                  and not self.config.cuda_graphs)
        estimate = self.estimate_frame_s() if reduce else 0.0
        if reduce and estimate > budget_s:
            return self._reduced_warmup(estimate, budget_s, instruction)
        start = _clock()
        ran = 0

        def spent() -> bool:
            return budget_s is not None and _clock() - start >= budget_s

        stream = SyntheticStream(self.model_config, seed=self.config.seed)
        stream.instruction = self.config.instruction if instruction is None else instruction
        saved = self.config
        self.config = saved.replace(memory_every_n_frames=1)
        try:
            for i in range(frames):
                if i and spent():
                    break
                self.step(stream.frame(i))
                ran += 1
            self.config = saved
            if not spent():
                for _ in self.drain(stream.frame, max_frames=4 * saved.max_decode_steps):
                    ran += 1
                    if spent():
                        break
        finally:
            self._forget_warmup(saved)
        return (f"warmup: {ran} full frame(s) in {_clock() - start:.1f} s"
                + (f" (a full frame estimated at {estimate:.1f} s)" if reduce else ""))

    def _reduced_warmup(self, estimate: float, budget_s: float, instruction: str | None) -> str:
        """warmup's one reduced frame (see warmup): first camera, fewer denoise steps, no
        language request."""
        start = time.perf_counter()
        stream = SyntheticStream(self.model_config, seed=self.config.seed)
        stream.instruction = self.config.instruction if instruction is None else instruction
        obs = stream.frame(0)
        cams = len(obs.camera_images())
        obs = replace(obs, camera_valid=(True,) + (False,) * (cams - 1))
        saved = self.config
        steps = min(REDUCED_WARMUP_DENOISE_STEPS, saved.denoise_steps)
        self.config = saved.replace(denoise_steps=steps, memory_every_n_frames=0)
        try:
            self.step(obs)
        finally:
            self._forget_warmup(saved)
        return (f"warmup: one reduced frame (1 of {cams} cameras, {steps} of "
                f"{saved.denoise_steps} denoise steps, no language request) in "
                f"{time.perf_counter() - start:.1f} s: a full frame is estimated at "
                f"{estimate:.0f} s, over the {budget_s:g} s warmup budget; the first frames "
                f"served pay the first-call costs of the shapes it did not run")

    def _forget_warmup(self, saved: EngineConfig) -> None:
        """Drop what warmup's frames left: requests, counters, outbox, the KV peak."""
        for r in self.scheduler.running + self.scheduler.waiting:
            self.scheduler.abort(r.id)
        self.config = saved
        self.frame = 0
        self._last_obs = None
        self.intake.reset()
        self.ops.outbox.clear()
        self.kv.reset_peak()

    def has_unfinished(self) -> bool:
        return bool(self.intake.pending) or self.scheduler.num_unfinished > 0

    @property
    def num_live_requests(self) -> int:
        """Requests the engine holds: asked and not yet reported final (bounded)."""
        return len(self.intake.pending) + self.scheduler.num_unfinished

    @property
    def num_waiting_requests(self) -> int:
        """Live requests not decoding yet (asked, waiting or preempted): what the waiting
        queue (max_waiting_requests) holds or is about to take."""
        return self.num_live_requests - len(self.scheduler.running)

    def abort(self, request_id: int) -> bool:
        """Drop a language request wherever it is (asked, waiting, preempted, running) and free
        its KV; it produces no further updates. False when it is not live (unknown or already
        final). Call it between frames (from the thread that runs step)."""
        found = self.intake.abort(request_id)
        with self._lock:
            return self.scheduler.abort(request_id) is not None or found

    def drain(self, observe: Callable[[int], Observation] | None = None,
              max_frames: int = DRAIN_FRAMES) -> Iterator[FrameOutput]:
        """Step until every request is final (asked, waiting, preempted or running), yielding
        each frame's output: the way to end a run so that every request ends with its final
        update. Drained frames give birth to no periodic memory request (the config is not
        changed); questions asked before or during the drain are served. Each frame steps with
        `observe(frame)` (the observation for that frame number, e.g. SyntheticStream.frame),
        or without `observe` with the last observation step() took (the robot stands still:
        language is what is left to finish, and a request's tokens depend only on the frame it
        was born on). Stops after `max_frames` frames (has_unfinished() says whether all
        finished). RuntimeError when something is left and no frame was ever stepped."""
        for _ in range(max_frames):
            if not self.has_unfinished():
                return
            obs = self._last_obs if observe is None else observe(self.frame)
            if obs is None:
                raise RuntimeError("drain() has no observation: step one first or pass observe")
            yield self._step(obs, periodic=False)

    # -- one frame ------------------------------------------------------------------------------
    def step(self, obs: Observation, on_actions: ActionsReady | None = None) -> FrameOutput:
        """One control frame on `obs`: the action chunk and the language updates.
        `on_actions(actions, chunks)`, when given, gets the chunk the moment it exists (after
        the denoise, before the frame's language work): a robot acts on it while language runs.
        `actions` is FrameOutput.actions, `chunks` FrameOutput.chunks. What it raises fails
        the frame as a failing denoise would (except in parallel mode no request was born or
        advanced yet; there, their updates come with the next frame)."""
        return self._step(obs, periodic=True, on_actions=on_actions)

    def _step(self, obs: Observation, periodic: bool,
              on_actions: ActionsReady | None = None) -> FrameOutput:
        cfg, mc = self.config, self.model_config
        obs.validate(mc)
        prompt_ids = self.intake.action_prompt(obs, cfg)  # refuses a bad prompt before anything changes
        guide = self.intake.guide(obs.prior, cfg)  # and a bad action prior
        start = time.perf_counter()
        self.timer.reset()
        frame = self.ops.frame(self.frame, obs, cfg, prompt_ids, guide, periodic)
        frame.started, frame.on_actions = start, on_actions
        self.frame += 1
        action = self.ops.secure_action_path(frame)
        try:
            chunks = MODES[cfg.mode].run(self.ops, frame, action)
        finally:
            self.ops.release(action)
        updates = self.ops.take_updates()
        frame_ms = (time.perf_counter() - start) * 1e3
        timings = self.timer.ms()
        rate = self.ops.account(frame, frame_ms, timings)
        self._last_obs = obs
        if not frame.chunks:  # a mode that did not denoise (none does)
            frame.chunks = {name: c.cpu().numpy() for name, c in chunks.items()}
        return FrameOutput(
            frame=frame.index, stamp=obs.stamp, mode=cfg.mode, k=cfg.decode_steps_per_frame,
            n=cfg.max_decode_steps, s=cfg.denoise_steps,
            actions=frame.actions,
            updates=updates, timings_ms=timings, frame_ms=frame_ms, batch_size=frame.batch_size,
            tokens_this_frame=sum(len(u.new_tokens) for u in updates),
            num_waiting=len(self.scheduler.waiting), num_running=len(self.scheduler.running),
            kv=self.kv.usage(), decode_steps=frame.decode_steps, admitted=frame.admitted,
            target_action_hz=cfg.target_action_hz, k_chosen=rate.k, target_feasible=rate.feasible,
            chunks=frame.chunks, actions_ms=frame.actions_ms or frame_ms,
        )
