"""The node as a benchmark's subprocess, shared by the node benchmarks (run as scripts, so this
sits beside them): started with the shipped config plus `-p` settings in its own session, so
that SIGINT reaches the whole process group, and stopped with SIGINT, then SIGKILL."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Callable, Sequence

ROOT = Path(__file__).resolve().parents[3]  # the repository


def start_node(params: list[str], log: IO[bytes] | int | None = None) -> subprocess.Popen:
    """`params` are `name:=value` strings; `log` takes stdout and stderr (None: inherited)."""
    cmd = [sys.executable, "-m", "oxygen_ros.cli.node", "--ros-args", "--params-file",
           str(ROOT / "config" / "oxygen.yaml")] + [x for p in params for x in ("-p", p)]
    print("$ " + " ".join(cmd), flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=None if log is None else subprocess.STDOUT,
                            start_new_session=True)



def cpu_s(pid: int) -> float:
    """The CPU seconds (user + system) process `pid` has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def recording_params(bag: Path, topics: Sequence[str], settings: Sequence[str]) -> list[str]:
    """start_node's `params` for a node that starts at once (autostart) and records `topics`
    into `bag`, plus `settings`."""
    return ["autostart:=true", "record.enabled:=true", f"record.path:={bag}",
            "record.topics:=[" + ",".join(topics) + "]", *settings]


def run_shown(cmd: list[str], cwd: Path) -> None:
    """`cmd` printed as `$ ...`, then run in `cwd`; its exit status is not checked (what it
    writes says what failed)."""
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, check=False)


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


def spin_client(node):
    """The benchmark's own rclpy node spun by a single-threaded executor on a daemon thread;
    returns the executor (close_client shuts it down)."""
    import threading

    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    return executor


def sensor_feeder(name: str):
    """rclpy up and the benchmark's own node `name` with publishers on the node's camera
    (/camera/image_raw) and joint state (/joint_states) topics: (node, image, joint state)."""
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image, JointState

    rclpy.init()
    node = rclpy.create_node(name)
    return (node, node.create_publisher(Image, "/camera/image_raw", qos_profile_sensor_data),
            node.create_publisher(JointState, "/joint_states", 10))



class NodeServices:
    """The node's lifecycle and parameter services from the benchmark's own (spun) node:
    each call waits for its answer and raises RuntimeError, naming `log_path`, when the node
    refuses, exits or does not answer."""

    def __init__(self, node, proc: subprocess.Popen, log_path: Path | str, name: str = "/oxygen") -> None:
        from lifecycle_msgs.srv import ChangeState
        from rcl_interfaces.srv import SetParameters

        self._proc, self._log = proc, log_path
        self._change = node.create_client(ChangeState, f"{name}/change_state")
        self._set = node.create_client(SetParameters, f"{name}/set_parameters")

    def _call(self, client, req, timeout_s: float):
        if not client.wait_for_service(timeout_sec=timeout_s):
            raise RuntimeError(f"{client.srv_name} is not up; node log: {self._log}")
        fut = client.call_async(req)
        t0 = time.monotonic()
        while not fut.done():
            if time.monotonic() - t0 > timeout_s or self._proc.poll() is not None:
                raise RuntimeError(f"{client.srv_name} did not answer; node log: {self._log}")
            time.sleep(0.01)
        return fut.result()

    def transition(self, transition_id: int, timeout_s: float = 180.0) -> None:
        """A lifecycle transition (lifecycle_msgs/msg/Transition ids)."""
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        req = ChangeState.Request()
        req.transition = Transition(id=transition_id)
        if not self._call(self._change, req, timeout_s).success:
            raise RuntimeError(f"transition {transition_id} failed; node log: {self._log}")

    def set(self, values: dict, timeout_s: float = 30.0) -> None:
        """Parameters set in one request; every one must be accepted."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        req = SetParameters.Request()
        req.parameters = [Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
        refused = [f"{k}: {r.reason}" for k, r in zip(values, self._call(self._set, req, timeout_s).results)
                   if not r.successful]
        if refused:
            raise RuntimeError(f"parameters refused: {'; '.join(refused)}")


def close_client(executor, node=None) -> None:
    """The benchmark's own rclpy side: executor, node, context."""
    import rclpy

    executor.shutdown(timeout_sec=1.0)
    if node is not None:
        node.destroy_node()
    rclpy.try_shutdown()


def feed(proc: subprocess.Popen, seconds: float, tick: Callable[[int, float | None], None],
         started: Callable[[], bool], start_timeout_s: float = 120.0, hz: float = 30.0) -> None:
    """Call `tick(i, running_s)` at `hz` (running_s: seconds since `started()` first held, None
    before) until `seconds` after the start; RuntimeError when the node does not start within
    `start_timeout_s`. Returns early when the node exits."""
    t_start, t_run, i = time.monotonic(), None, 0
    while proc.poll() is None:
        tick(i, None if t_run is None else time.monotonic() - t_run)
        if t_run is None and started():
            t_run = time.monotonic()
            print(f"node running after {t_run - t_start:.1f} s; feeding {seconds:g} s", flush=True)
        if t_run is not None and time.monotonic() - t_run > seconds:
            return
        if time.monotonic() - t_start > start_timeout_s + seconds:
            raise RuntimeError(f"the node did not start within {start_timeout_s:g} s")
        i += 1
        time.sleep(1 / hz)


def fresh_work_dir(out: Path) -> Path:
    """`out`/work, emptied: the bags of this run only (discovery kept on this host)."""
    work = out / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    return work
