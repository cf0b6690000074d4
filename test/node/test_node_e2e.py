"""End to end: the installed `oxygen_node` as a subprocess, real DDS on loopback.

One node process is shared by the tests of this module (tests run in file order and each one
first brings the node to the state it needs). A test client node drives the lifecycle through
/oxygen/change_state, sets parameters through /oxygen/set_parameters, publishes camera images +
joint states at 30 Hz and listens to every output. ROS_DOMAIN_ID / localhost discovery come
from test/conftest.py.
"""
from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from lifecycle_msgs.msg import Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from oxygen_ros.msg import FrameStats, TextMemory  # noqa: E402
from oxygen_ros.node import conversions as conv  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config" / "oxygen.yaml"
JOINTS = [f"joint_{i}" for i in range(1, 7)]
RATE_HZ = 50.0
N, K = 12, 4  # config/oxygen.yaml defaults


def _executable() -> list[str]:
    """The installed lib/oxygen_ros/oxygen_node (preferred), else the module.
    OXYGEN_NODE_CMD (a command line) overrides both."""
    if os.environ.get("OXYGEN_NODE_CMD"):
        import shlex

        return shlex.split(os.environ["OXYGEN_NODE_CMD"])
    prefixes = [os.environ.get("OXYGEN_INSTALL_PREFIX", "")]
    prefixes += os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)
    prefixes.append(str(ROOT / "install" / "oxygen_ros"))
    for p in prefixes:
        exe = Path(p) / "lib" / "oxygen_ros" / "oxygen_node" if p else None
        if exe and exe.is_file() and os.access(exe, os.X_OK):
            return [str(exe)]
    return [sys.executable, "-m", "oxygen_ros.cli.node"]


