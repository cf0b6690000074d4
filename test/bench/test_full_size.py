"""oxygen-bench full-size's checkpoint writer (the benchmark itself runs for minutes and is no
test): LeRobot 0.6.1's bf16 layout at full size from the header alone, and the streamed file
read back by safetensors."""
import torch
from safetensors import safe_open

from oxygen_ros.bench.suite.full_size import lerobot_tensors, write_weights
from oxygen_ros.engine.model.checkpoint import LM_HEAD, PWE


def test_the_full_size_layout_is_lerobots_bf16_file():
    t = lerobot_tensors()
    size = {"F32": 4, "BF16": 2}
    nbytes = sum(torch.Size(s).numel() * size[d] for s, d in t.values())
    assert nbytes == 9_349_579_776  # the 9.35 GB a LeRobot 0.6.1 bf16 pi05 file holds
    assert t[LM_HEAD] == ((257152, 2048), "BF16")
    assert t[PWE + "gemma_expert.lm_head.weight"] == ((257152, 1024), "BF16")
    fp32 = {k for k, (_, d) in t.items() if d == "F32"}
    assert all("vision_tower" in k or "multi_modal_projector" in k or "layernorm" in k
               or k.endswith("norm.weight") or "norm.dense" in k for k in fp32)
    assert PWE + "paligemma.model.language_model.norm.weight" in fp32
    assert PWE + "paligemma.model.language_model.layers.0.self_attn.q_proj.weight" not in fp32


def test_streamed_weights_read_back(tmp_path):
    tensors = {"a.weight": ((300, 7), "BF16"), "b.norm.weight": ((5,), "F32"),
               "c.patch": ((4, 3, 2, 2), "F32")}
    path = tmp_path / "model.safetensors"
    data = write_weights(path, tensors, seed=1)
    assert data == 300 * 7 * 2 + 5 * 4 + 4 * 12 * 4
    with safe_open(str(path), framework="pt") as f:
        assert sorted(f.keys()) == sorted(tensors)
        a = f.get_tensor("a.weight")
        assert a.dtype == torch.bfloat16 and a.shape == (300, 7) and torch.isfinite(a).all()
        assert 0.2 < a.float().std() < 0.6  # ~ N(0, 1/fan_in), fan_in 7
        assert f.get_tensor("c.patch").shape == (4, 3, 2, 2)
