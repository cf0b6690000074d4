"""Process tests of issue 9's scenarios: the node keeps acting and every question gets exactly one
final message through long or huge text, bursts, clock jumps and live changes; the diagnostics
say what is happening now.

One node process (the installed `oxygen_node`, as in test_node_e2e.py) is shared by the tests of
this module, active from the first test on; each test restores what it changed. The client is
test_node_e2e's, with a feeder that can shift the camera / joint-state stamps.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

from action_msgs.msg import GoalStatus  # noqa: E402
from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from lifecycle_msgs.srv import GetState  # noqa: E402
from rcl_interfaces.srv import GetParameters  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from oxygen_ros.msg import TextMemory  # noqa: E402
from oxygen_ros.node import conversions as conv  # noqa: E402
from oxygen_ros.node.questions import INACTIVE  # noqa: E402

from test_node_e2e import JOINTS, Client, _alive, _status, node_process  # noqa: E402

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
LONG_INSTRUCTION = ("please carefully pick up the small red cube from the left side of the table "
                    "and place it gently into the blue box")  # 23 words, > 48 tokens with state


class StampClient(Client):
    """Client whose feeder shifts stamps: cam_offset / js_offset seconds (camera / joints),
    dup_joints: a JointState naming one joint twice."""

    def __init__(self) -> None:
        self.cam_offset = 0.0
        self.js_offset = 0.0
        self.dup_joints = False
        super().__init__()
        self.all_answers: list = []  # every ~/answer message, unbounded (bursts)
        self.node.create_subscription(TextMemory, "/oxygen/answer", self._answer_cb,
                                      QoSProfile(depth=2000))
        self.burst_pub = self.node.create_publisher(String, "/oxygen/ask", QoSProfile(depth=2000))
        self.instr_pub = self.node.create_publisher(String, "/oxygen/instruction", 10)
        self.getp = self.node.create_client(GetParameters, "/oxygen/get_parameters")

    def _answer_cb(self, msg) -> None:
        with self.lock:
            self.all_answers.append(msg)

    def _feed(self) -> None:
        rng = np.random.default_rng(0)
        base = rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
        i, period, nxt = 0, 1.0 / 30.0, time.monotonic()
        clock = self.node.get_clock()
        while not self.stop.is_set():
            if self.mode != "off":
                now = clock.now().nanoseconds * 1e-9
                if self.mode != "camera_stop":
                    self.img_pub.publish(conv.encode_image(
                        np.roll(base, i, axis=1), "rgb8", stamp=conv.sec_to_stamp(now + self.cam_offset)))
                js = JointState()
                js.header.stamp = conv.sec_to_stamp(now + self.js_offset)
                js.name = list(JOINTS) + ([JOINTS[0]] if self.dup_joints else [])
                js.position = [0.3 * math.sin(0.1 * i + j) for j in range(len(js.name))]
                self.js_pub.publish(js)
                i += 1
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))

    def param(self, name: str):
        return self.call(self.getp, GetParameters.Request(names=[name])).values[0]

    def finals(self, prompt: str | None = None) -> list:
        with self.lock:
            return [m for m in self.all_answers if m.is_final and prompt in (None, m.prompt)]

    def diag(self, suffix: str, since: float) -> list:
        return [st for d in self.snapshot(self.diags, since) for st in [_status(d, suffix)] if st]

    def wait_diag(self, suffix: str, since: float, pred, timeout: float, what: str):
        return self.wait_for(lambda: next((st for st in self.diag(suffix, since) if pred(st)), None),
                             timeout, what)

    def frames_since(self, t: float) -> int:
        return len(self.snapshot(self.stats, t))


@pytest.fixture(scope="module")
def node_proc(tmp_path_factory):
    # this feed's joint states (a sine) do not follow the commands: restarts after the holds
    # below would be measured-pose jumps (test_control_loop.py tests those); tolerance widened
    with node_process(tmp_path_factory, "-p", "autostart:=true",
                      "-p", "max_tracking_error:=[100.0]") as proc:
        yield proc


@pytest.fixture(scope="module")
def client(node_proc):
    if not rclpy.ok():
        rclpy.init()
    c = StampClient()
    c.mode = "good"
    # autostart configures (model warm-up) before the node spins: services answer after that
    state = c.call(c.get, GetState.Request(), timeout=180.0).current_state.label
    assert state == "active", state
    c.wait_for(lambda: c.frames_since(0) >= 3, 30, "first frames")
    yield c
    c.close()
    rclpy.try_shutdown()


def _frames_keep_coming(client, seconds: float, at_least: int) -> None:
    t0 = time.monotonic()
    time.sleep(seconds)
    n = client.frames_since(t0)
    assert n >= at_least, f"{n} inference frames in {seconds} s"


def _engine_ok_now(client) -> None:
    t0 = time.monotonic()
    st = client.wait_diag("engine", t0, lambda s: True, 5, "an engine status")
    assert st.level == OK and st.message == "running", (st.level, st.message)


# -- text at the boundary ----------------------------------------------------------------------
def test_long_instruction_on_topic_refused_previous_stays(client, node_proc):
    before = client.param("instruction").string_value
    t0 = time.monotonic()
    client.instr_pub.publish(String(data=LONG_INSTRUCTION))
    st = client.wait_diag("inputs", t0, lambda s: s.level == WARN and "~/instruction" in s.message,
                          10, "inputs WARN naming ~/instruction")
    assert "tokens" in st.message
    assert client.param("instruction").string_value == before
    _frames_keep_coming(client, 1.5, 5)
    _alive(node_proc)


def test_huge_instruction_refused_by_bytes_robot_keeps_acting(client):
    huge = "x" * 1_000_000
    res = client.set_params(instruction=huge)[0]
    assert not res.successful and "bytes" in res.reason, res.reason
    t0 = time.monotonic()
    client.instr_pub.publish(String(data=huge))
    client.wait_diag("inputs", t0, lambda s: "bytes" in s.message, 10, "inputs WARN: bytes")
    assert client.param("instruction").string_value == "pick up the cube"
    _frames_keep_coming(client, 1.5, 5)
    rates = [float(kv.value) for st in client.diag("control", time.monotonic() - 1.5)
             for kv in st.values if kv.key == "command_rate_hz"]
    assert rates and min(rates) > 40.0, rates
    _engine_ok_now(client)  # no frame failed: no error to clear


def test_long_memory_prompt_refused_question_answered(client):
    long_prompt = "Memory: " + " ".join(["describe every object you can see on the table"] * 6)
    res = client.set_params(memory__prompt=long_prompt)[0]
    assert not res.successful and "tokens" in res.reason, res.reason
    q = "what is the robot holding?"
    client.burst_pub.publish(String(data=q))
    final = client.wait_for(lambda: client.finals(q), 20, "the question's final answer")[0]
    assert final.finish_reason in ("length", "eos"), final.finish_reason


def test_too_long_question_refused_with_final(client):
    q = "why " * 5000
    client.burst_pub.publish(String(data=q))
    final = client.wait_for(lambda: client.finals(q), 10, "a refusal")[0]
    assert final.finish_reason.startswith("refused: too long"), final.finish_reason


# -- no lost question --------------------------------------------------------------------------
def _ask_burst(client, prefix: str, n: int, seconds: float) -> list[str]:
    prompts = [f"{prefix} {i}: what is on the table?" for i in range(n)]
    t0 = time.monotonic()
    for i, p in enumerate(prompts):
        client.burst_pub.publish(String(data=p))
        time.sleep(max(0.0, t0 + seconds * (i + 1) / n - time.monotonic()))
    return prompts


def _one_final_each(client, prompts: list[str], timeout: float) -> dict:
    want = set(prompts)

    def done():
        got = [m for m in client.finals() if m.prompt in want]
        return got if len({m.prompt for m in got}) == len(want) else None
    client.wait_for(done, timeout, f"{len(want)} final answers")
    time.sleep(0.5)  # a duplicate final would arrive right after
    got = [m for m in client.finals() if m.prompt in want]
    counts = {}
    for m in got:
        counts[m.prompt] = counts.get(m.prompt, 0) + 1
    assert all(c == 1 for c in counts.values()), {p: c for p, c in counts.items() if c != 1}
    return {m.prompt: m.finish_reason for m in got}


def test_burst_of_500_questions_all_answered(client):
    prompts = _ask_burst(client, "burst", 500, 1.0)
    reasons = _one_final_each(client, prompts, 120)
    assert all(r in ("length", "eos") for r in reasons.values()), set(reasons.values())


def test_questions_while_camera_off_wait_for_frames(client):
    client.mode = "camera_stop"
    time.sleep(0.3)
    prompts = _ask_burst(client, "dark", 200, 1.0)
    time.sleep(2.5)
    client.mode = "good"
    reasons = _one_final_each(client, prompts, 90)
    assert all(r in ("length", "eos") for r in reasons.values()), set(reasons.values())


def test_full_queue_refuses_never_drops(client):
    assert client.set_params(ask__max_open=4)[0].successful
    try:
        reasons = _one_final_each(client, _ask_burst(client, "full", 40, 0.05), 30)
    finally:
        assert client.set_params(ask__max_open=1024)[0].successful
    refused = [r for r in reasons.values() if r == "refused: queue full"]
    assert refused and len(refused) < 40


def test_ask_action_feedback_result_and_cancel(client):
    from oxygen_ros.action import Ask

    ac = client.ask_action  # made before the client spins (Client.__init__ says why)
    assert ac.wait_for_server(timeout_sec=10)
    feedback = []

    def run(question, cancel=False):
        fut = ac.send_goal_async(Ask.Goal(question=question), feedback_callback=feedback.append)
        # 30 s: right after the full-queue burst the node's executor may still be answering it
        # (one CI run timed out at 10 s; alone it is accepted within a second)
        handle = client.wait_for(lambda: fut.done() and fut.result(), 30, "goal accepted")
        assert handle.accepted
        if cancel:
            handle.cancel_goal_async()
        res = handle.get_result_async()
        return client.wait_for(lambda: res.done() and res.result(), 30, "goal result")

    ok = run("what color is the cube?")
    assert ok.status == GoalStatus.STATUS_SUCCEEDED and ok.result.finish_reason in ("length", "eos")
    assert ok.result.request_id > 0 and feedback  # streamed before the result
    refused = run("why " * 5000)
    assert refused.status == GoalStatus.STATUS_ABORTED
    assert refused.result.finish_reason.startswith("refused: too long")
    cancelled = run("where is the box?", cancel=True)
    assert cancelled.status in (GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_SUCCEEDED)
    if cancelled.status == GoalStatus.STATUS_CANCELED:
        assert cancelled.result.finish_reason == "cancelled"


# -- time --------------------------------------------------------------------------------------
def test_clock_jump_ahead_recovers_at_once(client):
    t0 = time.monotonic()
    client.cam_offset = client.js_offset = 20.0
    time.sleep(1.0)
    client.cam_offset = client.js_offset = 0.0
    t_back = time.monotonic()
    client.wait_for(lambda: client.frames_since(t_back) >= 3, 3.0, "frames right after the jump")
    client.wait_diag("inputs", t0, lambda s: s.level == WARN and "ahead of the node clock" in s.message,
                     3, "inputs WARN: stamps ahead of the node clock")
    # during the hold the status says "holding the last command", after it "commands were held
    # .. ago" for HELD_WINDOW_S unless another WARN (chunk played to its end) takes precedence:
    # either one is the hold this test is after
    client.wait_diag("control", t0, lambda s: s.level in (WARN, ERROR) and (
        "held" in s.message or "holding the last command" in s.message), 3,
        "control WARN: commands held")


def test_joint_stamps_ahead_then_back(client):
    t0 = time.monotonic()
    client.js_offset = 10.0
    st = client.wait_diag("inputs", t0, lambda s: s.level == WARN and "/joint_states" in s.message
                          and "ahead" in s.message, 5, "inputs WARN on joint stamps")
    assert "stale" in st.message or "ahead" in st.message
    client.wait_diag("control", t0, lambda s: s.level in (WARN, ERROR) and "holding" in s.message,
                     5, "control WARN while holding")
    time.sleep(1.0)
    client.js_offset = 0.0
    t_back = time.monotonic()
    client.wait_for(lambda: client.frames_since(t_back) >= 3, 3.0, "frames right after good stamps")
    # the hold ends: no longer holding and no ERROR (a loaded 2-core CI machine may add a
    # tick-period WARN of its own, which is not this fault; one full-suite run timed out on OK)
    client.wait_diag("control", t_back + 1.0,
                     lambda s: s.level != ERROR and "holding" not in s.message, 5,
                     "control no longer holding")


def test_duplicate_joint_names_refused(client):
    t0 = time.monotonic()
    client.dup_joints = True
    try:
        client.wait_diag("inputs", t0, lambda s: s.level == WARN and "more than once" in s.message,
                         5, "inputs WARN on duplicate joint names")
    finally:
        client.dup_joints = False
    t1 = time.monotonic()
    client.wait_for(lambda: client.frames_since(t1) >= 3, 5, "frames again")


def test_mode_switch_to_parallel_with_requests_running(client):
    prompts = _ask_burst(client, "switch", 200, 0.2)
    time.sleep(0.2)  # admitted and decoding under mode oxygen
    assert client.set_params(mode="parallel")[0].successful
    try:
        t0 = time.monotonic()
        client.wait_for(lambda: [s for s in client.snapshot(client.stats, t0) if s.mode == "parallel"],
                        10, "a parallel frame")
        reasons = _one_final_each(client, prompts, 60)  # none stranded by the switch
        assert all(r in ("length", "eos") for r in reasons.values()), set(reasons.values())
        _frames_keep_coming(client, 2.0, 4)
        _engine_ok_now(client)
    finally:
        assert client.set_params(mode="oxygen")[0].successful


# -- lifecycle ends questions; sim time ---------------------------------------------------------
def test_deactivate_ends_every_open_question(client):
    """Every question ends while the node is inactive: the open ones aborted at deactivate, the
    ones still queued in the topic then refused saying why; none waits for the next activate."""
    prompts = _ask_burst(client, "late", 60, 0.05)
    time.sleep(0.1)
    client.ensure("inactive")
    reasons = _one_final_each(client, prompts, 30)  # without activating again
    assert set(reasons.values()) <= {"length", "eos", "aborted: node deactivated", INACTIVE}, \
        set(reasons.values())
    assert "aborted: node deactivated" in reasons.values()
    late = _ask_burst(client, "while inactive", 3, 0.0)
    assert set(_one_final_each(client, late, 10).values()) == {INACTIVE}
    client.ensure("active")


def test_use_sim_time_without_clock_is_said(client):
    client.ensure("inactive")
    try:
        assert client.set_params(use_sim_time=True)[0].successful
        client.ensure("active")
        t0 = time.monotonic()
        client.wait_diag("control", t0, lambda s: s.level == ERROR and "/clock" in s.message, 6,
                         "control ERROR: no /clock")
    finally:
        client.ensure("inactive")
        assert client.set_params(use_sim_time=False)[0].successful
        client.ensure("active")
    t1 = time.monotonic()
    client.wait_for(lambda: client.frames_since(t1) >= 3, 10, "frames on the system clock again")
