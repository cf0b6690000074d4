"""Tokenizers: a real one (file, folder or local Hugging Face cache), or a tiny deterministic BPE.

``find_tokenizer`` resolves what a checkpoint is served with; the tiny BPE is for random presets
only, so real weights never meet a vocabulary they were not trained with. Both expose the same small interface (``Tokenizer``): encode(text, add_bos) -> ids,
decode(ids) -> text, and the eos/bos/pad ids and vocab size. BOS is added by this wrapper, never by
a post-processor, so ``encode(text, add_bos=False)`` is the raw piece sequence.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Protocol, Sequence

SPECIALS = ("<pad>", "<eos>", "<bos>")  # ids 0, 1, 2 (ModelConfig pad/eos/bos defaults)


class Tokenizer(Protocol):
    eos_id: int
    bos_id: int | None  # None: the tokenizer has no BOS (Qwen's; its prompts never start with one)
    pad_id: int
    vocab_size: int

    def encode(self, text: str, add_bos: bool = False) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class HFTokenizer:
    """A ``tokenizers.Tokenizer`` (tokenizer.json) behind the Tokenizer interface."""

    def __init__(self, tok, bos_id: int | None, eos_id: int, pad_id: int,
                 chat_template: str | None = None) -> None:
        self.tok = tok
        self.bos_id, self.eos_id, self.pad_id = bos_id, eos_id, pad_id
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)
        # the Jinja chat template saved beside tokenizer.json (the Qwen families lay their
        # prompts out by it: engine/model/chat_template.py), None without one
        self.chat_template = chat_template

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        ids = self.tok.encode(text, add_special_tokens=False).ids
        if not add_bos:
            return list(ids)
        if self.bos_id is None:
            raise ValueError("this tokenizer has no BOS token (a Qwen tokenizer): it cannot "
                             "serve a model whose prompts start with one")
        return [self.bos_id, *ids]

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
        import sentencepiece as spm  # lazy: only for a SentencePiece model

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


def read_chat_template(folder: Path) -> str | None:
    """The chat template saved beside a tokenizer.json, or None. transformers writes it to
    chat_template.jinja (5.x), chat_template.json or tokenizer_config.json ("chat_template": a
    string, or a list of named templates of which "default" is used)."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    for name in ("chat_template.json", "tokenizer_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        value = json.loads(path.read_text()).get("chat_template")
        if isinstance(value, list):
            value = next((t.get("template") for t in value if t.get("name") == "default"), None)
        if isinstance(value, str):
            return value
    return None


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load tokenizer.json (preferred) or a SentencePiece tokenizer.model from a folder or file."""
    p = Path(path)
    json_file = p if p.suffix == ".json" else p / "tokenizer.json"
    sp_file = p if p.suffix == ".model" else p / "tokenizer.model"
    if json_file.is_file():
        from tokenizers import Tokenizer as _Tok  # lazy: only for a tokenizer.json

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
        # Qwen's tokenizers have no BOS (bos_token null) and end text with <|endoftext|> /
        # <|im_end|>: bos None, which only models whose prompts start with a BOS refuse
        # (Engine); PaliGemma's have <bos> / <eos> / <pad>.
        bos = _find_id(tok, [names.get("bos_token", "<bos>"), "<bos>", "<s>"])
        eos = _find_id(tok, [names.get("eos_token", "<eos>"), "<eos>", "</s>", "<|endoftext|>"])
        pad = _find_id(tok, [names.get("pad_token", "<pad>"), "<pad>", "<|endoftext|>"])
        if eos is None:
            raise ValueError(f"{json_file}: no eos token found (looked for the tokenizer_config's "
                             f"eos_token, <eos>, </s>, <|endoftext|>)")
        return HFTokenizer(tok, bos, eos, 0 if pad is None else pad,
                           read_chat_template(json_file.parent))
    if sp_file.is_file():
        return SentencePieceTokenizer(sp_file)
    raise FileNotFoundError(f"no tokenizer.json or tokenizer.model at {p}")


# ---- finding the tokenizer a checkpoint was trained with --------------------------------------
PALIGEMMA_REPO = "google/paligemma-3b-pt-224"  # what LeRobot's pi05 processor config names
OPENPI_TOKENIZER = "big_vision/paligemma_tokenizer.model"  # openpi's download, under its cache
_FILES = ("tokenizer.json", "tokenizer.model")
HOW_TO = (
    "provide it with load_checkpoint(..., tokenizer=PATH_OR_REPO_ID), oxygen-inspect --tokenizer or "
    "the node parameter model.tokenizer (a tokenizer.model / tokenizer.json file, a folder holding "
    "one, or a Hugging Face repo id already in the local cache), or copy tokenizer.model next to "
    "the checkpoint; on a machine with internet `huggingface-cli download "
    f"{PALIGEMMA_REPO} tokenizer.model tokenizer.json tokenizer_config.json` fills the cache "
    "(the repo is gated: accept its licence first)")


def hf_hub_cache() -> Path:
    """The Hugging Face hub cache folder, read from the environment at call time."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def openpi_cache() -> Path:
    return Path(os.environ.get("OPENPI_DATA_HOME") or "~/.cache/openpi").expanduser()


