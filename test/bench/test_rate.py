"""oxygen-bench rate on the tiny preset: the table and JSON rows a user gets, with
an impossible target reported as infeasible (the bench is a benchmark: no wall-clock goal here)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_rate_bench_rows_and_table():
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "oxygen_ros.cli.bench", "rate", "--preset", "tiny",
                           "--targets", "20,9000", "--k-max", "6", "--N", "9", "--frames", "6",
                           "--warmup", "6", "--threads", "1", "--json"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    rows = json.loads(lines[-1])
    assert [r["target_hz"] for r in rows] == [20.0, 9000.0]
    for r in rows:
        assert r["frames"] == 6 and 1 <= r["k_min_seen"] <= r["k_max_seen"] <= 6
        assert 0.0 <= r["over_budget_share"] <= 1.0 and r["over_budget_max_ms"] >= 0.0
        # requests of N=9 tokens at k <= 6 take 2+ frames: some finish inside the measured ones
        assert r["requests_done"] > 0 and r["request_s_p50"] > 0.0
    assert rows[1]["status"] == "infeasible" and rows[1]["feasible_share"] == 0.0
    assert rows[1]["over_budget_share"] == 1.0  # every tiny frame takes more than 111 us
    assert any(line.startswith("| target Hz") and "frames over 1/target" in line
               and "request s (p50)" in line for line in lines)
    assert any(line.startswith("[") and "action_rate_target_within_10pct" in line for line in lines)


def test_targets_the_engine_would_refuse_are_refused_at_the_cli():
    from oxygen_ros.bench.suite.rate import main

    for bad in ("20000", "0", "2,x", "nan"):
        with pytest.raises(SystemExit) as exc:
            main(["--targets", bad])
        assert exc.value.code == 2
