"""Qwen3-VL with a DiT action expert (the Xiaomi-Robotics-0 layout, docs/qwen3-vl.md): the
Qwen3-VL backbone (engine/families/qwen3vl/model.py), a causal prefix in a chat template (the user turn
left open after the images and the instruction), no BOS, 3-axis rotary positions; the DiT reads
the last layers' prefix K/V with [state ; time ; chunk] tokens. ModelConfig.family "qwen3vl".
Checkpoints: transformers save_pretrained folders + our experts' files
(engine/families/qwen3vl/checkpoint.py), which also hold StarVLA models (family starvla)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ...runner.paging import PagedContext
from ...runner.action_stage import ActionInputs
from ..base import Family, ParamCounts, StageCost
from ..pi05.family import kv_action_costs
from ...model.prompt import PROMPT_END
from ...model.sampler import euler_sample
from .config import QwenVLRules, Xr0Rules

# A question follows the instruction in the same user turn, on its own line: the conversation
# the chat template renders holds "<instruction text>\n<question>". The frame's prefix and the
# question are tokenised apart, so they are split where no pre-token can cross: a byte-level BPE
# with Qwen's pre-tokenizer joins whitespace with what follows it (" \n" is one pre-token, "ĠĊ"
# in Qwen's vocabulary; " what" another), never with what precedes it. The prefix therefore ends
# at the instruction text's last non-space character and its trailing whitespace (pi0.5's
# "Action: " ends in a space) opens the question's text; after OFT's action queries (special
# tokens, which split the text around them) nothing is carried (docs/qwen3-vl.md)
QUESTION_SEPARATOR = "\n"

if TYPE_CHECKING:
    from ...config.model_config import ModelConfig
    from ...model.rtc import Guide
    from ...runner.model_runner import ModelRunner, SeqView
    from ...model.tokenizer import Tokenizer


class QwenVLFamily(QwenVLRules, Family):
    """What every Qwen3-VL family shares: the layout and the backbone's checks (config.py), the
    prompt, the model, the folders. Subclasses: the DiT (this module's FAMILY) and StarVLA's heads."""

    question_note = ", with the chat template"

    # -- the prompt ------------------------------------------------------------------------------
    def prompt_ids(self, config: "ModelConfig", tokenizer: "Tokenizer", text: str) -> list[int]:
        # the user turn's text: the turn stays open for a question; OFT's action queries end
        # the text (docs/starvla.md); without them the text's trailing whitespace is the
        # question's (carried_text)
        if config.qwen.action_query_ids:
            return tokenizer.encode(text, add_bos=False) + list(config.qwen.action_query_ids)
        return tokenizer.encode(text.rstrip(), add_bos=False)

    def carried_text(self, config: "ModelConfig") -> str:
        """What of the instruction text the prefix leaves to a question: the whitespace
        format_prompt's text ends with, unless OFT's action queries follow it."""
        return "" if config.qwen.action_query_ids else PROMPT_END[len(PROMPT_END.rstrip()):]

    def question_ids(self, config: "ModelConfig", tokenizer: "Tokenizer", prompt: str
                     ) -> list[int]:
        """The prefix ends inside the user turn, after the images and the instruction: the
        instruction's trailing whitespace, the question on its own line, still in the user turn,
        then the chat template's tail closing it and opening the assistant's turn
        (docs/qwen3-vl.md, "Prefix layout")."""
        text = self.carried_text(config) + QUESTION_SEPARATOR + prompt
        return tokenizer.encode(text, add_bos=False) + list(config.qwen.tail_ids)

    def split_reason(self, config: "ModelConfig", tokenizer: "Tokenizer", prompt_text: str
                     ) -> str | None:
        """The split must tokenise the same apart and joined: checked on ``prompt_text`` and a
        few questions (a tokenizer whose merges cross it would give a conversation the chat
        template never renders). After OFT's queries the special tokens split the text."""
        if config.qwen.action_query_ids:
            return None
        for question in ("what happened?", "Is the cup on the left?", "\n3 cubes"):
            apart = self.prompt_ids(config, tokenizer, prompt_text) \
                + tokenizer.encode(self.carried_text(config) + QUESTION_SEPARATOR + question)
            joined = tokenizer.encode(prompt_text + QUESTION_SEPARATOR + question)
            if apart != joined:
                return (f"this tokenizer's merges cross the split between the frame's prompt and "
                        f"a question ({prompt_text[-12:]!r} | {QUESTION_SEPARATOR + question!r}): "
                        f"its prompts would not be the chat template's tokens (docs/qwen3-vl.md)")
        return None

    # -- the model -------------------------------------------------------------------------------
    def init_model(self, config, seed, device, dtype):
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import init_qwen3vl

        return init_qwen3vl(config, seed, device, dtype)

    # -- checkpoints -----------------------------------------------------------------------------
    def open_folder(self, folder, device, dtype, tokenizer=None, asset_id=None, progress=None):
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import open_qwen3vl_folder

        return open_qwen3vl_folder(folder, device, dtype, tokenizer)

    def inspect_folder(self, folder, tokenizer=None, asset_id=None) -> dict[str, Any]:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import inspect_qwen3vl

        return inspect_qwen3vl(folder, tokenizer)

    def write_folder(self, model, folder) -> None:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import save_qwen3vl_folder

        save_qwen3vl_folder(model, folder)

    def count_params(self, config: "ModelConfig", expert: int = 1) -> ParamCounts:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import count_qwen3vl_params

        return count_qwen3vl_params(config, expert)


class Xr0Family(Xr0Rules, QwenVLFamily):
    """Family qwen3vl: its config rules (config.py: DiT experts) and its DiT's action stage."""

    # the folder format is the backbone's: this family opens it whatever heads it holds
    def owns_folder(self, folder: Path) -> bool:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import is_qwen3vl_folder

        return is_qwen3vl_folder(folder)

    def action_chunks(self, runner: "ModelRunner", a: ActionInputs) -> dict[str, torch.Tensor]:
        if a.guide is not None:  # the engine refuses an action prior for this family first
            raise ValueError(f"real-time chunking covers families with capabilities.rtc, not "
                             f"{self.name}")
        return {"action": runner.denoise(a.seq, a.prefix_len, a.noise, a.num_steps,
                                         state=a.state)}

    def denoise(self, runner: "ModelRunner", seq: "SeqView", prefix_len: int,
                noise: torch.Tensor, num_steps: int, expert: int, guide: "Guide | None",
                state: torch.Tensor | None) -> torch.Tensor:
        """The DiT expert: [state ; time ; chunk] tokens in the scratch slots, causal among
        themselves (query j sees the prefix and DiT tokens 0..j), rotary positions continuing
        after the prefix's largest one."""
        if guide is not None:
            raise ValueError(f"real-time chunking covers families with capabilities.rtc, not "
                             f"{self.name}")

        with torch.inference_mode():
            r = runner
            m, n = r.model, r.config.action_tokens
            if state is None:
                state = torch.zeros(r.config.action_dim)
            slots = r.long(r.slots_of(seq.block_table, prefix_len, n))
            ctx = PagedContext(r, slots, r.tables([seq.block_table]), r.int32([0] * n),
                               r.int32([prefix_len + j + 1 for j in range(n)]))
            positions = torch.arange(n, device=r.device) + prefix_len + seq.rope_offset

            def velocity(x: torch.Tensor, t: float) -> torch.Tensor:
                return m.dit_velocity(expert, x.to(r.dtype), t, state, positions, ctx)

            return euler_sample(velocity, noise.to(device=r.device, dtype=torch.float32),
                                num_steps)

    def action_costs(self, config, counts, prefix_tokens, elem) -> list[StageCost]:
        return kv_action_costs(config, counts, prefix_tokens, elem)


FAMILY = Xr0Family()