class Client:
    """Test-side node: feeder thread + recorders + service helpers."""

    def __init__(self) -> None:
        self.node = rclpy.create_node("oxygen_test_client")
        n = self.node
        self.lock = threading.Lock()
        self.commands: deque = deque(maxlen=5000)  # (recv monotonic, msg)
        self.chunks: deque = deque(maxlen=500)
        self.stats: deque = deque(maxlen=2000)
        self.memory: deque = deque(maxlen=5000)
        self.answers: deque = deque(maxlen=500)
        self.diags: deque = deque(maxlen=200)
        self.published: dict[tuple[int, int], int] = {}  # header stamp -> frame counter
        rec = self._recorder
        n.create_subscription(JointState, "/oxygen/joint_command", rec(self.commands), 100)
        n.create_subscription(JointTrajectory, "/oxygen/action_chunk", rec(self.chunks), 10)
        n.create_subscription(FrameStats, "/oxygen/frame_stats", rec(self.stats), 100)
        n.create_subscription(TextMemory, "/oxygen/memory", rec(self.memory), QoSProfile(depth=200))
        n.create_subscription(TextMemory, "/oxygen/answer", rec(self.answers), QoSProfile(depth=200))
        n.create_subscription(DiagnosticArray, "/diagnostics", rec(self.diags), 10)
        self.img_pub = n.create_publisher(Image, "/camera/image_raw", qos_profile_sensor_data)
        self.js_pub = n.create_publisher(JointState, "/joint_states", 10)
        self.ask_pub = n.create_publisher(String, "/oxygen/ask", 10)
        self.change = n.create_client(ChangeState, "/oxygen/change_state")
        self.get = n.create_client(GetState, "/oxygen/get_state")
        self.setp = n.create_client(SetParameters, "/oxygen/set_parameters")
        # Made before the executor spins: rclpy's ActionClient registers itself with the node
        # before it creates its lock, and an executor spinning in another thread can meet it
        # half-built (AttributeError '_lock' kills the spin thread and every later wait times
        # out: seen once in CI).
        from rclpy.action import ActionClient

        from oxygen_ros.action import Ask

        self.ask_action = ActionClient(n, Ask, "/oxygen/ask")
        # single-threaded for the same reason as the node (see oxygen_ros/cli/node.py)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(n)
        self.spin_thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.spin_thread.start()
        self.mode = "off"
        self.stop = threading.Event()
        self.feeder = threading.Thread(target=self._feed, daemon=True)
        self.feeder.start()

    def _recorder(self, store):
        def cb(msg):
            with self.lock:
                store.append((time.monotonic(), msg))
        return cb

    def _feed(self) -> None:
        rng = np.random.default_rng(0)
        base = rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
        i = 0
        period = 1.0 / 30.0
        nxt = time.monotonic()
        while not self.stop.is_set():
            mode = self.mode
            if mode != "off":
                now = self.node.get_clock().now().to_msg()
                img = np.roll(base, i, axis=1)
                if mode != "camera_stop":
                    msg = conv.encode_image(img, "rgb8", stamp=now, pad=2)
                    if mode == "bad_encoding":
                        msg.encoding = "yuv422"
                    elif mode == "wrong_size":
                        msg.data = bytes(msg.data)[:-7]
                    self.img_pub.publish(msg)
                js = JointState()
                js.header.stamp = now
                js.name = list(JOINTS)
                js.position = [0.3 * math.sin(0.1 * i + j) for j in range(len(JOINTS))]
                if mode == "nan_joints":
                    js.position[2] = float("nan")
                elif mode == "missing_joints":
                    js.name, js.position = js.name[:4], js.position[:4]
                self.js_pub.publish(js)
                with self.lock:
                    self.published[(now.sec, now.nanosec)] = i
                i += 1
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))

    # -- helpers --------------------------------------------------------------------------------
    def call(self, client, request, timeout=30.0, resend_after: float | None = None):
        """One service call. `resend_after` (idempotent requests only) sends the request again
        when no answer came in that long: a service can be discovered before the server has
        matched this client's response reader, and a response sent then is lost (seen on a
        loaded CI machine: the first GetState, 30 s without an answer)."""
        assert client.wait_for_service(timeout_sec=timeout), f"service {client.srv_name} not up"
        fut = client.call_async(request)
        t0 = sent = time.monotonic()
        while not fut.done():
            now = time.monotonic()
            assert now - t0 < timeout, f"{client.srv_name} timed out"
            if resend_after is not None and now - sent > resend_after:
                client.remove_pending_request(fut)
                fut, sent = client.call_async(request), now
            time.sleep(0.01)
        return fut.result()

    def state(self) -> str:
        return self.call(self.get, GetState.Request(), timeout=60.0,
                         resend_after=5.0).current_state.label

    def transition(self, tid: int) -> bool:
        req = ChangeState.Request()
        req.transition = Transition(id=tid)
        return self.call(self.change, req, timeout=120.0).success

    def set_params(self, **values):
        req = SetParameters.Request()
        req.parameters = [Parameter(k.replace("__", "."), value=v).to_parameter_msg()
                          for k, v in values.items()]
        return self.call(self.setp, req, resend_after=5.0).results  # setting a value twice is harmless

    def ensure(self, label: str) -> None:
        path = {
            ("unconfigured", "inactive"): [Transition.TRANSITION_CONFIGURE],
            ("unconfigured", "active"): [Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE],
            ("inactive", "active"): [Transition.TRANSITION_ACTIVATE],
            ("active", "inactive"): [Transition.TRANSITION_DEACTIVATE],
            ("inactive", "unconfigured"): [Transition.TRANSITION_CLEANUP],
            ("active", "unconfigured"): [Transition.TRANSITION_DEACTIVATE, Transition.TRANSITION_CLEANUP],
        }
        cur = self.state()
        for tid in path.get((cur, label), []):
            assert self.transition(tid), f"transition {tid} from {cur} failed"
        assert self.state() == label

    def snapshot(self, store, since: float):
        with self.lock:
            return [m for t, m in store if t >= since]

    def wait_for(self, predicate, timeout: float, what: str):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    def close(self) -> None:
        self.stop.set()
        self.feeder.join(2)
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()


@contextlib.contextmanager
def node_process(tmp_path_factory, *ros_args: str):
    """The node as a subprocess with the shipped config, one torch thread and `ros_args`;
    stopped with SIGINT (SIGKILL after 10 s) and its log tail printed on exit."""
    env = dict(os.environ)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in parts:
        parts.insert(0, str(ROOT))
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["PYTHONUNBUFFERED"] = "1"
    log = tmp_path_factory.mktemp("oxygen_node") / "node.log"
    cmd = _executable() + ["--ros-args", "--params-file", str(CONFIG), "-p", "model.num_threads:=1",
                           *ros_args]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    proc.log_path = log
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        sys.stdout.write(f"\n--- oxygen_node log ({log}) tail ---\n")
        sys.stdout.write(log.read_text(errors="replace")[-3000:])


@pytest.fixture(scope="module")
def node_proc(tmp_path_factory):
    with node_process(tmp_path_factory, "-p", "control_priority:=20") as proc:
        yield proc


