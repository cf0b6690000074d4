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
              "kv_peak_bytes", "kv_ms", "kv_share", "sched_ms", "sched_share", "kv_calls_ms",
              "kv_replayed_ms", "rss_peak_bytes", "cuda_peak_bytes",
              "energy_j_per_request", "predicted_ms", "predicted_error"}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "oxygen_ros.cli.bench", "--quick", "--threads", "1",
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
        assert set(r["stage_ms"]) >= {"vision_prefill", "denoise", "decode", "kv", "sched"}
        assert r["action_hz"] > 0 and r["frame_ms_p99"] >= r["frame_ms_p50"] > 0
        assert r["kv_peak_bytes"] > 0 and r["kv_ms"] > 0 and r["sched_ms"] > 0
        if r["mode"] == "oxygen":  # its KV calls were recorded and replayed
            assert 0 < r["kv_replayed_ms"] and 0 < r["kv_calls_ms"] <= r["kv_ms"] * 1.5
        else:
            assert r["kv_replayed_ms"] is None
    ox = [r for r in grid if r["mode"] == "oxygen"]
    assert all("speedup" in r and "oracle_speedup" in r for r in ox)
    assert all(r["k"] is None for r in grid if r["mode"] != "oxygen")
    pats = {r["group"] for r in res["rows"] if r["group"].startswith("pattern:")}
    assert pats == {"pattern:per_frame", "pattern:bursty", "pattern:poisson", "pattern:sparse"}
    fl = [r for r in res["rows"] if r["group"] == "fluctuating"]
    assert len(fl) == 1 and len(fl[0]["trace"]["kv_bytes"]) == 40
    micro = res["decode_micro"]["tiny"]
    assert "1" in micro["ms_per_step"] and micro["prefill_ms"] > 0
    assert set(micro["denoise_ms"]) == {str(r["S"]) for r in res["rows"]}
    # every run's latency is predicted from those micro-benchmarks
    assert all(r["predicted_ms"] > 0 and r["predicted_error"] >= 0 for r in grid)
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
    assert "## Frame profiles" in md
    t4 = (out / "table4.md").read_text()  # the paper's Table 4 layout of the grid preset
    assert t4.startswith("Table 4 layout, preset tiny") and "| 10 |" in t4
    for mode in ("isolated", "parallel", "shared", "oxygen"):  # one per mode, linked
        assert (out / f"profile_tiny_{mode}.txt").read_text().startswith(f"# one {mode} frame")
        assert f"(profile_tiny_{mode}.txt)" in md
    pngs = {p.name for p in out.glob("*.png")}
    assert {"pareto_tiny.png", "heatmap_S_k_tiny.png", "heatmap_S_N_tiny.png",
            "arrival_patterns.png", "fluctuating.png"} <= pngs
    for name in pngs:
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
        assert f"({name})" in md


def _row(mode: str, k, hz: float, tps: float) -> dict:
    return {"preset": "pi05", "group": "grid", "mode": mode, "k": k, "N": 30, "S": 10,
            "action_hz": hz, "tokens_per_s": tps}


def test_pi05_targets_from_rows():
    from oxygen_ros.bench.report import gpu_targets

    def targets(rows):
        return {t["name"]: t for t in gpu_targets(rows)}

    t = targets([_row("isolated", None, 20.0, 600.0), _row("oxygen", 1, 130.0, 3900.0),
                 _row("oxygen", 10, 60.0, 1800.0)])
    assert t["pi05_6x_isolated"]["status"] == "pass"  # 130 / 20 = 6.5x
    assert t["pi05_100hz_with_400_tokens_per_s"]["status"] == "pass"
    assert t["pi05_100hz_with_400_tokens_per_s"]["values"]["settings"] == ["pi05 oxygen k=1 N=30 S=10"]
    t = targets([_row("isolated", None, 20.0, 600.0), _row("oxygen", 1, 110.0, 300.0)])
    assert t["pi05_6x_isolated"]["status"] == "fail"  # 5.5x
    assert t["pi05_100hz_with_400_tokens_per_s"]["status"] == "fail"  # tokens/s too low
    assert targets([])["pi05_6x_isolated"]["status"] == "skip"


def test_gpu_script_dry_run(tmp_path):
    """benchmarks/gpu.sh end to end on this CPU (the compile check for sm_90, tiny preset, the
    Triton kernels under the interpreter and their micro-benchmark, the decode-graph stand-in,
    the reference attention in the bench, a nominal bandwidth, the psutil stand-in, no plots):
    its steps, fall-backs and report work before device time is spent on it."""
    env = dict(os.environ, GPU_SH_DRY_RUN="1", OUT=str(tmp_path))
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu.sh")], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=1100)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    [out] = list(tmp_path.glob("cuda-dry-run-*"))
    assert "gpu.sh: done" in proc.stdout.strip().splitlines()[-1]
    summary = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith('{"out"')))
    assert summary["runs"] == 4 and summary["targets"]["pi05_6x_isolated"] == "skip"
    res = json.loads((out / "results.json").read_text())
    assert res["args"]["attention_backend"] == "reference" and res["args"]["no_plots"]
    assert res["floor"]["tiny"]["ratios"] and "Bandwidth floor" in (out / "report.md").read_text()
    attention = json.loads((out / "attention.json").read_text())
    frames = json.loads((out / "frames.json").read_text())
    assert attention["ok"] and {c["dtype"] for c in attention["cases"]} == {"float32", "bfloat16"}
    assert frames["ok"] and frames["same_tokens"] and frames["graph_sizes"]
    log = (out / "log.txt").read_text()
    assert "[PASS] attention" in log and "[PASS] frames" in log
    # the compile check runs first, then the kernel micro-benchmark (per-query vs tiled)
    assert log.index("1/5 Triton kernels compiled") < log.index("2/5") < log.index("3/5")
    assert "all compile, no spills" in (out / "gpu-compile.md").read_text()
    assert {c["kernel"] for c in attention["cases"]} == {"per-query", "tiled"}
    bench = (out / "attention-bench-0.txt").read_text()
    assert "denoise/triton-tiled" in bench and "suffix/triton-tiled" in bench

def test_frame_profile_reports_ops_and_keeps_engine_errors():
    import torch

    from oxygen_ros.bench.frame_profile import profile_frame

    w = torch.randn(64, 64)
    p = profile_frame(lambda: [torch.relu(w @ w) for _ in range(3)], cuda=False)
    assert p["wall_ms"] > 0 and p["ops"] >= 6 and "aten::mm" in p["table"]
    assert p["device_self_ms"] is None and p["kernel_launches"] is None

    def broken():
        raise RuntimeError("engine bug")
    with pytest.raises(RuntimeError, match="engine bug"):  # not swallowed as a profiler error
        profile_frame(broken, cuda=False)
