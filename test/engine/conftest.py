import pytest
import torch

from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.families.loader import init_model


@pytest.fixture(scope="session")
def tiny_cfg():
    return PRESETS["tiny"]


@pytest.fixture(scope="session")
def tiny_model(tiny_cfg):
    return init_model(tiny_cfg, seed=0)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


def train_sentencepiece(path, vocab_size: int = 512) -> None:
    """A real SentencePiece BPE model (PaliGemma's ids: pad 0, eos 1, bos 2, unk 3), ~0.2 s."""
    import random

    import sentencepiece as spm

    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 8)))
             for _ in range(3000)]
    lines = ["pick up the red cube", "Task: open the drawer, State: 0 128 255;\nAction: "]
    lines += [" ".join(rng.choice(words) for _ in range(12)) for _ in range(500)]
    with open(path, "wb") as f:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=f,
                                       vocab_size=vocab_size, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
                                       minloglevel=2, model_type="bpe")


def fake_hf_cache(hf_home, repo_id: str, files: dict) -> None:
    """The hub cache layout huggingface_hub writes: models--org--name/{refs/main, snapshots/REV/}."""
    rev = "0123456789abcdef0123456789abcdef01234567"
    repo = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True, exist_ok=True)
    for name, src in files.items():
        (snap / name).write_bytes(src.read_bytes())


@pytest.fixture
def sp_model(tmp_path):
    path = tmp_path / "sp" / "tokenizer.model"
    path.parent.mkdir()
    train_sentencepiece(path, 512)
    return path


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPENPI_DATA_HOME", str(tmp_path / "openpi_home"))
    return home


@pytest.fixture
def add_to_hf_cache(hf_home):
    return lambda repo_id, files: fake_hf_cache(hf_home, repo_id, files)


@pytest.fixture
def sp_trainer():
    return train_sentencepiece


def qwen3vl_pair(mc):
    """transformers' Qwen3VLForConditionalGeneration for ``mc``'s backbone with every weight
    random (norm gains too) and our Qwen3VLModel holding them (its action experts as built)."""
    from transformers import Qwen3VLForConditionalGeneration

    from oxygen_ros.engine.families.qwen3vl.model import Qwen3VLModel
    from oxygen_ros.engine.families.qwen3vl.checkpoint import backbone_key, hf_config

    torch.manual_seed(0)
    hf = Qwen3VLForConditionalGeneration(hf_config(mc)).eval()
    with torch.no_grad():
        for p in hf.parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn_like(p))
    ours = Qwen3VLModel(mc).eval()
    sd = {backbone_key(k): v for k, v in hf.state_dict().items()}
    sd = {k: v for k, v in sd.items() if k and not (k.startswith("lm_head.") and ours.lm_head is None)}
    sd.update({k: v for k, v in ours.state_dict().items() if k.startswith("experts.")})
    ours.load_state_dict(sd, strict=True)
    return hf, ours.requires_grad_(False)


@pytest.fixture(scope="session")
def make_qwen3vl_pair():
    return qwen3vl_pair


# The layout of Qwen's chat template for user turns whose content is a list (images as
# <|vision_start|><|image_pad|><|vision_end|>, texts as they are, nothing between items; no
# system message), then the generation prompt: the reference our prompt ids are checked against.
QWEN_CHAT_TEMPLATE = (
    "{%- for m in messages -%}{{ '<|im_start|>' + m.role + '\\n' }}"
    "{%- for c in m.content -%}"
    "{%- if c.type == 'image' -%}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif c.type == 'text' -%}{{ c.text }}{%- endif -%}"
    "{%- endfor -%}{{ '<|im_end|>\\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}")
# xr0-tiny's chat-template ids 2048..2055 (ModelConfig.qwen), and 2056 (the StarVLA presets' OFT
# placeholder), as tokens of the tiny BPE's vocabulary
QWEN_TINY_SPECIALS = ("<|im_start|>", "<|im_end|>", "user", "assistant", "\n", "<|vision_start|>",
                      "<|vision_end|>", "<|image_pad|>", "<|oft|>")


# Qwen2/Qwen3's pre-tokenizer pattern (tokenizer.json: a Split of this regex, then byte-level):
# whitespace joins what follows it, so " \n" is one pre-token ("ĠĊ" in Qwen's vocabulary)
QWEN_PRETOKENIZE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def qwen_pretokenized_bpe(vocab_size: int = 2048):
    """A byte-level BPE with Qwen's pre-tokenizer, trained on the tiny corpus and prompts whose
    instruction ends in a space before a question's newline: its merges join "Ġ" and "Ċ".
    <pad>, <eos>, <bos> at 0..2, topped up with <unused_i> as the tiny BPE is."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    from oxygen_ros.engine.model.tokenizer import SPECIALS, _tiny_corpus

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    corpus = _tiny_corpus() + ["State: 1 2;\nAction: \nwhat happened?",
                               "Action: \nIs the cup on the left?"] * 4
    tok.train_from_iterator(corpus, trainer=trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=1, show_progress=False, special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.add_special_tokens([f"<unused_{i}>" for i in range(vocab_size - tok.get_vocab_size())])
    assert tok.get_vocab_size() == vocab_size and tok.token_to_id("ĠĊ") is not None
    return tok


def qwen_chat_tokenizer(vocab_size: int, qwen_merges: bool = False):
    """(our HFTokenizer, transformers' PreTrainedTokenizerFast) of the random presets' tiny BPE
    (2048 tokens; ``qwen_merges``: qwen_pretokenized_bpe's instead) with the chat template's
    tokens at the ids xr0-tiny's config gives them."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    from oxygen_ros.engine.model.tokenizer import HFTokenizer, build_tiny_tokenizer

    tok = qwen_pretokenized_bpe() if qwen_merges else build_tiny_tokenizer(2048).tok
    # Qwen's "\n" is a vocabulary token ('Ċ'), merged with the whitespace before it: with
    # qwen_merges id 2052 is a placeholder, and the template's ids come from its text
    specials = QWEN_TINY_SPECIALS if not qwen_merges else \
        tuple("<|nl|>" if s == "\n" else s for s in QWEN_TINY_SPECIALS)
    for name in specials[:vocab_size - 2048]:
        tok.add_tokens([AddedToken(name, special=name.startswith("<|"), normalized=False)])
    assert tok.get_vocab_size() == vocab_size and tok.token_to_id("<|image_pad|>") == 2055
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<pad>")
    return HFTokenizer(tok, None, tok.token_to_id("<|im_end|>"), 0), fast


def chat_template_ids(fast, num_images: int, image_tokens: int, texts: list[str],
                      template: str = QWEN_CHAT_TEMPLATE) -> list[int]:
    """The ids of one user turn holding ``num_images`` images then ``texts``, followed by the
    generation prompt: the chat template's text, each <|image_pad|> expanded to the image's
    merged tokens (what Qwen3VLProcessor does), tokenised as one string."""
    content = [{"type": "image"}] * num_images + [{"type": "text", "text": t} for t in texts]
    text = fast.apply_chat_template([{"role": "user", "content": content}],
                                    chat_template=template, add_generation_prompt=True,
                                    tokenize=False)
    text = text.replace("<|image_pad|>", "<|image_pad|>" * image_tokens)
    return fast(text, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="session")
def qwen_chat():
    return qwen_chat_tokenizer, chat_template_ids


@pytest.fixture(scope="session")
def qwen_chat_template():
    return QWEN_CHAT_TEMPLATE
