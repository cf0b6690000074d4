import json
import subprocess
import sys

import numpy as np
import pytest

from oxygen_ros.engine.model import discretize_state, format_prompt
from oxygen_ros.engine.tokenizer import build_tiny_tokenizer, load_tokenizer

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
    code = ("from oxygen_ros.engine.tokenizer import build_tiny_tokenizer;"
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
