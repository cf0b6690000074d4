import json
import re

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from oxygen_ros.cli.inspect_checkpoint import main
from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.model import NormStats
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint, save_openpi_checkpoint
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer


@pytest.fixture(scope="module")
def model():
    return init_model(PRESETS["tiny"], seed=0)


def test_good_lerobot_checkpoint_exits_zero(model, tmp_path, capsys):
    stats = NormStats.quantiles(np.zeros(6), np.ones(6), -np.ones(6), np.ones(6))
    folder = save_lerobot_checkpoint(model, model.config, tmp_path / "c", norm_stats=stats,
                                     tokenizer=build_tiny_tokenizer(512))
    assert main([str(folder)]) == 0
    out = capsys.readouterr().out
    for part in ("(lerobot)", "observation.images.camera0", "6 / 6 values", "QUANTILES (lerobot), 6 dims",
                 "512 tokens", "tensors match", "OK: the node can serve"):
        assert part in out, part
    assert main([str(folder), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["params"] == sum(p.numel() for p in model.parameters()) and r["file_dtypes"] == {"F32": len(model.state_dict())}
    assert r["file_bytes"] == 4 * r["params"] and r["problems"] == []


def test_problems_exit_non_zero(model, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_hf"))
    monkeypatch.setenv("OPENPI_DATA_HOME", str(tmp_path / "empty_openpi"))
    folder = save_openpi_checkpoint(model, model.config, tmp_path / "o",
                                    {"state": {"q01": np.zeros(6), "q99": np.ones(6)},
                                     "actions": {"q01": np.zeros(6), "q99": np.ones(6)}})
    assert main([str(folder)]) == 1  # no tokenizer anywhere
    out = capsys.readouterr().out
    assert "(openpi)" in out and "NOT FOUND" in out and "model.tokenizer" in out and "QUANTILES (openpi)" in out
    build_tiny_tokenizer(512).save(tmp_path / "tok")
    assert main([str(folder), "--tokenizer", str(tmp_path / "tok")]) == 0
    capsys.readouterr()
    sd = load_file(str(folder / "model.safetensors"))
    sd["action_in_proj.weight"] = sd["action_in_proj.weight"][:, :3].contiguous()
    del sd["time_mlp_in.bias"]
    save_file(sd, str(folder / "model.safetensors"))
    assert main([str(folder), "--tokenizer", str(tmp_path / "tok")]) == 1
    out = capsys.readouterr().out
    assert "missing 1" in out and "model.time_mlp_in.bias" in out and "wrong shape 1" in out
    assert main([str(tmp_path / "nothing")]) == 1
    assert "config.json not found" in capsys.readouterr().out


def test_tokenizer_with_an_added_token_past_the_rows_is_accepted(model, tmp_path, capsys,
                                                                 image_token_tokenizer):
    """oxygen-inspect accepts a PaliGemma-like tokenizer.json (<image> one past the embedding's
    512 rows) and says what it found."""
    stats = NormStats.quantiles(np.zeros(6), np.ones(6), -np.ones(6), np.ones(6))
    folder = save_lerobot_checkpoint(model, model.config, tmp_path / "c", norm_stats=stats)
    assert main([str(folder), "--tokenizer", str(image_token_tokenizer)]) == 0
    out = capsys.readouterr().out
    for part in ("513 tokens", "1 added token(s) past the embedding's 512 rows: <image> (id 512)",
                 "never emitted, refused in a prompt", "OK: the node can serve"):
        assert part in out, part


def test_file_bytes_count_every_tensor_in_the_file(model, tmp_path, capsys):
    """LeRobot stores the PaliGemma lm_head beside embed_tokens and the expert's lm_head, which
    pi0.5 never reads: "bytes in the file" counts them (they were 1.58 GB short at full size),
    and the report names them as not read."""
    folder = save_lerobot_checkpoint(model, model.config, tmp_path / "c",
                                     tokenizer=build_tiny_tokenizer(512))
    path = folder / "model.safetensors"
    sd = load_file(str(path))
    pwe = "model.paligemma_with_expert."
    emb = sd[pwe + "paligemma.model.language_model.embed_tokens.weight"]
    extra = {pwe + "paligemma.lm_head.weight": emb.clone(),
             pwe + "gemma_expert.lm_head.weight": torch.zeros(emb.shape[0], 8, dtype=torch.bfloat16)}
    save_file({**sd, **extra}, str(path))
    assert main([str(folder), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    header = int.from_bytes(path.read_bytes()[:8], "little")
    assert r["file_bytes"] == path.stat().st_size - 8 - header  # the data section, byte for byte
    assert r["unread"] == sorted(extra) and r["unread_bytes"] == sum(t.nbytes for t in extra.values())
    assert r["file_bytes"] == 4 * r["params"] + r["unread_bytes"]
    assert r["file_dtypes"] == {"F32": len(sd) + 1, "BF16": 1}
    assert main([str(folder)]) == 0
    assert re.search(r"^not read +2 tensor\(s\)", capsys.readouterr().out, re.M)