@pytest.fixture(scope="module")
def client(node_proc):
    if not rclpy.ok():
        rclpy.init()
    c = Client()
    yield c
    c.close()
    rclpy.try_shutdown()


def _alive(proc):
    assert proc.poll() is None, f"oxygen_node exited with {proc.returncode}:\n" + \
        proc.log_path.read_text(errors="replace")[-3000:]


def _status(diag: DiagnosticArray, suffix: str) -> DiagnosticStatus | None:
    for st in diag.status:
        if st.name.endswith(suffix):
            return st
    return None


# -- tests, in order ------------------------------------------------------------------------------
def test_starts_unconfigured_and_rejects_invalid_transition(client, node_proc):
    _alive(node_proc)
    assert client.state() == "unconfigured"
    assert client.transition(Transition.TRANSITION_ACTIVATE) is False
    assert client.state() == "unconfigured"


def test_invalid_parameters_rejected_with_reasons(client):
    res = client.set_params(mode="fast")[0]
    assert not res.successful and "mode must be one of" in res.reason
    res = client.set_params(decode_steps_per_frame=0)[0]
    assert not res.successful and res.reason
    res = client.set_params(decode_steps_per_frame=2.0)[0]  # wrong type
    assert not res.successful and res.reason
    res = client.set_params(autostart=True)[0]
    assert not res.successful and "read" in res.reason.lower()
    # configure-time parameters are accepted while unconfigured (same value, no effect)
    assert client.set_params(model__preset="tiny")[0].successful


def test_failed_configure_leaves_node_unconfigured(client, node_proc):
    assert client.set_params(model__checkpoint="/nonexistent/checkpoint")[0].successful
    assert client.transition(Transition.TRANSITION_CONFIGURE) is False
    _alive(node_proc)
    assert client.state() == "unconfigured"
    assert client.set_params(model__checkpoint="")[0].successful


def test_configure_then_configure_time_params_rejected(client):
    t0 = time.monotonic()
    client.ensure("inactive")
    print(f"configure took {time.monotonic() - t0:.2f} s")
    res = client.set_params(model__preset="small")[0]
    assert not res.successful and "configure" in res.reason and "cleanup" in res.reason
    res = client.set_params(camera_topics=["/other"])[0]
    assert not res.successful


def test_no_commands_while_inactive(client):
    client.ensure("inactive")
    client.mode = "good"
    t0 = time.monotonic()
    time.sleep(1.0)
    assert client.snapshot(client.commands, t0) == []
    assert client.snapshot(client.stats, t0) == []


def _command_window(client, seconds):
    t0 = time.monotonic()
    time.sleep(seconds)
    cmds = client.snapshot(client.commands, t0)
    stats = client.snapshot(client.stats, t0)
    stamps = np.array([conv.stamp_to_sec(m.header.stamp) for m in cmds])
    periods = np.diff(stamps)
    nominal = 1.0 / RATE_HZ
    p99 = float(np.percentile(np.abs(periods - nominal), 99)) if periods.size else float("inf")
    frame_ms = np.mean([s.frame_ms for s in stats]) if stats else float("nan")
    if stats:
        print("stages", {f: round(float(np.mean([getattr(s, f) for s in stats])), 1) for f in
                         ("vision_prefill_ms", "denoise_ms", "decode_ms", "kv_ms", "sched_ms")},
              "batch", np.mean([s.batch_size for s in stats]))
    # The rate the node published at, from its own stamps: the test client's executor may
    # receive in bursts, so counting arrivals per wall-clock window measures the client.
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if stamps.size > 1 else 0.0
    print(f"joint_command: {rate:.1f} Hz, |period-nominal| p99 {p99 * 1e3:.2f} ms, "
          f"max {np.max(periods, initial=0) * 1e3:.1f} ms; inference {len(stats) / seconds:.1f} Hz, "
          f"frame {frame_ms:.1f} ms; load avg {os.getloadavg()[0]:.1f}")
    return cmds, stats, rate, p99


def _fifo_permitted() -> bool:
    """Whether this process (and so the node it started) may use SCHED_FIFO: tried on a
    throwaway thread, since the policy is per thread on Linux."""
    ok = []

    def probe():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            ok.append(True)
        except (AttributeError, OSError):
            pass
    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return bool(ok)


