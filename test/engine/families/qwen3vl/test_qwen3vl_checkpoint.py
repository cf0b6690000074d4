"""StarVLA checkpoints round-trip: a folder written as a user would (the backbone as transformers'
Qwen3VLForConditionalGeneration ``save_pretrained``, the heads in our expert file) loads as the
same ModelConfig (heads' kinds and configs, the prompt's OFT action queries), the same weights,
and an Engine frame giving the same chunk for every head; oxygen-inspect reports the heads; a
head file that does not fit its config is refused with the reason."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from oxygen_ros.cli.inspect_checkpoint import inspect
from oxygen_ros.engine.config import PRESETS, EngineConfig, head_names
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.qwen3vl.checkpoint import (EXPERT_CONFIG, EXPERT_FILE, init_qwen3vl,
                                                           load_qwen3vl_folder, save_qwen3vl_folder)
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer
from oxygen_ros.robot.build import ModelSource, build_engine

MC = PRESETS["starvla-tiny-e4"]  # PI_v3 + GR00T + OFT on xr0-tiny's backbone
TOKENIZER = build_tiny_tokenizer(2048)  # the random presets' vocabulary, shared by both engines


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """starvla-tiny-e4 with random weights, and its folder written by save_qwen3vl_folder."""
    model = init_qwen3vl(MC, seed=3)
    folder = tmp_path_factory.mktemp("starvla")
    save_qwen3vl_folder(model, folder)
    TOKENIZER.save(folder)  # a real folder holds its processor's tokenizer.json beside config.json
    return model, folder


CFG = EngineConfig(mode="oxygen", decode_steps_per_frame=1, max_decode_steps=2, denoise_steps=4,
                   max_active_requests=2)


def _frame_chunks(engine) -> dict[str, np.ndarray]:
    return engine.step(SyntheticStream(MC, num_joints=7).frame(0)).chunks


def test_folder_is_a_transformers_backbone_plus_our_head_files(saved):
    from transformers import Qwen3VLForConditionalGeneration

    _, folder = saved
    assert json.loads((folder / "config.json").read_text())["model_type"] == "qwen3_vl"
    assert (folder / EXPERT_FILE).is_file() and (folder / EXPERT_CONFIG).is_file()
    hf = Qwen3VLForConditionalGeneration.from_pretrained(folder)  # transformers reads it back
    assert hf.config.text_config.num_hidden_layers == MC.depth


def test_starvla_folder_loads_as_the_same_model_and_frame(saved):
    model, folder = saved
    mc, loaded = load_qwen3vl_folder(folder)
    assert mc == MC  # heads' kinds and head configs, action queries, name, every field
    assert [e.kind for e in mc.action_experts] == ["hidden-crossattn", "hidden-crossattn",
                                                   "regress"]
    assert mc.qwen.action_query_ids == (2056,) * 9
    want = model.state_dict()
    got = loaded.state_dict()
    assert set(got) == set(want)
    for k, v in want.items():
        assert torch.equal(got[k], v), k
    # the node's model.checkpoint / oxygen-demo's --checkpoint: robot.build.build_engine
    built = build_engine(ModelSource(checkpoint=str(folder)), CFG)
    assert built.engine.model_config == MC and built.tokenizer_source == str(folder)
    assert built.camera_keys == ("camera0", "camera1") and built.norm is None
    ref = _frame_chunks(Engine(MC, CFG, model=model, tokenizer=TOKENIZER))
    out = _frame_chunks(built.engine)
    assert tuple(out) == tuple(ref) == head_names(MC) == ("pi_v3", "gr00t", "oft")
    for name in ref:
        np.testing.assert_array_equal(out[name], ref[name], err_msg=name)


def test_oxygen_inspect_reports_the_heads(saved):
    _, folder = saved
    report = inspect(folder)
    assert report["format"] == "qwen3vl" and not report["problems"], report
    assert report["model"].startswith("starvla-tiny-e4:")
    heads = report["heads"]
    assert [h.split(":")[0] for h in heads] == ["pi_v3", "gr00t", "oft"]
    assert "hidden-crossattn" in heads[0] and "16 x 7" in heads[0] and "regress" in heads[2]
    assert "tensors match" in report["action_expert"]
    assert report["tokenizer"].startswith(str(folder))


def _copy(folder, dst):
    dst.mkdir()
    for f in folder.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_a_head_file_that_does_not_fit_its_config_is_refused(saved, tmp_path):
    _, folder = saved
    # the JSON of an E = 3 model beside E = 4 weights: OFT's tensors (experts.2) are unexpected
    e3 = _copy(folder, tmp_path / "e3")
    spec = json.loads((e3 / EXPERT_CONFIG).read_text())
    spec["action_experts"] = spec["action_experts"][:2]
    (e3 / EXPERT_CONFIG).write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=r"unexpected .*16 tensor\(s\) of experts\.2\.\*"):
        load_qwen3vl_folder(e3)
    assert any("experts.2." in p for p in inspect(e3)["problems"])
    # a GR00T head (experts.1) 64 wide in the JSON, 96 in the file: the shapes are named
    wide = _copy(folder, tmp_path / "wide")
    spec = json.loads((wide / EXPERT_CONFIG).read_text())
    spec["action_experts"][1]["width"] = 64
    (wide / EXPERT_CONFIG).write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=r"experts\.1\..*shape \(.*96.*\) in the file"):
        load_qwen3vl_folder(wide)
    assert any("experts.1." in p and "shape" in p for p in inspect(wide)["problems"])
    # a tensor missing from the head file
    gone = _copy(folder, tmp_path / "gone")
    tensors = load_file(str(gone / EXPERT_FILE))
    tensors.pop(next(k for k in tensors if k.startswith("experts.0.")))
    save_file(tensors, str(gone / EXPERT_FILE))
    with pytest.raises(ValueError, match=r"missing 1 tensor\(s\) of experts\.0\.\*"):
        load_qwen3vl_folder(gone)
    # an OFT head whose prompt lost its action queries: refused, not a different prompt
    noq = _copy(folder, tmp_path / "noq")
    spec = json.loads((noq / EXPERT_CONFIG).read_text())
    spec["qwen"]["action_query_ids"] = []
    (noq / EXPERT_CONFIG).write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="action_query_ids"):
        load_qwen3vl_folder(noq)
    assert any("action_query_ids" in p for p in inspect(noq)["problems"])
    # no tokenizer beside the weights: refused before a weight is read, never a made-up one
    notok = _copy(folder, tmp_path / "notok")
    (notok / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match="no tokenizer found"):
        build_engine(ModelSource(checkpoint=str(notok)), CFG)
    assert inspect(notok)["tokenizer"] == "NOT FOUND"
