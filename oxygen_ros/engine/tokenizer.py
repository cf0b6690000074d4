"""Tokenizers: a real one from a checkpoint folder, or a tiny deterministic byte-level BPE.

Both expose the same small interface (``Tokenizer``): encode(text, add_bos) -> ids,
decode(ids) -> text, and the eos/bos/pad ids and vocab size. BOS is added by this wrapper, never by
a post-processor, so ``encode(text, add_bos=False)`` is the raw piece sequence.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol, Sequence

SPECIALS = ("<pad>", "<eos>", "<bos>")  # ids 0, 1, 2 (ModelConfig pad/eos/bos defaults)


class Tokenizer(Protocol):
    eos_id: int
    bos_id: int
    pad_id: int
    vocab_size: int

    def encode(self, text: str, add_bos: bool = False) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class HFTokenizer:
    """A ``tokenizers.Tokenizer`` (tokenizer.json) behind the Tokenizer interface."""

    def __init__(self, tok, bos_id: int, eos_id: int, pad_id: int) -> None:
        self.tok = tok
        self.bos_id, self.eos_id, self.pad_id = bos_id, eos_id, pad_id
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        ids = self.tok.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if add_bos else list(ids)

    def decode(self, ids: Sequence[int]) -> str:
        # Called for every streaming request every frame: skip the copy for a list of ints.
        if not isinstance(ids, list) or (ids and type(ids[0]) is not int):
            ids = [int(i) for i in ids]
        return self.tok.decode(ids, skip_special_tokens=True)

    def save(self, path: str | Path) -> None:
        """Write tokenizer.json (``path`` may be the file or its folder)."""
        p = Path(path)
        if p.is_dir() or not p.suffix:
            p.mkdir(parents=True, exist_ok=True)
            p = p / "tokenizer.json"
        self.tok.save(str(p))


class SentencePieceTokenizer:
    """A SentencePiece model (PaliGemma's tokenizer.model) behind the Tokenizer interface."""

    def __init__(self, model_file: str | Path) -> None:
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=str(model_file))
        self.bos_id, self.eos_id = self.sp.bos_id(), self.sp.eos_id()
        self.pad_id = self.sp.pad_id() if self.sp.pad_id() >= 0 else 0
        self.vocab_size = self.sp.get_piece_size()
        self.model_file = Path(model_file)

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        return list(self.sp.encode(text, add_bos=add_bos))

    def decode(self, ids: Sequence[int]) -> str:
        return self.sp.decode([int(i) for i in ids])


def _find_id(tok, names: Sequence[str]) -> int | None:
    for name in names:
        i = tok.token_to_id(name)
        if i is not None:
            return i
    return None


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load tokenizer.json (preferred) or a SentencePiece tokenizer.model from a folder or file."""
    p = Path(path)
    json_file = p if p.suffix == ".json" else p / "tokenizer.json"
    sp_file = p if p.suffix == ".model" else p / "tokenizer.model"
    if json_file.is_file():
        from tokenizers import Tokenizer as _Tok

        tok = _Tok.from_file(str(json_file))
        names = {}
        cfg_file = json_file.parent / "tokenizer_config.json"
        if cfg_file.is_file():
            cfg = json.loads(cfg_file.read_text())
            for key in ("bos_token", "eos_token", "pad_token"):
                val = cfg.get(key)
                if isinstance(val, dict):
                    val = val.get("content")
                if isinstance(val, str):
                    names[key] = val
        bos = _find_id(tok, [names.get("bos_token", "<bos>"), "<bos>", "<s>"])
        eos = _find_id(tok, [names.get("eos_token", "<eos>"), "<eos>", "</s>"])
        pad = _find_id(tok, [names.get("pad_token", "<pad>"), "<pad>"])
        if bos is None or eos is None:
            raise ValueError(f"{json_file}: no bos/eos token found (looked for <bos>/<s>, <eos>/</s>)")
        return HFTokenizer(tok, bos, eos, 0 if pad is None else pad)
    if sp_file.is_file():
        return SentencePieceTokenizer(sp_file)
    raise FileNotFoundError(f"no tokenizer.json or tokenizer.model at {p}")


_WORDS = (
    "pick up place put push pull open close turn on off the a an to of in into onto from with and "
    "cube block bowl plate cup mug drawer door lid box bottle can sponge towel knife fork spoon "
    "red green blue yellow black white orange purple left right top bottom front back middle "
    "table shelf sink stove basket tray gripper arm robot camera wrist base view object it them "
    "move grasp lift lower stack unstack slide rotate wipe pour insert remove fold then next done "
    "what happened before after now is was are were has have not yes no stop go slowly quickly"
).split()


def _tiny_corpus() -> list[str]:
    """Built-in deterministic English corpus: task phrases, pi0.5 prompts, numbers 0..255."""
    lines = [" ".join(str(n) for n in range(256))]
    lines += [f"Task: {w}, State: {n} {(n * 7) % 256} {(n * 31) % 256};\nAction: "
              for n, w in enumerate(_WORDS)]
    lines += ["Memory: what happened?\n", "Memory: the robot picked up the cube.\n"]
    for i, a in enumerate(_WORDS):
        b = _WORDS[(i * 5 + 3) % len(_WORDS)]
        c = _WORDS[(i * 11 + 7) % len(_WORDS)]
        lines.append(f"{a} the {b} {c} {i}. {a.capitalize()} {b} and {c}.")
    lines += [" ".join(_WORDS)] * 3
    return lines


def build_tiny_tokenizer(vocab_size: int = 512) -> HFTokenizer:
    """Deterministically train a byte-level BPE of exactly ``vocab_size`` tokens.

    <pad>=0, <eos>=1, <bos>=2; if the corpus runs out of merges the vocab is topped up with
    ``<unused_i>`` special tokens (as Gemma does) so the size always matches the ModelConfig.
    """
    from tokenizers import Tokenizer as _Tok, decoders, models, pre_tokenizers, trainers

    if vocab_size < 260:
        raise ValueError(f"a byte-level tokenizer needs vocab_size >= 260, got {vocab_size}")
    tok = _Tok(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=1, show_progress=False, special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_tiny_corpus(), trainer=trainer)
    missing = vocab_size - tok.get_vocab_size(with_added_tokens=True)
    if missing > 0:
        tok.add_special_tokens([f"<unused_{i}>" for i in range(missing)])
    for i, name in enumerate(SPECIALS):
        assert tok.token_to_id(name) == i, (name, tok.token_to_id(name))
    return HFTokenizer(tok, bos_id=2, eos_id=1, pad_id=0)