def test_commands_at_control_rate_while_active(client, node_proc):
    """50 Hz with period p99 within 50 % while the model runs, and the control thread's
    scheduling as the node reports it in `oxygen: control` (`control_scheduling`: SCHED_FIFO 20
    where this machine permits it, else normal with the reason). The bound catches a control
    loop that waits on inference (~20-27 ms frames here) or on the executor, not this VM's
    host noise: on the 2-core VM windows of the same run range from 1.5 to 8 ms with SCHED_FIFO
    and from 4 to 15 ms without (GIL holders preempted by other processes). Up to 5 windows of
    3 s are measured; the bounds must hold in one. If they hold in none while the 1-minute load
    average exceeded the CPU count (other processes competed for the CPUs), the timing part is
    SKIPPED with the numbers, not passed."""
    client.mode = "good"
    client.ensure("active")
    client.wait_for(lambda: client.snapshot(client.commands, 0), 20, "first joint_command")
    nominal = 1.0 / RATE_HZ
    def reported():  # the newest control status of this run (earlier ones say "not started")
        diags = client.snapshot(client.diags, 0)
        st = _status(diags[-1], "control") if diags else None
        value = {kv.key: kv.value for kv in st.values}.get("control_scheduling") if st else None
        return value if value not in (None, "not started") else None
    scheduling = client.wait_for(reported, 10, "control_scheduling in the control diagnostics")
    fifo = _fifo_permitted()
    if fifo:
        assert scheduling == "SCHED_FIFO 20"
    else:
        assert scheduling.startswith("normal (SCHED_FIFO 20 not permitted: "), scheduling
    bound = 0.5 * nominal
    # settle: activation matches new publishers with the client (DDS discovery runs in the
    # node's executor threads), so the first seconds after activate are not steady state
    _command_window(client, 3.0)
    results, loads = [], []
    for _ in range(5):
        cmds, stats, rate, p99 = _command_window(client, 3.0)
        loads.append(os.getloadavg()[0])
        _alive(node_proc)
        assert all(m.name == JOINTS and len(m.position) == len(JOINTS) for m in cmds)
        assert all(np.all(np.isfinite(m.position)) for m in cmds)
        assert len(stats) >= 3, "inference frames should keep coming"
        results.append((round(rate, 1), round(p99 * 1e3, 2)))
        if 0.9 * RATE_HZ <= rate <= 1.1 * RATE_HZ and p99 <= bound:
            break
    else:
        msg = (f"{scheduling}: (rate Hz, period p99 deviation ms) per window: {results} (bound "
               f"{bound * 1e3:.0f} ms); load avg {loads}")
        if min(loads) > (os.cpu_count() or 1):
            pytest.skip(f"CPU overloaded by other processes, timing not verified: {msg}")
        raise AssertionError(f"control timing out of bounds: {msg}")
    print(f"control thread {scheduling}: windows {results}")
    chunks = client.snapshot(client.chunks, 0)
    assert chunks and chunks[-1].joint_names == JOINTS


def test_memory_stamped_with_source_observation(client):
    client.ensure("active")
    client.mode = "good"
    t0 = time.monotonic()
    finals = client.wait_for(
        lambda: [m for m in client.snapshot(client.memory, t0) if m.is_final][3:] and
        [m for m in client.snapshot(client.memory, t0) if m.is_final], 30, "final memory messages")
    stats = {s.frame: s for s in client.snapshot(client.stats, 0)}
    with client.lock:
        published = set(client.published)
    bound = math.ceil(N / K)
    for m in finals:
        key = (m.header.stamp.sec, m.header.stamp.nanosec)
        assert key in published, "memory stamp is not the stamp of a published observation"
        assert m.kind == "memory" and m.text is not None
        assert 1 <= m.frames_spanned <= bound, (m.frames_spanned, bound)
        if m.source_frame in stats:
            assert stats[m.source_frame].header.stamp == m.header.stamp
    # streaming: non-final updates of a request carry the same stamp as its final one
    by_id = {}
    for m in client.snapshot(client.memory, t0):
        by_id.setdefault(m.request_id, set()).add((m.header.stamp.sec, m.header.stamp.nanosec))
    assert all(len(s) == 1 for s in by_id.values())


def _batch_after(client, k, want, timeout=20.0):
    t_set = time.monotonic()
    res = client.set_params(decode_steps_per_frame=k)[0]
    assert res.successful, res.reason

    def seen():
        st = [s for s in client.snapshot(client.stats, t_set) if s.k == k]
        return st[-1] if len(st) >= 6 and st[-1].batch_size == want else None
    return client.wait_for(seen, timeout, f"batch size {want} at k={k}")


def test_set_k_changes_batch_size(client):
    client.ensure("active")
    client.mode = "good"
    # memory every frame, N=12: a request lives ceil(N/k) frames -> that many run at once
    _batch_after(client, 12, 1)
    _batch_after(client, 2, 6)
    _batch_after(client, K, 3)


