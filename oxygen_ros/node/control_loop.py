"""The control loop: publishes ~/joint_command from the ChunkPlayer at control_rate_hz.

Per tick: the player's value for now -> the CommandShaper (robot/shaper.py: velocity and
acceleration limits per elapsed time, start from the newest measured joint pose, resume after a
hold from the last command, hold while the observation is stale, a chunk was refused by the
start gate, the measured pose jumped or the deadman is not pressed) -> the last check
(robot/command_guard.py: a non-finite command, one outside the joint limits or a step beyond
the velocity limit is not sent; the last good command is sent again) -> publish. The gate
itself runs on the inference thread (`gate`, before the player gets a chunk); the deadman
subscription (deadman.topic, std_msgs/Bool; robot/deadman.py: a release wins, a second
publisher holds) lives here.

A dedicated thread with absolute monotonic deadlines (optionally SCHED_FIFO, parameter
control_priority; the inference thread then runs one level below it so that it is never
preempted while holding the GIL the control thread needs). With use_sim_time it is a ROS timer
on the node's (simulated) clock instead: sim time cannot be slept on. An executor timer jitters
more than the thread, and the thread more than the thread with FIFO priorities (oxygen-eval
reports the command period's p50 / p99 from a recorded bag).

Each tick first takes the newest joint state itself (`poll`: Inputs.poll, newest-only, outside
the executor), so a command starts from the newest measured pose and the joint-state stream
never waits for the executor nor the executor for it. How late each tick woke (its deadline ->
its start: the GIL, other processes) and the command period are kept for the diagnostic.

Every start() takes the stop Event of its run: a thread only ever reads the event it was started
with, so a thread that outlives its join is still signalled.
"""
from __future__ import annotations

import collections
import os
import threading
import time
from typing import Callable, Sequence

import numpy as np

from oxygen_ros.robot.chunk_player import ChunkPlayer
from oxygen_ros.robot.command_guard import command_problem
from oxygen_ros.robot.deadman import Deadman
from oxygen_ros.robot.interface import RobotInterface
from oxygen_ros.robot.input_health import CpuTime, Samples
from oxygen_ros.robot.rates import recent_rate
from oxygen_ros.robot.shaper import GLITCH, CommandShaper, MeasuredPose
from oxygen_ros.robot.threads import pin_thread

HELD_WINDOW_S = 2.0  # the diagnostic reports holds within this many seconds
HOLD_ERROR_S = 5.0  # a hold this long is an error, not a warning
LIMITED_WINDOW_S = 2.0  # joints that hit a limit within this many seconds are reported
ERROR_WINDOW_S = 2.0  # a refused command or a measured-pose jump is an ERROR for this long
PUBLISHERS_PERIOD_S = 0.1  # how often the deadman topic's publishers are counted
NAMES_PERIOD_S = 1.0  # ... and, when more than one, named (a graph query)


def _gid(info) -> object:
    """The sending publisher's gid from rclpy's MessageInfo (None when not given)."""
    gid = info.get("publisher_gid") if isinstance(info, dict) else None
    data = gid.get("data") if isinstance(gid, dict) else gid
    try:
        return None if data is None else bytes(data)
    except (TypeError, ValueError):
        return None