def _from_hf_cache(repo_id: str, looked: list[str]) -> Tokenizer | None:
    """A repo's tokenizer from the local cache only (never the network)."""
    # lazy: only to look in the Hugging Face cache
    from huggingface_hub import try_to_load_from_cache

    cache = hf_hub_cache()
    looked.append(f"Hugging Face cache {cache} for {repo_id} ({' or '.join(_FILES)})")
    for name in _FILES:
        try:
            path = try_to_load_from_cache(repo_id, name, cache_dir=cache)
        except ValueError:  # not a valid repo id
            return None
        if isinstance(path, str) and Path(path).is_file():
            return load_tokenizer(path)
    return None


def _looks_like_repo_id(spec: str) -> bool:
    parts = spec.split("/")
    return len(parts) == 2 and all(parts) and not spec.startswith((".", "~")) \
        and not spec.endswith(_FILES)


def load_tokenizer_spec(spec: str | Path) -> tuple[Tokenizer, str]:
    """An explicit tokenizer: file, folder or cached repo id -> (tokenizer, where it came from)."""
    text = str(spec)
    path = Path(text).expanduser()
    if path.is_file() or path.is_dir():
        if path.is_file() and not text.endswith((".json", ".model")):
            raise ValueError(f"tokenizer file {path} is neither a tokenizer.json nor a SentencePiece "
                             ".model file")
        try:
            return load_tokenizer(path), str(path)
        except FileNotFoundError as err:
            raise ValueError(f"{err}; {HOW_TO}") from None
    if _looks_like_repo_id(text):
        looked: list[str] = []
        tok = _from_hf_cache(text, looked)
        if tok is not None:
            return tok, f"{text} (Hugging Face cache {hf_hub_cache()})"
        raise ValueError(f"tokenizer {text!r} is not in the local {looked[0]}; {HOW_TO}")
    raise ValueError(f"tokenizer {text!r} is neither an existing file or folder nor a repo id "
                     f"(owner/name); {HOW_TO}")


def find_tokenizer(checkpoint: str | Path, repo_ids: Sequence[str] = (),
                   openpi: bool = False) -> tuple[Tokenizer, str]:
    """The tokenizer of a checkpoint with none given: next to it, then the local Hugging Face
    cache for each repo id its processor config names, then (openpi) openpi's own download.
    ValueError listing every place looked at and how to provide one when nothing is found."""
    folder = Path(checkpoint)
    looked = [f"{folder} ({' or '.join(_FILES)})"]
    if any((folder / f).is_file() for f in _FILES):
        return load_tokenizer(folder), str(folder)
    for repo in repo_ids:
        tok = _from_hf_cache(repo, looked)
        if tok is not None:
            return tok, f"{repo} (Hugging Face cache {hf_hub_cache()})"
    if openpi:
        path = openpi_cache() / OPENPI_TOKENIZER
        looked.append(f"openpi cache {path}")
        if path.is_file():
            return load_tokenizer(path), str(path)
    raise ValueError(f"no tokenizer found for checkpoint {folder}: looked in " + "; ".join(looked)
                     + f". A checkpoint is never served with a made-up vocabulary: {HOW_TO}")


def _ids_past(tokenizer: Tokenizer, rows: int) -> dict[int, tuple[str, bool]]:
    """The tokenizer's ids at or past ``rows``: id -> (its text, whether it is an added token).
    An added token (tokenizer.json's added_tokens: PaliGemma's ``<image>``) is only produced by
    text holding its literal content; any other id can come out of ordinary text."""
    tok = getattr(tokenizer, "tok", None)  # HFTokenizer's tokenizers.Tokenizer
    if tok is None:  # SentencePiece (every piece can come out of text) or another object
        return {i: ("", False) for i in range(rows, int(tokenizer.vocab_size))}
    added = {i: t.content for i, t in tok.get_added_tokens_decoder().items()}
    return {i: (added.get(i, name), i in added)
            for name, i in tok.get_vocab(with_added_tokens=True).items() if i >= rows}