def test_ask_streams_answer(client):
    client.ensure("active")
    client.mode = "good"
    t0 = time.monotonic()
    client.ask_pub.publish(String(data="What is on the table?"))
    final = client.wait_for(
        lambda: [m for m in client.snapshot(client.answers, t0) if m.is_final], 20, "final answer")[0]
    with client.lock:
        published = set(client.published)
    assert final.kind == "answer" and final.prompt == "What is on the table?"
    assert (final.header.stamp.sec, final.header.stamp.nanosec) in published
    assert final.finish_reason


def test_instruction_topic_sets_parameter(client):
    from rcl_interfaces.srv import GetParameters

    pub = client.node.create_publisher(String, "/oxygen/instruction", 10)
    getp = client.node.create_client(GetParameters, "/oxygen/get_parameters")

    def current():
        req = GetParameters.Request(names=["instruction"])
        return client.call(getp, req).values[0].string_value
    try:
        client.wait_for(lambda: (pub.publish(String(data="stack the blocks")) or
                                 current() == "stack the blocks"), 10, "instruction parameter")
    finally:
        client.set_params(instruction="pick up the cube")
        client.node.destroy_publisher(pub)
        client.node.destroy_client(getp)


@pytest.mark.parametrize("mode, words", [
    ("bad_encoding", "yuv422"),
    ("wrong_size", "step*height"),
    ("nan_joints", "non-finite"),
    ("missing_joints", "missing joints"),
    ("camera_stop", "stale"),
])
def test_bad_input_reported_then_recovers(client, node_proc, mode, words):
    client.ensure("active")
    client.mode = "good"  # start from a running node with an action chunk to hold
    t_good = time.monotonic()
    client.wait_for(lambda: len(client.snapshot(client.stats, t_good)) >= 2, 15, "frames")
    client.mode = mode
    t0 = time.monotonic()

    def warned():
        for d in client.snapshot(client.diags, t0 + 0.5):
            st = _status(d, "inputs")
            if st is not None and st.level == DiagnosticStatus.WARN and words in st.message:
                return st
        return None
    client.wait_for(warned, 10, f"an inputs WARN mentioning {words!r}")
    _alive(node_proc)
    if mode == "camera_stop":  # commands keep coming (held), flagged stale
        time.sleep(1.0)
        cmds = client.snapshot(client.commands, time.monotonic() - 1.0)
        assert cmds, "no joint_command while holding"
        # the rate the node itself reports for its control loop while holding (the client's
        # receive side is not what is under test)
        rates = [float(kv.value) for d in client.snapshot(client.diags, time.monotonic() - 1.5)
                 for st in [_status(d, "control")] if st is not None
                 for kv in st.values if kv.key == "command_rate_hz"]
        assert rates and min(rates) > 40.0, rates

        def control_stale():
            for d in client.snapshot(client.diags, t0 + 1.0):
                st = _status(d, "control")
                if st is not None and "stale" in st.message:
                    return st
            return None
        client.wait_for(control_stale, 5, "control diagnostics reporting stale")
    # recovery: good input -> inference frames again, inputs OK
    client.mode = "good"
    t1 = time.monotonic()
    client.wait_for(lambda: len(client.snapshot(client.stats, t1)) >= 3, 15, "frames after recovery")

    def ok():
        for d in client.snapshot(client.diags, t1 + 1.5):
            st = _status(d, "inputs")
            if st is not None and st.level == DiagnosticStatus.OK:
                return st
        return None
    client.wait_for(ok, 10, "inputs diagnostics back to OK")


def test_deactivate_cleanup_shutdown(client, node_proc):
    client.ensure("active")
    client.mode = "good"
    client.ensure("inactive")
    time.sleep(0.3)
    t0 = time.monotonic()
    time.sleep(0.8)
    assert client.snapshot(client.commands, t0) == []
    assert client.snapshot(client.stats, t0) == []
    # reactivation works (the model was kept)
    client.ensure("active")
    t1 = time.monotonic()
    client.wait_for(lambda: len(client.snapshot(client.commands, t1)) > 10, 15, "commands again")
    client.ensure("unconfigured")
    assert client.set_params(model__preset="tiny")[0].successful
    req = ChangeState.Request()
    req.transition = Transition(label="shutdown")
    assert client.call(client.change, req).success
    assert client.state() == "finalized"
    _alive(node_proc)
