"""bench/profile.py: the stage-cost, KV replay and linear-layout micro-benchmarks run and return
sane numbers (values are machine-dependent; only their structure and signs are checked)."""
from __future__ import annotations

import json

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.core.kv import KVManager
from oxygen_ros.bench.profile import action_path_ms, kv_replay, linear_layouts
from oxygen_ros.bench.suite.profile import main
from oxygen_ros.engine.core.synthetic import SyntheticStream


def test_kv_replay_counts_every_frame_and_replays_the_calls():
    engine = Engine(PRESETS["tiny"], EngineConfig(mode="oxygen", decode_steps_per_frame=1,
                                                  max_decode_steps=4, memory_every_n_frames=0))
    r = kv_replay(engine, frames=6, repeats=2)
    assert r["frames"] == 6 and engine.frame == 6
    # per frame at least: prefix create+append, scratch create+append+free, a request's fork
    assert r["calls_per_frame"] >= 6
    assert r["in_frame_us"] > 0 and r["replayed_us"] > 0 and r["frame_ms"] > 0
    # the engine and its scheduler talk to the manager itself again afterwards
    assert type(engine.kv.inner) is KVManager and engine.scheduler.kv is engine.kv
    assert engine.step(SyntheticStream(PRESETS["tiny"]).frame(6)).frame == 6  # still serving


def test_linear_layouts_times_both_layouts():
    r = linear_layouts(32, 64, tokens=(1, 3), repeats=2)
    assert set(r) == {"standard_m1_ms", "transposed_m1_ms", "standard_m3_ms", "transposed_m3_ms"}
    assert all(v > 0 for v in r.values())


def test_cli_linear_and_kv(capsys):
    assert main(["--linear", "--preset", "tiny", "--repeats", "2"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["width"] == PRESETS["tiny"].vlm.width and out["standard_over_transposed_m1"] > 0
    assert main(["--kv", "--preset", "tiny", "--N", "4", "--frames", "3", "--repeats", "1"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["frames"] == 3 and 0 < out["replayed_share"] and 0 < out["in_frame_share"]


def test_action_path_of_a_starvla_model_times_every_head():
    """oxygen-bench's stage micro-benchmark runs the frame's whole action stage (each StarVLA
    head in turn), not the kv-layerwise denoise a StarVLA head does not have."""
    engine = Engine(PRESETS["starvla-tiny-e4"], EngineConfig(denoise_steps=2))
    prefill, denoise = action_path_ms(engine, [2], repeats=1)
    assert prefill > 0 and set(denoise) == {2} and denoise[2] > 0
