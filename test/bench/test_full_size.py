"""oxygen-bench full-size's checkpoint writer (the benchmark itself runs for minutes and is no
test): LeRobot 0.6.1's bf16 layout at full size from the header alone, and the streamed file
read back by safetensors."""
import torch
from safetensors import safe_open

from oxygen_ros.bench.suite.full_size import lerobot_tensors, write_weights
from oxygen_ros.engine.families.pi05.checkpoint import LM_HEAD, PWE


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


def _result(**changes) -> dict:
    gib = 2 ** 30
    r = {"via": "node", "threads": 1, "params": 3_353_433_872, "param_bytes": 7 * gib,
         "param_dtypes": ["torch.bfloat16"], "kv_pool_bytes": gib // 4, "max_active_requests": 32,
         "peak_rss": int(8.0 * gib), "peak_over_param_bytes": 8.0 / 7, "rss_before": gib // 2,
         "peak_rss_configure": int(7.9 * gib), "configure_s": 50.0, "load_s": 30.0,
         "warmup_s": 20.0, "warmup_note": "warmup: one reduced frame", "first_chunk_s": 55.0,
         "chunk_points": 50, "chunk_joints": ["j"] * 7, "actions_finite": True, "step_errors": 0}
    r.update(changes)
    return r


def test_report_of_the_node_run():
    from oxygen_ros.bench.suite.full_size import report

    lines, met = report(_result(), {}, 120.0)
    assert met and lines[0].startswith("the lifecycle node")
    assert "1.14x the parameter bytes: within 1.2x" in lines[3]
    assert "50.0 s: load 30.0 s, warmup 20.0 s: under a minute" in lines[4]
    assert lines[5] == "warmup          warmup: one reduced frame"
    assert "55.0 s after activate: 50 points x 7 joints" in lines[6]
    # each goal missed on its own fails the run
    assert not report(_result(first_chunk_s=None, actions_finite=False), {}, 1.0)[1]
    assert not report(_result(configure_s=60.0), {}, 1.0)[1]
    assert not report(_result(peak_over_param_bytes=1.21), {}, 1.0)[1]


def test_report_of_the_build_path():
    from oxygen_ros.bench.suite.full_size import report

    r = _result(via=None, frame_s=[54.3], peak_rss_before_warmup=int(7.8 * 2 ** 30))
    lines, met = report(r, {"max_active_requests": 4}, 100.0)
    assert met and lines[0].startswith("node build path (node/build.build, cpu, bfloat16, 1 "
                                       "threads, max_active_requests 4)")
    assert "7.80 GiB when the weights were read" in lines[3] and lines[6].startswith("frames          54.3 s")
