"""The Triton kernels' tests (triton_cases.py, triton_tiled_cases.py, triton_engine_cases.py) in
a process of their own with TRITON_INTERPRET=1: triton reads it when it is first imported and at
every launch, and a process that also imports triton without it (torch.compile does) breaks the
interpreter, so this run's own process never sets it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]


def test_triton_kernel_under_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1", OXYGEN_TRITON_DEVICE="cpu",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(HERE / "triton_cases.py"), str(HERE / "triton_tiled_cases.py"),
                           str(HERE / "triton_engine_cases.py")],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert " passed" in out and "skipped" not in out.splitlines()[-1], out[-2000:]
