import json
import subprocess
import sys

import numpy as np
import pytest

from oxygen_ros.engine.model import discretize_state, format_prompt
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer, load_tokenizer

TEXT = "Task: pick up the red cube, State: 0 128 255;\nAction: "


def test_prompt_exact_string_unclipped_unpadded():
    # bin k covers [-1 + 2k/256, -1 + 2(k+1)/256); below -1 is bin -1, from 1 - 2/256 up is 255
    state = [-1.0, 0.0, 0.999, 1.0, -0.99, 0.5, 3.0, -7.0, -1.0000001, 0.9921875, 0.99218, -0.0078125]
    assert format_prompt("  pick_up the\ncube ", state) == (
        "Task: pick up the cube, State: 0 128 255 255 1 192 255 -1 -1 255 254 127;\nAction: ")
    # exactly state_dim values: nothing is padded to max_state_dim
    assert format_prompt("go", [1.0]) == "Task: go, State: 255;\nAction: "
    # a float32 state (what the node hands over) bins like upstream's float32 tensor
    assert format_prompt("go", np.array([-1.0000001, 0.5], np.float32)) == "Task: go, State: -1 192;\nAction: "


def test_discretize_matches_upstream_formula_everywhere():
    s = np.concatenate([np.linspace(-3, 3, 2001), np.linspace(-1, 1, 257)]).astype(np.float32)
    expected = np.digitize(s, bins=np.linspace(-1, 1, 257)[:-1]) - 1
    np.testing.assert_array_equal(discretize_state(s), expected)
    assert discretize_state(s).min() == -1 and discretize_state(s).max() == 255


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_state_raises(bad):
    with pytest.raises(ValueError, match="joint 2"):
        format_prompt("x", [0.0, 0.1, bad, 0.3])


def test_tiny_tokenizer_specials_size_round_trip(tmp_path):
    for size in (512, 2048):
        tok = build_tiny_tokenizer(size)
        assert (tok.pad_id, tok.eos_id, tok.bos_id, tok.vocab_size) == (0, 1, 2, size)
    tok = build_tiny_tokenizer(512)
    ids = tok.encode(TEXT, add_bos=True)
    assert ids[0] == 2 and 2 not in ids[1:] and max(ids) < 512
    assert len(ids) < len(TEXT) / 2  # BPE merges actually compress
    assert tok.decode(ids) == TEXT
    tok.save(tmp_path)
    again = load_tokenizer(tmp_path)
    assert again.encode(TEXT, add_bos=True) == ids and again.decode(ids) == TEXT
    assert (again.pad_id, again.eos_id, again.bos_id, again.vocab_size) == (0, 1, 2, 512)


def test_tiny_tokenizer_deterministic_across_processes():
    code = ("from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer;"
            "print(build_tiny_tokenizer(512).tok.to_str())")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1] == build_tiny_tokenizer(512).tok.to_str() + "\n"
    assert len(json.loads(runs[0])["model"]["merges"]) > 200


def test_sentencepiece_model_loads(tmp_path):
    import sentencepiece as spm

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join([TEXT, "pick up the cube", "open the drawer", "place it on the plate"] * 50))
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "tokenizer"),
                                   vocab_size=40, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
                                   minloglevel=2)
    tok = load_tokenizer(tmp_path)
    assert (tok.pad_id, tok.eos_id, tok.bos_id) == (0, 1, 2)
    ids = tok.encode("pick up the cube", add_bos=True)
    assert ids[0] == 2 and tok.decode(ids) == "pick up the cube"


