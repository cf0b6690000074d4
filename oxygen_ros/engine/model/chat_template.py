"""The Qwen families' prompt ids from the chat template a checkpoint's tokenizer ships.

The engine lays a Qwen prompt out as one user turn (docs/qwen3-vl.md, "Prefix layout"): the
template's head (``qwen.head_ids``), one vision block per camera, the instruction and a question
as texts, then the template's tail (``qwen.tail_ids``: the turn's end and the generation prompt).
With a template (``tokenizer_config.json``'s ``chat_template``, ``chat_template.jinja`` or
``chat_template.json`` beside ``tokenizer.json``) the head and tail are what transformers'
``apply_chat_template`` renders for that turn with ``add_generation_prompt=True`` and the
template's own defaults (Qwen3.5's may open an empty thinking block there); without one the
config's ids stay (the presets' ChatML ids).
"""
from __future__ import annotations

import dataclasses

from ..config.model_config import ModelConfig
from .tokenizer import Tokenizer, token_text

VISION_BLOCK = "<|vision_start|><|image_pad|><|vision_end|>"
# texts no template rewrites, to find where the conversation's parts land in its rendering
_MARKS = ("\ue000oxygen-instruction\ue000", "\ue001oxygen-question\ue001")


def render_user_turn(tokenizer: Tokenizer, template: str, texts: list[str],
                     num_images: int = 1) -> str:
    """transformers' rendering of one user turn holding ``num_images`` images then ``texts``,
    followed by the generation prompt."""
    # lazy: transformers, only to render a chat template
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer.tok)
    content = [{"type": "image"}] * num_images + [{"type": "text", "text": t} for t in texts]
    return fast.apply_chat_template([{"role": "user", "content": content}], chat_template=template,
                                    add_generation_prompt=True, tokenize=False)


def template_ids(tokenizer: Tokenizer, template: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(head ids, tail ids) of ``template``: what it renders before the first image and after
    the last text of a user turn. ValueError when the turn does not render as the engine lays
    it out (images first, then the texts as they are, nothing between them)."""
    text = render_user_turn(tokenizer, template, list(_MARKS))
    start, (instruction, question) = text.find(VISION_BLOCK), (text.find(m) for m in _MARKS)
    if start < 0 or min(instruction, question) < 0:
        raise ValueError("the chat template does not render a user turn's image as "
                         f"{VISION_BLOCK} and its texts as they are: not a Qwen-VL template")
    between = text[start + len(VISION_BLOCK):instruction] + \
        text[instruction + len(_MARKS[0]):question]
    if between:
        raise ValueError(f"the chat template puts {between!r} between a user turn's image and "
                         f"texts: the engine's prompt layout does not fit it")
    head, tail = text[:start], text[question + len(_MARKS[1]):]
    return (tuple(tokenizer.encode(head, add_bos=False)),
            tuple(tokenizer.encode(tail, add_bos=False)))


def with_chat_template(config: ModelConfig, tokenizer: Tokenizer) -> ModelConfig:
    """``config`` with its head and tail ids from the tokenizer's chat template (unchanged
    without one, or for a family without the qwen fields)."""
    template = getattr(tokenizer, "chat_template", None)
    if config.qwen is None or not template:
        return config
    head, tail = template_ids(tokenizer, template)
    qwen = dataclasses.replace(config.qwen, head_ids=head, tail_ids=tail)
    return dataclasses.replace(config, qwen=qwen)


def describe_chat_template(config: ModelConfig, tokenizer: Tokenizer) -> str:
    """oxygen-inspect's line: where the prompt's head and tail come from and what they are."""
    template = getattr(tokenizer, "chat_template", None)
    source = "the tokenizer's chat template" if template else \
        "no chat template with the tokenizer: the config's ids"
    if template:
        config = with_chat_template(config, tokenizer)
    head, tail = (_text(tokenizer, ids) for ids in (config.qwen.head_ids, config.qwen.tail_ids))
    return f"{source}: head {head!r}, tail (generation prompt) {tail!r}"


def _text(tokenizer: Tokenizer, ids) -> str:
    tok = getattr(tokenizer, "tok", None)
    if tok is not None:  # specials kept (decode would skip them)
        return tok.decode(list(ids), skip_special_tokens=False)
    return "".join(token_text(tokenizer, i) for i in ids)
