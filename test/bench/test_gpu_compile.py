"""bench/suite/gpu_compile.py (oxygen-bench gpu-compile): the engine's Triton kernels compiled ahead of time for Hopper (sm_90) and
Thor (sm_110) with no GPU and no driver (triton's bundled ptxas), resources read back. Run in a
process of its own (as CI's other Triton tests) so no interpreter setting leaks in either way;
triton's cache makes a second run take seconds."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oxygen_ros.bench.suite.gpu_compile import MAX_SHARED, Result, attention_shapes
from oxygen_ros.engine.config import PRESETS

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=timeout)


def test_engine_kernels_compile_for_sm90_and_sm110_without_spills(tmp_path):
    """The representative set: pi0.5's shape (8 query heads on 1 KV head of 256, the largest
    head dim) in bf16, every launch configuration of it (per-query single pass and split,
    combines, query-tiled). Every preset and target, fp16 and float32:
    benchmarks/results/gpu-compile/ (the suite's time allows this much)."""
    out = tmp_path / "r.json"
    proc = _run("-m", "oxygen_ros.cli.bench", "gpu-compile", "--arch", "sm_90,sm_110",
                "--dtype", "bfloat16", "--presets", "pi05", "--json", str(out))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    rows = json.loads(out.read_text())
    assert {r["arch"] for r in rows} == {"sm_90", "sm_110"}
    assert {r["kernel"] for r in rows} == {"attend", "attend_tiled", "combine"}
    for r in rows:
        assert r["error"] is None and r["spill_bytes"] == 0, r
        assert 0 < r["registers"] <= 255 and 0 < r["shared_bytes"] <= MAX_SHARED, r
    assert "all compile, no spills" in proc.stdout and "| sm_110 | bfloat16 | pi05 |" in proc.stdout


def test_a_spilling_tile_is_caught():
    """A float32 tile four times the chosen one (64 rows x 256 dims, the bf16 row count) spills:
    the check the tool relies on sees it (cuobjdump's local memory and stack)."""
    code = ("import torch\n"
            "from oxygen_ros.bench.suite.gpu_compile import compile_one, spill_bytes\n"
            "from oxygen_ros.engine.runner.attention.triton_paged import tiled_launch\n"
            "big = tiled_launch(8, 1, 256, 16, torch.float32, block_m=8, block_n=32)\n"
            "print(spill_bytes(compile_one(90, big, torch.float32)[0]))\n")
    proc = _run("-c", code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split()[-1]) > 1000


def test_shapes_and_verdicts():
    assert attention_shapes("pi05") == [(8, 1, 256)]
    assert attention_shapes("tiny") == [(PRESETS["tiny"].num_heads, 1, 32)]
    assert all(d == 128 for _, _, d in attention_shapes("xr0"))
    assert (32, 8, 128) in attention_shapes("xr0")
    with pytest.raises(ValueError, match="unknown preset"):
        attention_shapes("nope")
    ok = Result("sm_90", "bfloat16", "pi05", "attend", "", 4, 144, 0, 42112)
    assert ok.failed() is None
    assert Result("sm_90", "float32", "pi05", "attend", "", 4, 255, 704, 1).failed() == "spills"
    assert Result("sm_90", "bfloat16", "p", "k", "", 4, error="x").failed() == "compile failed"
    assert Result("sm_90", "bfloat16", "p", "k", "", 4, 1, 0, MAX_SHARED + 1).failed() == \
        "shared memory"