def test_load_tokenizer_missing(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_tokenizer(tmp_path)


# ---- finding the tokenizer a checkpoint was trained with ----------------------------------------
from oxygen_ros.engine.model.tokenizer import (HOW_TO, check_vocab, find_tokenizer,  # noqa: E402
                                         load_tokenizer_spec)


def test_spec_file_folder_and_json_forms(sp_model, tmp_path):
    sp_tok, src = load_tokenizer_spec(sp_model)
    assert src == str(sp_model) and sp_tok.vocab_size == 512
    ids = sp_tok.encode("pick up the red cube", add_bos=True)
    assert ids[0] == 2 and sp_tok.decode(ids) == "pick up the red cube"
    assert load_tokenizer_spec(sp_model.parent)[0].encode("pick up") == sp_tok.encode("pick up")
    build_tiny_tokenizer(512).save(tmp_path / "bpe")
    json_tok, _ = load_tokenizer_spec(tmp_path / "bpe" / "tokenizer.json")
    assert json_tok.vocab_size == 512 and json_tok.decode(json_tok.encode(TEXT)) == TEXT
    assert load_tokenizer_spec(str(tmp_path / "bpe"))[0].encode(TEXT) == json_tok.encode(TEXT)
    with pytest.raises(ValueError, match="neither an existing file or folder nor a repo id"):
        load_tokenizer_spec(str(tmp_path / "nope" / "x" / "y"))


def test_spec_repo_id_from_local_hf_cache_only(sp_model, hf_home, add_to_hf_cache):
    with pytest.raises(ValueError) as err:
        load_tokenizer_spec("acme/robot-tok")
    assert str(hf_home / "hub") in str(err.value) and "model.tokenizer" in str(err.value)
    add_to_hf_cache("acme/robot-tok", {"tokenizer.model": sp_model})
    tok, src = load_tokenizer_spec("acme/robot-tok")
    assert "acme/robot-tok" in src and tok.vocab_size == 512
    assert tok.encode("open the drawer") == load_tokenizer_spec(sp_model)[0].encode("open the drawer")


def test_find_next_to_checkpoint_then_named_repo_then_refuse(sp_model, hf_home, add_to_hf_cache, tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    with pytest.raises(ValueError) as err:
        find_tokenizer(ckpt, ["google/paligemma-3b-pt-224"], openpi=True)
    msg = str(err.value)
    for looked in (str(ckpt), "google/paligemma-3b-pt-224", str(hf_home / "hub"), "openpi cache", HOW_TO):
        assert looked in msg, looked
    add_to_hf_cache("google/paligemma-3b-pt-224", {"tokenizer.model": sp_model})
    assert "paligemma" in find_tokenizer(ckpt, ["google/paligemma-3b-pt-224"])[1]
    build_tiny_tokenizer(512).save(ckpt)  # next to the checkpoint wins
    tok, src = find_tokenizer(ckpt, ["google/paligemma-3b-pt-224"])
    assert src == str(ckpt) and tok.decode(tok.encode(TEXT)) == TEXT


def test_openpi_cache_is_searched_for_openpi(sp_model, hf_home, tmp_path):
    dst = tmp_path / "openpi_home" / "big_vision" / "paligemma_tokenizer.model"
    dst.parent.mkdir(parents=True)
    dst.write_bytes(sp_model.read_bytes())
    assert find_tokenizer(tmp_path, [], openpi=True)[1] == str(dst)
    with pytest.raises(ValueError):
        find_tokenizer(tmp_path, [], openpi=False)


def test_vocab_must_fit_the_embedding(sp_model):
    tok, _ = load_tokenizer_spec(sp_model)
    check_vocab(tok, 512, "x")
    check_vocab(tok, 640, "x")  # an embedding padded up a little
    with pytest.raises(ValueError, match="512 tokens but the checkpoint's embedding has 257152 rows"):
        check_vocab(tok, 257152, "x")
    with pytest.raises(ValueError, match="has 512 tokens"):
        check_vocab(tok, 256, "x")


def _qwen_like_tokenizer(folder):
    """A tokenizer.json shaped like Qwen's: byte-level BPE, <|endoftext|> / <|im_start|> /
    <|im_end|> specials, and a tokenizer_config.json declaring no BOS (bos_token null)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    numbers = " ".join(str(i) for i in range(-1, 256))  # the state's bins tokenise short
    tok.train_from_iterator([TEXT, "what happened? the robot moved the cup", numbers] * 20,
                            trainers.BpeTrainer(vocab_size=1000, special_tokens=specials,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}))
    return tok


def test_a_tokenizer_without_bos_serves_qwen_models_and_is_refused_by_pi05(tmp_path):
    """Qwen's tokenizers have no BOS: they load (bos_id None, eos <|im_end|>, pad <|endoftext|>),
    a Qwen3-VL engine serves a frame with one (its prompts never start with a BOS), and a pi0.5
    engine, whose prompts do, refuses it when it is built."""
    from oxygen_ros.engine.config import PRESETS, EngineConfig
    from oxygen_ros.engine.core.engine import Engine
    from oxygen_ros.engine.core.synthetic import SyntheticStream

    raw = _qwen_like_tokenizer(tmp_path / "qwen")
    tok = load_tokenizer(tmp_path / "qwen")
    assert tok.bos_id is None
    assert (tok.eos_id, tok.pad_id) == (raw.token_to_id("<|im_end|>"), raw.token_to_id("<|endoftext|>"))
    assert tok.decode(tok.encode(TEXT)) == TEXT
    with pytest.raises(ValueError, match="no BOS"):
        tok.encode(TEXT, add_bos=True)
    with pytest.raises(ValueError, match="starts its prompts with a BOS"):
        Engine(PRESETS["tiny"], EngineConfig(), tokenizer=tok)
    mc = PRESETS["xr0-tiny"]
    engine = Engine(mc, EngineConfig(denoise_steps=2, max_decode_steps=3, decode_steps_per_frame=3),
                    tokenizer=tok)
    out = engine.step(SyntheticStream(mc).frame(0))
    assert np.isfinite(out.actions).all() and any(u.is_final for u in out.updates)


def test_added_special_token_past_the_rows_is_accepted_and_said(image_token_tokenizer):
    """PaliGemma's tokenizer.json as transformers writes it holds <image> at id 257152 of 257152
    rows: an added special token ordinary text never yields, so the tokenizer fits; a token of
    its vocabulary past the rows (any text could yield it) does not."""
    from oxygen_ros.engine.model.tokenizer import describe_vocab, uncovered_reason

    tok, _ = load_tokenizer_spec(image_token_tokenizer)
    assert tok.vocab_size == 513 and tok.encode("<image>") == [512]
    check_vocab(tok, 512, "x")
    assert uncovered_reason(tok, 512) is None
    said = describe_vocab(tok, 512)
    assert "513 tokens" in said and "<image> (id 512)" in said and "never emitted" in said
    with pytest.raises(ValueError, match=r"has 513 tokens but the checkpoint's embedding has 500 "
                                         r"rows: 12 of them .*ordinary text"):
        check_vocab(tok, 500, "x")
