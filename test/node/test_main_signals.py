"""cli/node.py: a second Ctrl-C while the node stops is quiet. The node process (autostart,
tiny model) gets SIGINT, then more SIGINTs every 0.2-0.5 s until it exits: exit status 0, no
traceback, no KeyboardInterrupt (before: a KeyboardInterrupt traceback from a finaliser during
the exit's garbage collection, or the process killed by SIGINT)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.ros
pytest.importorskip("rclpy")

from test_node_e2e import CONFIG, ROOT, _executable  # noqa: E402


def test_second_sigint_while_stopping_is_quiet(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p]])
    env["PYTHONUNBUFFERED"] = "1"
    log_path = tmp_path / "node.log"
    with open(log_path, "wb") as log:
        # SIGINT at its default disposition in the child, as from a terminal (a background job
        # of a non-interactive shell would start with it ignored)
        proc = subprocess.Popen(_executable() + ["--ros-args", "--params-file", str(CONFIG), "-p",
                                                 "model.num_threads:=1", "-p", "autostart:=true"],
                                env=env, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        t0 = time.monotonic()
        while b": activated" not in log_path.read_bytes():
            assert proc.poll() is None, log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() - t0 < 180, "node did not activate"
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        t1 = time.monotonic()
        for delay in [0.1] + [0.2] * 7 + [0.5] * 40:
            time.sleep(delay)
            if proc.poll() is not None or time.monotonic() - t1 > 30:
                break
            proc.send_signal(signal.SIGINT)
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    out = log_path.read_text(errors="replace")
    assert rc == 0, f"exit status {rc}:\n{out[-3000:]}"
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    assert "already stopping" in out  # the further interrupts were seen, and said so