class ControlLoop:
    def __init__(self, node, player: ChunkPlayer, joint_names: Sequence[str], publish,
                 warn: Callable[[str, str], None], shaper: CommandShaper | None = None,
                 measured: MeasuredPose | None = None, deadman_topic: str = "",
                 deadman_timeout_s: float = 0.5, robot: RobotInterface | None = None,
                 poll: Callable[[float], object] | None = None,
                 cpu: CpuTime | None = None) -> None:
        """joint_names: the command names; measured: the newest state (state order); robot:
        which state value each command is measured by (None: the state is the commands')."""
        self._node = node
        self._robot = robot
        self._poll = poll  # (tick time, node clock s) -> takes the newest joint state
        self._cpu = cpu
        self.late = Samples()  # seconds each thread tick woke after its deadline
        self._poll_cpu_s = 0.0  # the CPU time of this tick's take of the joint states
        self.monotonic: Callable[[], float] = time.monotonic  # deadman, diagnostics (tests swap it)
        self.player = player
        self._names = list(joint_names)
        self._publish = publish  # (names, values, stamp msg) -> None
        self._warn = warn
        self.shaper = shaper or CommandShaper(len(self._names), player.tick_s)
        self.measured = measured or MeasuredPose()
        self.deadman_topic = deadman_topic
        self.deadman = Deadman(bool(deadman_topic), deadman_timeout_s)
        self._deadman_sub = None
        if deadman_topic:
            from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
            from std_msgs.msg import Bool

            # best effort matches reliable and best-effort publishers
            qos = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT,
                             history=HistoryPolicy.KEEP_LAST)
            # with the message info: the sender's gid tells publishers apart
            self._deadman_sub = node.create_subscription(
                Bool, deadman_topic,
                lambda m, info: self.deadman.press(bool(m.data), self.monotonic(), _gid(info)), qos)
        self.deadman_why = ""  # why the deadman holds now ("" = go)
        self._counted_at = self._named_at = -np.inf  # monotonic: publishers counted / named
        # the last check (robot/command_guard.py): the last command sent and its time (node clock)
        self._sent: np.ndarray | None = None
        self._sent_t = 0.0
        # the shaper's and the check's time origin (node clock ns, set per run): seconds since it
        # keep float precision, an epoch in float seconds has ~0.2 us steps
        self._origin_ns: int | None = None
        self.guard_refused = 0  # commands not sent (since configure)
        self.last_guard: float | None = None  # monotonic time of the newest refusal
        self.guard_message = ""
        self.last_glitch_at: float | None = None  # monotonic: the measured pose was beyond tolerance
        self.glitch_message = ""
        self.limited_at = np.full(len(self._names), -np.inf)  # monotonic, per joint
        # monotonic times of limited ticks (bounded: the window at the highest control rate)
        self.limited_times: collections.deque[float] = collections.deque(
            maxlen=int(LIMITED_WINDOW_S * 1000) + 1)
        self.last_gated: float | None = None  # monotonic time of the newest refused chunk
        self.gate_message = ""
        self.waiting_pose = False  # a chunk is there but no fresh measured pose to start from
        self.holding = ""  # the shaper's hold reason on the last tick
        self._thread: threading.Thread | None = None
        self._timer = None
        # what the control thread runs under (diagnostics): the timing to expect differs
        self.scheduling = "not started"
        self.ticks: collections.deque[float] = collections.deque(maxlen=256)
        self.commands = 0
        self.stale_ticks = 0
        self.last_stale = False
        self.last_held: float | None = None  # monotonic time of the newest held tick
        self.held_since: float | None = None  # monotonic start of the current hold
        self.last_future = False
        self.last_index = -1
        self.last_age_s = 0.0

    @property
    def running(self) -> bool:
        return self._thread is not None or self._timer is not None

    def destroy(self) -> None:
        if self._deadman_sub is not None:
            self._node.destroy_subscription(self._deadman_sub)
            self._deadman_sub = None

    def start(self, stop: threading.Event, period: float, priority: int, use_sim_time: bool,
              cpus: Sequence[int] = ()) -> None:
        self.shaper.reset()  # the run's first command is the measured pose
        self._sent, self._origin_ns = None, None  # ... and the last check compares it with that pose
        if use_sim_time:
            # the timer runs on the node's clock (sim time); the default callback group
            self._timer = self._node.create_timer(period, self.tick)
            self.scheduling = "executor timer (use_sim_time)"
        else:
            self._thread = threading.Thread(target=self._loop, args=(stop, period, priority, cpus),
                                            name="oxygen-control", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """The run's stop event must be set by the caller first."""
        if self._timer is not None:
            self._node.destroy_timer(self._timer)
            self._timer = None
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)
            if thread.is_alive():
                self._node.get_logger().error(f"control thread did not stop within {timeout} s")

    def _loop(self, stop: threading.Event, period: float, priority: int, cpus: Sequence[int] = ()) -> None:
        """Absolute deadlines on the monotonic clock (no drift; a late tick does not shift the
        following ones). A dedicated thread instead of an executor timer: the executor's dispatch
        adds GIL hand-overs and its own Python work between the wake-up and the callback."""
        self.scheduling = "normal (control_priority 0)"
        if priority > 0:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
                self.scheduling = f"SCHED_FIFO {priority}"
            except (AttributeError, OSError) as exc:
                self.scheduling = f"normal (SCHED_FIFO {priority} not permitted: {exc})"
                self._node.get_logger().warning(
                    f"control_priority {priority}: SCHED_FIFO not permitted ({exc}); running at "
                    "normal priority (set rtprio in /etc/security/limits.conf)")
        if cpus:  # control_cpus: the ticks on cores of their own (robot/threads.py says why)
            placed = pin_thread(cpus)
            self.scheduling += f", {placed}"
            if not placed.startswith("CPUs"):
                self._node.get_logger().warning(f"control_cpus: {placed}")
        nxt = time.monotonic()
        while not stop.is_set():
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                stop.wait(delay)
            elif delay < -period:  # more than a whole period late: skip, do not burst
                nxt = time.monotonic()
            if stop.is_set():
                break
            woke = time.monotonic()
            self.late.add(woke, max(0.0, woke - nxt))
            cpu0 = time.thread_time()
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001
                if not self._node.context.ok():
                    return
                self._warn("control", f"control tick failed: {type(exc).__name__}: {exc}")
            if self._cpu is not None:
                poll, self._poll_cpu_s = self._poll_cpu_s, 0.0
                self._cpu.add("control_ticks", time.thread_time() - cpu0 - poll)

    # -- chunk gate (inference thread) ----------------------------------------------------------
    def admit(self, chunk: np.ndarray, stamp: float, now: float) -> tuple[str | None, bool]:
        """(why the chunk may not be played or None, whether ~/action_chunk may carry it): a
        chunk the gate refuses, or one made while the deadman holds, is not published there
        either, so that a trajectory controller wired to it gets neither."""
        refusal = self.gate(chunk, stamp, now)
        return refusal, refusal is None and self.deadman.go(self.monotonic())[0]

    def gate(self, chunk: np.ndarray, stamp: float, now: float) -> str | None:
        """None when the chunk may be played; else why not (counted, warned, diagnosed)."""
        measured = self._measured(now)
        # the value the player would play first (on the chunk's axis, interpolated, clipped)
        first = self.player.first_value(chunk, stamp, now)
        r = self.shaper.gate(first[None], now, now, measured)
        if r is None:
            return None
        if r.joint < 0:
            why = "no fresh measured joint pose to compare its start with"
        else:
            why = (f"{self._names[r.joint]} would start {r.distance:.3f} rad from the measured pose "
                   f"(max_start_deviation {r.limit:g})")
        self.gate_message = f"action chunk refused: {why}"
        self.last_gated = self.monotonic()
        self._warn("gate", f"{self.gate_message}: holding the last command")
        return self.gate_message

    def _measured(self, now: float) -> np.ndarray | None:
        """The fresh measured value of each command (NaN: a command without one), or None."""
        state = self.measured.fresh(now, self.player.observation_timeout_s)
        return state if self._robot is None else self._robot.measured_commands(state)

    def tick(self) -> None:
        now = self._node.get_clock().now()
        now_ns = now.nanoseconds
        t = now_ns * 1e-9
        if self._poll is not None:
            cpu0 = time.thread_time()
            self._poll(t)  # the newest joint state: the measured pose of this tick
            self._poll_cpu_s += time.thread_time() - cpu0  # counted as joint states', not here
        sample = self.player.tick(t)  # a played step (rtc counts them)
        mono = self.monotonic()
        self._count_deadman_publishers(mono)
        go, self.deadman_why = self.deadman.go(mono)
        if not go:
            hold = "deadman"
            self._warn("deadman", f"deadman {self.deadman_topic}: {self.deadman_why}: holding")
        else:
            hold = "stale" if sample is not None and sample.stale else ""
        measured = self._measured(t)
        if self._origin_ns is None:
            self._origin_ns = now_ns
        run_t = (now_ns - self._origin_ns) * 1e-9  # the shaper's and the check's time
        before = self.shaper.limits
        shaped = self.shaper.step(None if sample is None else sample.values, measured, hold,
                                  now=run_t)
        self.waiting_pose = sample is not None and measured is None and self.shaper.measures and (
            shaped is None or shaped.holding == "no measured joint pose")
        if self.waiting_pose:
            self._warn("pose", "no fresh measured joint pose (joint states): commands do not start")
        if shaped is None or sample is None:
            return
        if shaped.holding == GLITCH:
            self._glitch(mono)
        values = self._guard(shaped.values, measured, run_t, mono, before)
        if values is None:
            return
        self._publish(self._names, values, now.to_msg())
        self.holding = shaped.holding
        if np.count_nonzero(shaped.limited):
            self.limited_at[shaped.limited] = mono
            self.limited_times.append(mono)
        self.commands += 1
        self.ticks.append(mono)
        self.last_stale, self.last_future = sample.stale, sample.future
        self.last_age_s = sample.chunk_age_s
        self.last_index = sample.index
        if sample.stale:
            self.stale_ticks += 1
            if self.held_since is None:
                self.held_since = mono
            self.last_held = mono
            if sample.future:
                self._warn("future", f"action chunk stamped {-sample.chunk_age_s:.2f} s ahead of the "
                           "clock: holding the last command")
            else:
                self._warn("stale", f"no fresh observation for {sample.chunk_age_s:.2f} s: holding "
                           "the last command")
        else:
            self.held_since = None

    def _guard(self, values: np.ndarray, measured: np.ndarray | None, t: float, mono: float,
               before) -> np.ndarray | None:
        """The command to send: `values` when the last check passes; else the last command sent
        again (None before the first), the refusal counted, warned and diagnosed, and the shaper
        told what was really sent. The check compares with the last command sent (at the first
        command of a run: the measured pose) and the velocity limit in force before or after
        the step (a live change between the two reads: the shaper used one of them)."""
        after = self.shaper.limits
        velocity = (None if before.velocity is None or after.velocity is None
                    else np.maximum(before.velocity, after.velocity))
        prev = self._sent
        if prev is None and (measured is not None or not self.shaper.measures):
            # a first command: compared with the measured pose; a command without a measured
            # value (a gripper, a velocity) has nothing to step from, only its bounds
            prev = values if measured is None else np.where(np.isfinite(measured), measured, values)
        if prev is None:  # a first command, and no measured pose to check it against
            problem: tuple[int, str] | None = (-1, "a first command without a fresh measured pose")
        else:
            problem = command_problem(values, prev, t - self._sent_t if self._sent is not None
                                      else 0.0, self.player.lower, self.player.upper, velocity)
        if problem is None:
            self._sent, self._sent_t = np.array(values, dtype=np.float64), t
            return values
        j, what = problem
        name = self._names[j] if 0 <= j < len(self._names) else "command"
        self.guard_refused += 1
        self.last_guard = mono
        self.guard_message = f"command not sent: {name}: {what}"
        self._warn("guard", f"{self.guard_message}: holding the last good command")
        if self._sent is None:
            self.shaper.reset()  # nothing sent yet: start again from the measured pose
            return None
        self.shaper.override(self._sent, t)
        self._sent_t = t
        return self._sent.copy()

    def _glitch(self, mono: float) -> None:
        g = self.shaper.last_glitch
        if g is None:
            return
        self.last_glitch_at = mono
        self.glitch_message = (f"measured pose jumped: {self._names[g.joint]} is {g.distance:.3f} rad "
                               f"from the last command (max_tracking_error {g.limit:g}): holding, "
                               "not a target")
        self._warn("glitch", self.glitch_message)

    def _count_deadman_publishers(self, mono: float) -> None:
        """Publishers on the deadman topic from the ROS graph (every PUBLISHERS_PERIOD_S; named
        every NAMES_PERIOD_S while there are more than one)."""
        sub = self._deadman_sub
        if sub is None or mono - self._counted_at < PUBLISHERS_PERIOD_S:
            return
        self._counted_at = mono
        try:
            count = sub.get_publisher_count()
            names = self.deadman.publisher_names if count > 1 else ""
            if count > 1 and mono - self._named_at >= NAMES_PERIOD_S:
                self._named_at = mono
                infos = self._node.get_publishers_info_by_topic(sub.topic_name)
                names = ", ".join(sorted(f"{i.node_namespace.rstrip('/')}/{i.node_name}"
                                         for i in infos))
        except Exception as exc:  # noqa: BLE001 - a graph query failing must not stop the tick
            self._warn("deadman_graph", f"deadman {self.deadman_topic}: counting its publishers "
                       f"failed ({type(exc).__name__}: {exc}); the senders heard still count")
            return
        self.deadman.set_publishers(count, names)

    # -- diagnostics ----------------------------------------------------------------------------
    def status(self, active: bool, control_rate_hz: float, clock_problem: str = "") -> tuple[str, str, dict]:
        """WARN while commands are held (stale or future chunk, end of chunk: not with
        chunk_execution sync, where resting there is the loop) or were held in
        the last HELD_WINDOW_S; ERROR when no command went out for a second while active or a
        hold lasts longer than HOLD_ERROR_S."""
        now = self.monotonic()
        rate = recent_rate(self.ticks, now)
        last_tick = self.ticks[-1] if self.ticks else None
        horizon = self.player.horizon
        sync = self.player.config.execution == "sync"
        if not active:
            level, message = "OK", "inactive: no commands"
        elif clock_problem:
            level, message = "ERROR", clock_problem
        elif self.last_guard is not None and now - self.last_guard < ERROR_WINDOW_S:
            level, message = "ERROR", (f"{self.guard_message} ({now - self.last_guard:.1f} s ago): "
                                       "the last good command was held")
        elif self.deadman_why:
            level, message = "ERROR", (f"deadman {self.deadman_topic}: {self.deadman_why}: commands "
                                       "hold (not following the chunks)")
        elif not self.player.has_chunk:
            level, message = "WARN", "no action chunk yet: no commands"
        elif self.waiting_pose and (last_tick is None or now - last_tick > 1.0):
            level, message = "ERROR", ("no fresh measured joint pose (joint states): commands start "
                                       "only from the measured pose")
        elif last_tick is None or now - last_tick > 1.0:
            level, message = "ERROR", "no command published for over 1 s"
        elif self.last_glitch_at is not None and now - self.last_glitch_at < ERROR_WINDOW_S:
            level, message = "ERROR", self.glitch_message
        elif self.shaper.gate_holding:
            level, message = "WARN", f"{self.gate_message}: holding the last command"
        elif self.last_stale:
            held = now - (self.held_since or now)
            what = (f"action chunk stamped {-self.last_age_s:.2f} s ahead of the clock"
                    if self.last_future else f"stale observation ({self.last_age_s:.2f} s old)")
            level = "ERROR" if held > HOLD_ERROR_S else "WARN"
            message = f"{what}: holding the last command for {held:.1f} s"
        elif horizon and self.last_index == horizon - 1 and not sync:
            level, message = "WARN", "action chunk played to its end: holding its last step"
        elif self.last_held is not None and now - self.last_held < HELD_WINDOW_S:
            level, message = "WARN", f"commands were held {now - self.last_held:.1f} s ago"
        elif self.last_gated is not None and now - self.last_gated < HELD_WINDOW_S:
            level, message = "WARN", f"{self.gate_message} {now - self.last_gated:.1f} s ago"
        else:  # sync: resting after a chunk's last step until one observed at rest is normal
            level, message = "OK", "commanding" + (" (sync: each chunk to its end, the next one "
                                                   "observed at rest)" if sync else "")
        ticks = list(self.ticks)
        periods = sorted(b - a for a, b in zip(ticks, ticks[1:]) if now - b < HELD_WINDOW_S)
        late = self.late.window(now, HELD_WINDOW_S)
        limited = [n for n, t in zip(self._names, self.limited_at) if now - t < LIMITED_WINDOW_S]
        if limited and active and level == "OK":
            message += f"; velocity/acceleration limited: {', '.join(limited)}"
        return level, message, {
            "command_rate_hz": float(rate), "control_rate_hz": float(control_rate_hz),
            "chunk_rate_hz": 1.0 / self.player.dt,  # the chunk's step rate (its own time axis)
            "commands": self.commands, "stale_ticks": self.stale_ticks,
            "rejected_chunks": self.player.rejected, "chunk_age_s": float(self.last_age_s),
            "chunk_execution": self.player.config.execution,
            "chunk_replan_steps": self.player.config.replan_steps,
            # not played: sync, observed in motion; chunk_replan_steps, finished too soon
            "passed_chunks": self.player.passed,
            "limited_ticks": self.shaper.limited_ticks,
            "limited_ticks_last_2s": sum(1 for x in list(self.limited_times) if now - x < LIMITED_WINDOW_S),
            "limited_joints": ", ".join(limited),
            "gated_chunks": self.shaper.gated, "last_gate_refusal": self.gate_message,
            "control_scheduling": self.scheduling,
            # p50 / p99 / max of the period between the last (up to 256) commands of the last
            # 2 s; p50 / p99 of how late the thread woke for its ticks, and the worst
            "command_period_ms": ("n/a" if not periods else
                                  f"{1e3 * periods[len(periods) // 2]:.2f} / "
                                  f"{1e3 * periods[min(len(periods) - 1, int(0.99 * len(periods)))]:.2f}"
                                  f" / {1e3 * periods[-1]:.2f}"),
            "tick_late_ms": "n/a" if late is None else f"{late[1] * 1e3:.2f} / {late[2] * 1e3:.2f}",
            "tick_late_max_ms": "n/a" if late is None else round(late[3] * 1e3, 2),
            "deadman": ("off" if not self.deadman.enabled else
                        f"holding: {self.deadman_why}" if self.deadman_why else "go"),
            "deadman_publishers": self.deadman.publishers,
            "refused_commands": self.guard_refused, "last_refused_command": self.guard_message,
            "pose_jump_ticks": self.shaper.glitches, "last_pose_jump": self.glitch_message,
        }
