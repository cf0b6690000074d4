"""oxygen-bench --quick on the tiny preset: report, JSON rows with the required fields, PNGs,
and one JSON object on the last stdout line."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

ROW_FIELDS = {"preset", "group", "mode", "k", "N", "S", "action_hz", "tokens_per_s",
              "frame_ms_mean", "frame_ms_p50", "frame_ms_p99", "stage_ms", "mean_batch",
              "kv_peak_bytes", "kv_ms", "kv_share", "rss_peak_bytes", "cuda_peak_bytes",
              "energy_j_per_request", "predicted_own_ms", "predicted_own_error"}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "oxygen_ros.bench.cli", "--quick", "--threads", "1",
                           "--out", str(out), "--json"], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def test_last_line_is_json(quick):
    _, proc = quick
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["runs"] > 0 and "targets" in summary
    assert set(summary["targets"].values()) <= {"pass", "fail", "skip", "info"}
    assert "latency_within_10pct_of_prediction" in summary["targets"]


def test_results_json(quick):
    out, _ = quick
    res = json.loads((out / "results.json").read_text())
    assert {"env", "args", "rows", "decode_micro", "targets"} <= set(res)
    assert res["env"]["torch"] and res["env"]["cpu"]
    grid = [r for r in res["rows"] if r["group"] == "grid"]
    assert {r["mode"] for r in grid} == {"isolated", "parallel", "shared", "oxygen"}
    for r in grid:
        assert ROW_FIELDS <= set(r), ROW_FIELDS - set(r)
        assert set(r["stage_ms"]) >= {"vision_prefill", "denoise", "decode", "kv"}
        assert r["action_hz"] > 0 and r["frame_ms_p99"] >= r["frame_ms_p50"] > 0
        assert r["kv_peak_bytes"] > 0
    ox = [r for r in grid if r["mode"] == "oxygen"]
    assert all("speedup" in r and "oracle_speedup" in r for r in ox)
    assert all(r["k"] is None for r in grid if r["mode"] != "oxygen")
    pats = {r["group"] for r in res["rows"] if r["group"].startswith("pattern:")}
    assert pats == {"pattern:per_frame", "pattern:bursty", "pattern:poisson", "pattern:sparse"}
    fl = [r for r in res["rows"] if r["group"] == "fluctuating"]
    assert len(fl) == 1 and len(fl[0]["trace"]["kv_bytes"]) == 40
    assert "1" in res["decode_micro"]["tiny"]["ms_per_step"]
    # same arrivals in every mode of a pattern
    for p in pats:
        arr = [r["trace"]["arrivals"] for r in res["rows"] if r["group"] == p]
        assert all(a == arr[0] for a in arr)


def test_report_and_plots(quick):
    out, _ = quick
    md = (out / "report.md").read_text()
    for heading in ("## Targets", "latency breakdown", "Cross-setting speedups", "KV-manager overhead",
                    "Memory and energy", "Arrival patterns", "Fluctuating workload"):
        assert heading in md
    pngs = {p.name for p in out.glob("*.png")}
    assert {"pareto_tiny.png", "heatmap_S_k_tiny.png", "heatmap_S_N_tiny.png",
            "arrival_patterns.png", "fluctuating.png"} <= pngs
    for name in pngs:
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
        assert f"({name})" in md