def token_text(tokenizer: Tokenizer, token_id: int) -> str:
    """A token's own text (an added special token's content, which decode would skip)."""
    tok = getattr(tokenizer, "tok", None)
    text = tok.id_to_token(int(token_id)) if tok is not None else None
    return text if text is not None else tokenizer.decode([int(token_id)])


def uncovered_reason(tokenizer: Tokenizer, embedding_rows: int) -> str | None:
    """Why the embedding does not cover every id the tokenizer can emit, or None. Added tokens
    past the rows are covered in this sense: ordinary text never produces them (the engine
    refuses a prompt holding one: Intake) and decoding never samples them (the LM head has one
    logit per row)."""
    past = _ids_past(tokenizer, embedding_rows)
    emitted = sorted(i for i, (_, added) in past.items() if not added)
    if emitted:
        shown = ", ".join(f"{past[i][0] or token_text(tokenizer, i)!r} (id {i})"
                          for i in emitted[:3])
        return (f"has {int(tokenizer.vocab_size)} tokens but the checkpoint's embedding has "
                f"{embedding_rows} rows: {len(emitted)} of them ({shown}"
                f"{', ...' if len(emitted) > 3 else ''}) can come out of ordinary text and index "
                f"past it; it is not the tokenizer this model was trained with")
    bad = [name for name in ("bos_id", "eos_id", "pad_id") if getattr(tokenizer, name) is not None
           and not 0 <= int(getattr(tokenizer, name)) < embedding_rows]
    if bad:
        return f"{bad} outside the embedding ({embedding_rows} rows)"
    return None


def describe_vocab(tokenizer: Tokenizer, embedding_rows: int) -> str:
    """What oxygen-inspect says of a tokenizer that fits: its size, and the added tokens past the
    embedding's rows (never emitted, refused in a prompt) when it has some."""
    past = _ids_past(tokenizer, embedding_rows)
    text = f"{int(tokenizer.vocab_size)} tokens"
    if past:
        names = ", ".join(f"{name} (id {i})" for i, (name, _) in sorted(past.items())[:5])
        text += (f"; {len(past)} added token(s) past the embedding's {embedding_rows} rows: "
                 f"{names}{', ...' if len(past) > 5 else ''}: never emitted, refused in a prompt")
    return text


def check_vocab(tokenizer: Tokenizer, embedding_rows: int, source: str) -> None:
    """A tokenizer fits a checkpoint when the embedding covers every id it can emit (added
    tokens past the rows are fine: uncovered_reason) and it uses (nearly) all of the embedding:
    an embedding may be padded up a little (Qwen's: 151936 rows for ~151670 tokens), a much
    smaller vocabulary is another tokenizer."""
    reason = uncovered_reason(tokenizer, embedding_rows)
    if reason:
        raise ValueError(f"tokenizer {source} {reason}; {HOW_TO}")
    n = int(tokenizer.vocab_size)
    if n < embedding_rows - max(256, embedding_rows // 256):
        raise ValueError(f"tokenizer {source} has {n} tokens but the checkpoint's embedding has "
                         f"{embedding_rows} rows: it is not the tokenizer this model was trained "
                         f"with; {HOW_TO}")


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


def build_tiny_tokenizer(vocab_size: int = 512, corpus: Sequence[str] | None = None) -> HFTokenizer:
    """Deterministically train a byte-level BPE of exactly ``vocab_size`` tokens on ``corpus``
    (None: the built-in one; a trained policy passes its own instructions and captions).

    <pad>=0, <eos>=1, <bos>=2; if the corpus runs out of merges the vocab is topped up with
    ``<unused_i>`` special tokens (as Gemma does) so the size always matches the ModelConfig.
    """
    # lazy: only to train a tiny tokenizer
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
    tok.train_from_iterator(_tiny_corpus() if corpus is None else list(corpus), trainer=trainer)
    missing = vocab_size - tok.get_vocab_size(with_added_tokens=True)
    if missing > 0:
        tok.add_special_tokens([f"<unused_{i}>" for i in range(missing)])
    for i, name in enumerate(SPECIALS):
        assert tok.token_to_id(name) == i, (name, tok.token_to_id(name))
    return HFTokenizer(tok, bos_id=2, eos_id=1, pad_id=0)
