"""The node as a benchmark's subprocess, shared by the node benchmarks (run as scripts, so this
sits beside them): started with the shipped config plus `-p` settings in its own session, so
that SIGINT reaches the whole process group, and stopped with SIGINT, then SIGKILL."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]


def start_node(params: list[str], log: IO[bytes] | int | None = None) -> subprocess.Popen:
    """`params` are `name:=value` strings; `log` takes stdout and stderr (None: inherited)."""
    cmd = [sys.executable, "-m", "oxygen_ros.node.main", "--ros-args", "--params-file",
           str(ROOT / "config" / "oxygen.yaml")] + [x for p in params for x in ("-p", p)]
    print("$ " + " ".join(cmd), flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=None if log is None else subprocess.STDOUT,
                            start_new_session=True)


def stop_node(proc: subprocess.Popen, wait_s: float = 20.0) -> None:
    """SIGINT (the node stops its threads and closes its bag), SIGKILL if it is still there
    after `wait_s`."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def close_client(executor, node=None) -> None:
    """The benchmark's own rclpy side: executor, node, context."""
    import rclpy

    executor.shutdown(timeout_sec=1.0)
    if node is not None:
        node.destroy_node()
    rclpy.try_shutdown()
