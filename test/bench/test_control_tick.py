"""oxygen-bench control-tick on the tiny preset: every tick of an 8-joint robot (the preset's action size) sends a command
and the printed costs are measured (the bench is a benchmark: no CPU-time goal here)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros
pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

REPO = Path(__file__).resolve().parents[2]


def test_control_tick_bench_sends_a_command_every_tick():
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "oxygen_ros.cli.bench", "control-tick",
                           "--preset", "tiny", "--joints", "8", "--ticks", "200"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    m = re.search(r"8 joints, 200 ticks, (\d+) commands sent: ([\d.]+) us CPU per tick, of which "
                  r"the joint-state take ([\d.]+) us", proc.stdout)
    assert m, proc.stdout
    sent, tick_us, take_us = int(m[1]), float(m[2]), float(m[3])
    assert sent == 200
    assert 0.0 < take_us < tick_us
