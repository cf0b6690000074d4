"""What enters the engine, checked where it enters: questions (ask / check_question), the prompts
the settings carry (the memory prompt, the instruction with the longest state text), and each
observation's action prompt and action prior, all refused with a reason before anything changes.

A question asked is an Ask until the next good frame gives birth to it (frame_ops.take_births):
then it becomes a Request with its KV sequence, observation and stamp.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from ..config.engine_config import EngineConfig
from ..config import family_registry
from ..config.model_config import ModelConfig
from ..model import format_prompt
from ..model.tokenizer import Tokenizer, token_text
from .observation import Observation
from .request import RequestKind
from ..model.rtc import ActionPrior, Guide, build_guide, rtc_unsupported_reason
from .scheduler import request_blocks

MAX_NEW_TOKENS = 4096  # the most a caller may ask for one request (ask's cheap bound)


@dataclass(frozen=True)
class Ask:
    """A language request asked and not yet born (it attaches to the next good frame)."""

    id: int
    kind: RequestKind
    prompt: str
    prompt_ids: tuple[int, ...]
    priority: int
    max_new_tokens: int


class Intake:
    """Checks and encodes the engine's inputs; holds the asks until their frame."""

    def __init__(self, model_config: ModelConfig, tokenizer: Tokenizer, num_blocks: int,
                 reserved_blocks: int, device: torch.device) -> None:
        self.model_config = model_config
        self.tokenizer = tokenizer
        self._num_blocks = num_blocks  # the KV pool
        self._reserved_blocks = reserved_blocks  # one frame's action path (Scheduler's reserve)
        self._device = device
        self.pending: list[Ask] = []  # asked, born on the next good frame
        self._ids = itertools.count(1)  # request ids: the same in every mode
        self._memory: tuple[str, tuple[int, ...]] = ("", ())
        self.worst_state = self._longest_state()
        reason = family_registry.family_of(model_config).split_reason(
            model_config, tokenizer, format_prompt("pick up the cup", self.worst_state,
                                                   bins=model_config.state_bins))
        if reason:
            raise ValueError(reason)

    def reset(self) -> None:
        """Forget every ask; request ids start again at 1 (after the engine's warm-up)."""
        self.pending.clear()
        self._ids = itertools.count(1)

    # -- language requests ----------------------------------------------------------------------
    def ask(self, prompt: str, priority: int, kind: RequestKind, max_new_tokens: int | None,
            cfg: EngineConfig, prompt_ids: list[int] | None = None) -> int:
        """Queue a language request for the next frame; returns its id. ValueError (with the
        reason) when the prompt or max_new_tokens cannot be served. `prompt_ids`: what
        check_question returned for `prompt` (then it is not tokenised again)."""
        ids = self.encode_suffix(prompt) if prompt_ids is None else self._checked_ids(prompt_ids)
        n = cfg.max_decode_steps if max_new_tokens is None else max_new_tokens
        if not 1 <= n <= MAX_NEW_TOKENS:
            raise ValueError(f"max_new_tokens must be in [1, {MAX_NEW_TOKENS}], got {n}")
        self.check_request_fits(n, cfg)
        ask = Ask(next(self._ids), kind, prompt, tuple(ids), priority, n)
        self.pending.append(ask)
        return ask.id

    def check_question(self, text: str) -> list[int]:
        """The ids `ask` takes for `text`; ValueError with the reason when it cannot be a
        language request's prompt (empty, or longer than max_prompt_tokens); the cheap length
        bound comes before tokenising."""
        return self.encode_suffix(text)

    def _checked_ids(self, ids: list[int]) -> list[int]:
        """Ids handed to ask (check_question's): the same bounds encode_suffix enforces, no
        tokenising (a caller's list is copied, never kept)."""
        out = [int(i) for i in ids]
        limit, vocab = self.model_config.max_prompt_tokens, self.model_config.vocab_size
        if not out or len(out) > limit:
            raise ValueError(f"prompt is {len(out)} tokens; it must be 1..{limit} (max_prompt_tokens)")
        if not all(0 <= i < vocab for i in out):
            raise ValueError(f"prompt ids must be in [0, {vocab})")
        return out

    def encode_suffix(self, prompt: str) -> list[int]:
        """A language request's tokens after the frame's prefix (Family.question_ids: pi0.5 the
        question's text; Qwen the question in the user turn, then the chat template's tail)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("a language request needs a non-empty prompt")
        limit = self.model_config.max_prompt_tokens
        # Every tokenizer here emits at most one token per character plus a few merges' worth
        # of specials: a prompt far longer in characters cannot fit, refuse it before encoding.
        if len(prompt) > 64 * limit:
            raise ValueError(f"prompt is {len(prompt)} characters; it must be at most "
                             f"{limit} tokens (max_prompt_tokens)")
        mc = self.model_config
        family = family_registry.family_of(mc)
        ids = self._covered(family.question_ids(mc, self.tokenizer, prompt), "prompt")
        if not ids or len(ids) > limit:
            raise ValueError(f"prompt is {len(ids)} tokens; it must be 1..{limit} (max_prompt_tokens"
                             f"{family.question_note})")
        return ids

    def check_request_fits(self, max_new_tokens: int, cfg: EngineConfig) -> None:
        """A request that could never fit the pool beside one frame's action path would wait
        forever: refuse it where it enters."""
        mc = self.model_config
        need = request_blocks(mc.max_prefix_tokens, mc.max_prompt_tokens, max_new_tokens,
                              cfg.block_size, with_prefix=True) + self._reserved_blocks
        if need > self._num_blocks:
            raise ValueError(
                f"a request of {max_new_tokens} new tokens needs up to {need} KV blocks with the "
                f"next frame's action path; the pool has {self._num_blocks} (num_blocks)")

    def memory_ids(self, prompt: str) -> list[int]:
        if self._memory[0] != prompt:  # the same prompt every frame: encode it once
            self._memory = (prompt, tuple(self.encode_suffix(prompt)))
        return list(self._memory[1])

    def take(self, memory: EngineConfig | None) -> list[Ask]:
        """The asks to give birth to this frame: the periodic memory request first (when
        `memory` is the frame's config), then every question asked since the last good frame."""
        born, self.pending = self.pending, []
        if memory is not None:
            born.insert(0, Ask(next(self._ids), RequestKind.MEMORY, memory.memory_prompt,
                               tuple(self.memory_ids(memory.memory_prompt)), 0,
                               memory.max_decode_steps))
        return born

    def abort(self, request_id: int) -> bool:
        """Drop an ask not yet born; False when there is none with this id."""
        kept = [a for a in self.pending if a.id != request_id]
        found, self.pending = len(kept) != len(self.pending), kept
        return found

    # -- observations ---------------------------------------------------------------------------
    def action_prompt(self, obs: Observation, cfg: EngineConfig) -> list[int]:
        """The observation's instruction (or the configured one) and state, as prompt tokens;
        ValueError when they exceed max_prompt_tokens."""
        instruction = cfg.instruction if obs.instruction is None else obs.instruction
        ids = self.prompt_ids(instruction, np.asarray(obs.state, dtype=np.float32))
        if len(ids) > self.model_config.max_prompt_tokens:
            raise ValueError(f"instruction + state prompt is {len(ids)} tokens; the model takes at "
                             f"most {self.model_config.max_prompt_tokens} (max_prompt_tokens)")
        return ids

    def prompt_ids(self, instruction: str, state: np.ndarray) -> list[int]:
        mc = self.model_config
        text = format_prompt(instruction, state, bins=mc.state_bins, pad_to=mc.state_prompt_pad)
        return self._covered(family_registry.family_of(mc).prompt_ids(mc, self.tokenizer, text),
                             "instruction")

    def _covered(self, ids: list[int], what: str) -> list[int]:
        """``ids`` when the embedding has a row for each; else ValueError naming the tokens it
        lacks: added tokens past the rows (PaliGemma's ``<image>`` at 257152 of 257152 rows),
        which a text only yields by holding their literal content."""
        rows = self.model_config.vocab_size
        past = sorted({i for i in ids if not 0 <= i < rows})
        if past:
            names = ", ".join(f"{token_text(self.tokenizer, i)!r} (id {i})" for i in past)
            raise ValueError(f"{what} holds {names}: a token of the tokenizer the checkpoint's "
                             f"embedding ({rows} rows) has no row for; remove it from the text")
        return ids

    def guide(self, prior: ActionPrior | None, cfg: EngineConfig) -> Guide | None:
        """The frame's RTC guide from the observation's ActionPrior (ValueError when it does not
        fit the model), None without one."""
        if prior is None:
            return None
        if not isinstance(prior, ActionPrior):
            raise ValueError(f"observation prior must be an ActionPrior, got {type(prior).__name__}")
        mc = self.model_config
        reason = rtc_unsupported_reason(mc)
        if reason:
            raise ValueError(reason)
        prior.validate(mc.action_horizon, mc.action_dim)
        return build_guide(prior, mc.action_horizon, mc.action_dim, cfg.rtc_method,
                           cfg.rtc_jacobian, cfg.rtc_max_guidance, cfg.rtc_execution_horizon,
                           self._device)

    def _longest_state(self) -> np.ndarray:
        """A state of action_dim joints (the most an observation may carry) all in the bin whose
        text tokenises longest (bins run -1..state_bins-1: a value below -1 is bin -1): the
        worst case an instruction must leave room for."""
        mc = self.model_config
        values = np.concatenate(([-1.5], -1.0 + (2.0 * np.arange(mc.state_bins) + 1.0)
                                 / mc.state_bins))
        # a padded prompt (LeRobot v0.4.x) writes at least state_prompt_pad values
        n = max(mc.action_dim, mc.state_prompt_pad)
        lengths = [len(self.tokenizer.encode(" ".join([str(b)] * n)))
                   for b in range(-1, mc.state_bins)]
        return np.full(n, values[int(np.argmax(lengths))], dtype=np.float32)
