"""Humanoid I/O: does one node hold a humanoid's rates while the model runs? (Not a CI test.)

A fake humanoid (bench/fake_humanoid.py: a joint driver process at SCHED_FIFO, a camera rig
process) sends 30 joint positions at 500 Hz or 1 kHz and three 640x480 cameras at 30 Hz (raw
rgb8, then jpeg) to an `oxygen_node` process
(oxygen mode, k=1, N=30, a memory request every frame; commands at 200 or 500 Hz played from
50 Hz chunks by interpolation). The model is `balanced` with three cameras and 32 action dims
(random weights written to a temporary checkpoint with 30-joint statistics), or, for the
comparison with issue 36's figures, the `balanced` preset with its one camera. Each
configuration is a fresh node process, measured for --seconds after a warm-up; each model and
transport is also run "without the input load" (joint states at 50 Hz, commands at 50 Hz).

Per configuration: the command period's p50 / p99 / max from the commands' header stamps (the
node's tick times) and the ticks more than 4 periods apart; the longest executor stall (a
callback's start after its message arrived in the middleware, the node's `executor_delay`); the
age of the joint state each command and each inference used and the images' age at inference
(the node's diagnostics, p50 of the 2-s windows and the worst window's p99), beside the truth
the sender knows: the age of the newest joint state it had stamped when each command was made
(the floor any receiver could reach) and its own longest pause; messages received
vs sent per stream (the node's counters against what this process sent); action Hz and tokens/s
(~/frame_stats) against the run without the input load; CPU time by callback kind (the node's
`cpu_s` counters; "other": the executor, the middleware's threads, the collector); what the
`oxygen: inputs` diagnostic said. The `slow` configurations slow one stream to a tenth for the
second half of the run: the diagnostic must name it. The `pinned` configurations give the
model's thread a CPU of its own (`inference_cpus`; the node keeps its other threads off it) and
put the control thread and the fake robot's processes on the other CPUs (`control_cpus`).

    source scripts/env.sh && nice -n 10 oxygen-bench humanoid-io --out benchmarks/results/humanoid-io-<date>

About 25 minutes with the default 60 s per configuration (--seconds, --runs to choose).

`--alternate N` runs a base and its loaded configuration as phases of ONE node process (base,
loaded, loaded, base, ...; N of each, --seconds each): the ratio of action rates then carries
neither the variation between node processes nor the machine's drift (measure_alternating).

    oxygen-bench humanoid-io --runs 3cam-raw-base-fifo-pinned 3cam-raw-js500-cmd200-fifo-pinned \
        --alternate 4 --seconds 40 --out benchmarks/results/humanoid-io-<date>/alt
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..fake_humanoid import JOINT_PRIORITY, JOINT_TOPIC, JOINTS, FakeHumanoid, NodeOutputs, age_floor_ms
from oxygen_ros.node.inputs import HEALTH_WINDOW_S

from .node_process import ROOT, NodeServices, close_client, cpu_s, spin_client, start_node, stop_node

CHUNK_HZ = 50.0  # the chunk's step rate: commands at 200 / 500 Hz interpolate between steps


@dataclass(frozen=True)
class Run:
    name: str
    cameras: int  # 3: the three-camera checkpoint; 1: the balanced preset
    transport: str  # raw | compressed
    joint_hz: float
    control_hz: float
    slow: str = ""  # "joints" / "camera": that stream at a tenth for the second half
    priority: int = 0  # the node's control_priority (SCHED_FIFO; the inference thread one below)
    pinned: bool = False  # the model's thread on a CPU of its own, everything else on the others

    @property
    def baseline(self) -> str:
        """The run without the input load this one is compared with."""
        return (f"{self.cameras}cam-{self.transport}-base" + ("-fifo" if self.priority else "")
                + ("-pinned" if self.pinned else ""))


def placement() -> tuple[list[int], list[int]]:
    """The pinned runs' CPUs: (the model's, everything else's). The model gets the first CPU
    this process may use; the control thread, the fake robot's processes and (since the node
    starts them on any CPU and the model's thread keeps its own) the rest share the others."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise RuntimeError(f"a pinned run needs 2 CPUs; this process may use {cpus}")
    return cpus[:1], cpus[1:]


def _runs() -> list[Run]:
    runs = [Run("1cam-raw-base", 1, "raw", 50, 50)]
    runs += [Run(f"1cam-raw-js{int(j)}-cmd{int(c)}", 1, "raw", j, c) for j in (500, 1000) for c in (200, 500)]
    runs.append(Run("1cam-raw-js50-cmd200", 1, "raw", 50, 200))  # the joint states' part alone
    for tr in ("raw", "compressed"):
        runs.append(Run(f"3cam-{tr}-base", 3, tr, 50, 50))
        runs += [Run(f"3cam-{tr}-js{int(j)}-cmd{int(c)}", 3, tr, j, c)
                 for j in (500, 1000) for c in (200, 500)]
    runs += [Run("3cam-raw-js500-cmd200-slow-joints", 3, "raw", 500, 200, "joints"),
             Run("3cam-raw-js500-cmd200-slow-camera", 3, "raw", 500, 200, "camera")]
    # as docs/node.md asks for on the robot: the control thread SCHED_FIFO 20, inference at 19
    runs.append(Run("3cam-raw-base-fifo", 3, "raw", 50, 50, priority=20))
    runs += [Run(f"3cam-raw-js{int(j)}-cmd{int(c)}-fifo", 3, "raw", j, c, priority=20)
             for j in (500, 1000) for c in (200, 500)]
    # the load taken apart: only the joint states at 500 Hz, only the commands at 200 Hz
    runs += [Run("3cam-raw-js500-cmd50-fifo", 3, "raw", 500, 50, priority=20),
             Run("3cam-raw-js50-cmd200-fifo", 3, "raw", 50, 200, priority=20)]
    runs += [Run("3cam-compressed-base-fifo", 3, "compressed", 50, 50, priority=20),
             Run("3cam-compressed-js500-cmd200-fifo", 3, "compressed", 500, 200, priority=20)]
    # as docs/node.md (CPU affinity) asks for: FIFO, inference_cpus / control_cpus, and the
    # robot's drivers on the control thread's side
    for cams in (1, 3):
        runs.append(Run(f"{cams}cam-raw-base-fifo-pinned", cams, "raw", 50, 50, priority=20, pinned=True))
        runs += [Run(f"{cams}cam-raw-js{int(j)}-cmd{int(c)}-fifo-pinned", cams, "raw", j, c, priority=20,
                     pinned=True) for j in (500, 1000) for c in (200, 500)]
    runs += [Run(f"3cam-raw-js500-cmd200-slow-{what}-fifo-pinned", 3, "raw", 500, 200, what, priority=20,
                 pinned=True) for what in ("joints", "camera")]
    return runs


RUNS = {r.name: r for r in _runs()}
# the committed set (about 25 minutes at 60 s each); the others by --runs
DEFAULT_RUNS = [
    "1cam-raw-base", "1cam-raw-js500-cmd200",
    "3cam-raw-base", "3cam-raw-js500-cmd200", "3cam-raw-js500-cmd500", "3cam-raw-js1000-cmd200",
    "3cam-raw-js1000-cmd500",
    "3cam-compressed-base", "3cam-compressed-js500-cmd200", "3cam-compressed-js1000-cmd200",
    "3cam-raw-js500-cmd200-slow-joints", "3cam-raw-js500-cmd200-slow-camera",
    "3cam-raw-base-fifo", "3cam-raw-js500-cmd200-fifo", "3cam-raw-js500-cmd500-fifo",
    "3cam-raw-js1000-cmd500-fifo"]


def checkpoint(folder: Path) -> Path:
    """`balanced` with three cameras and 32 action dims, random weights, statistics for 30 joints."""
    from oxygen_ros.engine.config import load_model_config
    from oxygen_ros.engine.model import NormStats
    from oxygen_ros.engine.families.loader import init_model
    from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint
    from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

    mc = load_model_config("balanced").replace(num_cameras=3)
    n = len(JOINTS)
    stats = NormStats.quantiles(np.full(n, -2.0, np.float32), np.full(n, 2.0, np.float32),
                                np.full(n, -3.0, np.float32), np.full(n, 3.0, np.float32))
    return save_lerobot_checkpoint(init_model(mc, seed=0), mc, folder / "balanced3", norm_stats=stats,
                                   tokenizer=build_tiny_tokenizer(mc.vocab_size))


def node_params(run: Run, topics: list[str], ck: Path | None) -> list[str]:
    model = [f"model.checkpoint:={ck}"] if run.cameras == 3 else ["model.preset:=balanced"]
    return model + [
        "autostart:=true", "model.num_threads:=1", "mode:=oxygen", "decode_steps_per_frame:=1",
        "max_decode_steps:=30", "memory.enabled:=true", "memory.every_n_frames:=1",
        f"joint_names:={json.dumps(JOINTS)}", f"joint_state_topic:={JOINT_TOPIC}",
        f"camera_topics:={json.dumps(topics)}",
        f"camera_transports:={json.dumps([run.transport] * len(topics))}",
        f"control_rate_hz:={run.control_hz:.1f}", f"chunk_rate_hz:={CHUNK_HZ:.1f}",
        f"control_priority:={run.priority}",
        *([f"inference_cpus:={placement()[0]}", f"control_cpus:={placement()[1]}"] if run.pinned else []),
        # a loaded machine makes frames slow: chunks must not be stale on arrival (the timing of
        # the commands is measured, not what a slow model makes of them)
        "observation_timeout_s:=3.0"]


def machine_ticks() -> tuple[int, int, int]:
    """(busy, steal, total) jiffies of all CPUs since boot (/proc/stat): the machine's load over
    a window, the fake robot and this process included; steal: what a VM's host took."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = f[3] + f[4]  # idle + iowait
    steal = f[7] if len(f) > 7 else 0
    total = sum(f[:8])
    return total - idle - steal, steal, total


def _num(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def _pct(xs, q: float) -> float:
    return float(np.percentile(xs, q)) if len(xs) else float("nan")


def _window_stats(diags: list, status: str, key: str) -> tuple[float, float]:
    """(median of the windows' p50, worst window's p99) of a node diagnostic `key` whose
    values are '<p50> / <p99>' strings; nan when the node does not report it."""
    p50s, p99s = [], []
    for _, d in diags:
        v = d.get(status, (None, None, {}))[2].get(key)
        if v and "/" in v:
            a, b = (_num(x.strip()) for x in v.split("/")[:2])
            if a is not None and b is not None:
                p50s.append(a)
                p99s.append(b)
    return (statistics.median(p50s) if p50s else float("nan"), max(p99s) if p99s else float("nan"))


def _by_windows(times_ns: np.ndarray, values: np.ndarray, seconds: float) -> tuple[float, float]:
    """(median of the windows' p50, worst window's p99) of `values` at `times_ns`, in
    consecutive windows of `seconds` (the node's diagnostics' way); nan values are left out."""
    if not len(times_ns):
        return float("nan"), float("nan")
    win = (times_ns - times_ns[0]) // int(seconds * 1e9)
    p50s, p99s = [], []
    for w in np.unique(win):
        v = values[(win == w) & ~np.isnan(values)]
        if len(v):
            p50s.append(_pct(v, 50))
            p99s.append(_pct(v, 99))
    return (statistics.median(p50s) if p50s else float("nan"), max(p99s) if p99s else float("nan"))


def _counter(diags: list, status: str, key: str) -> float | None:
    """Last minus first value of a cumulative counter over the diagnostics received."""
    vals = [(t, _num(d.get(status, (None, None, {}))[2].get(key))) for t, d in diags]
    vals = [(t, v) for t, v in vals if v is not None]
    return None if len(vals) < 2 else vals[-1][1] - vals[0][1]


def _counter_span(diags: list) -> tuple[float, float] | None:
    return (diags[0][0], diags[-1][0]) if len(diags) >= 2 else None


@dataclass(frozen=True)
class Snapshot:
    """CPU counters at one instant: this window's start or end."""

    t: float  # monotonic
    node: float  # the node process's CPU s
    robot: dict[str, float]  # the fake robot's processes' CPU s
    own: float  # this process's CPU s
    machine: tuple[int, int, int]  # machine_ticks()


def snapshot(proc, robot: FakeHumanoid) -> Snapshot:
    return Snapshot(time.monotonic(), cpu_s(proc.pid),
                    {k: cpu_s(pid) for k, pid in robot.pids.items() if pid is not None},
                    time.process_time(), machine_ticks())


def usage(a: Snapshot, b: Snapshot) -> dict:
    """What used the 2 CPUs between two snapshots: the node, the fake robot's processes, this
    process (its subscriptions to the node's outputs), the machine as a whole (busy, stolen)."""
    dt = b.t - a.t
    busy, steal, total = (y - x for x, y in zip(a.machine, b.machine))
    return {"node_cpu_s_per_s": (b.node - a.node) / dt,
            "robot_cpu_s_per_s": {k: (b.robot[k] - a.robot[k]) / dt for k in a.robot if k in b.robot},
            "bench_cpu_s_per_s": (b.own - a.own) / dt,
            "machine_busy_cpus": os.cpu_count() * busy / total if total else float("nan"),
            "machine_steal_cpus": os.cpu_count() * steal / total if total else float("nan")}


def driver_figures(robot: FakeHumanoid, t0: float, t1: float) -> dict:
    """The joint driver's scheduling and its publish() time (stamp to return) in [t0, t1)."""
    sent = np.asarray(robot.joints.sent_times, dtype=np.float64)
    n = min(len(sent), len(robot.joint_published_ns), len(robot.joints.sent_stamps))
    pub_ms = (np.asarray(robot.joint_published_ns[:n], dtype=np.float64)
              - np.asarray(robot.joints.sent_stamps[:n], dtype=np.float64)) * 1e-6
    pub_ms = pub_ms[(sent[:n] >= t0) & (sent[:n] < t1)]
    return {"joint_driver_scheduling": robot.joint_scheduling,
            "joint_driver_publish_ms": (_pct(pub_ms, 50), _pct(pub_ms, 99),
                                        float(pub_ms.max()) if len(pub_ms) else float("nan"))}


def _header(run: Run) -> dict:
    return {"run": run.name, "cameras": run.cameras, "transport": run.transport,
            "joint_hz": run.joint_hz, "control_hz": run.control_hz, "slow": run.slow,
            "control_priority": run.priority, "pinned": run.pinned}


def window(run: Run, robot: FakeHumanoid, outs: NodeOutputs, s0: Snapshot, s1: Snapshot,
           t_half: float | None = None) -> dict:
    """A measured window's result (the robot stopped: its records are read)."""
    res = _header(run)
    res.update(summarise(run, robot, outs, s0.t, s1.t, t_half))
    res.update(usage(s0, s1))
    res.update(driver_figures(robot, s0.t, s1.t))
    return res


def close_all(robot: FakeHumanoid, outs: NodeOutputs, proc, ex, node, log) -> None:
    robot.stop()
    outs.close()
    stop_node(proc)
    close_client(ex, node)
    log.close()


def _wait_frame(outs: NodeOutputs, proc, log_path: Path, timeout_s: float = 300.0) -> None:
    """Until a frame newer than now arrives (the node is up and inferring)."""
    n, t_start = len(outs.frames), time.monotonic()
    while len(outs.frames) <= n:
        if proc.poll() is not None or time.monotonic() - t_start > timeout_s:
            raise RuntimeError(f"the node did not start; its log: {log_path}")
        time.sleep(0.2)


def measure(run: Run, seconds: float, warm: float, ck: Path | None, log_path: Path,
            joint_priority: int) -> dict:
    import rclpy

    rclpy.init()
    node = rclpy.create_node("oxygen_humanoid_io_bench")
    robot = FakeHumanoid(run.joint_hz, run.cameras, run.transport, joint_priority=joint_priority,
                         cpus=tuple(placement()[1]) if run.pinned else ())
    outs = NodeOutputs(node)
    ex = spin_client(node)
    log = open(log_path, "wb")
    proc = start_node(node_params(run, robot.topics, ck), log)
    try:
        robot.start()
        _wait_frame(outs, proc, log_path)
        time.sleep(warm)
        outs.clear()
        s0 = snapshot(proc, robot)
        if run.slow:
            time.sleep(seconds / 2)
            t_half = time.monotonic()
            if run.slow == "camera":  # the rig's last camera at a tenth
                robot.slow_camera(len(robot.cams) - 1, 10)
            else:
                robot.slow_joints(10.0)
            time.sleep(seconds / 2)
        else:
            time.sleep(seconds)
            t_half = None
        s1 = snapshot(proc, robot)
        robot.stop()  # its records: what it sent
        res = window(run, robot, outs, s0, s1, t_half)
    finally:
        close_all(robot, outs, proc, ex, node, log)
    return res


def comparable(base: Run, loaded: Run) -> str | None:
    """Why two configurations cannot be phases of one node process, else None: the same model,
    cameras, transport and placement (what a phase does not change), neither slowed."""
    if base.slow or loaded.slow:
        return "a slowed stream is measured in a run of its own"
    if (base.cameras, base.transport, base.priority, base.pinned) != (
            loaded.cameras, loaded.transport, loaded.priority, loaded.pinned):
        return f"{base.name} and {loaded.name} differ in cameras, transport, priority or pinning"
    return None


def abba(base: Run, loaded: Run, phases: int) -> list[Run]:
    """`phases` of each in the order base, loaded, loaded, base, ...: a drift of the machine's
    speed that is linear over a block of four weighs on both alike."""
    return [(base, loaded, loaded, base)[i % 4] for i in range(2 * phases)]


def measure_alternating(base: Run, loaded: Run, phases: int, seconds: float, warm: float,
                        ck: Path | None, log_path: Path, joint_priority: int) -> list[dict]:
    """The base and the loaded configuration as phases of ONE node process (`abba` order).
    Every phase starts alike: the node deactivated and cleaned up, the joint driver set to the
    phase's rate, control_rate_hz set, the node configured (the model loaded again) and
    activated; then `warm` s after its first frame, `seconds` measured. Between node processes
    a base's own rate varied up to 9 % on a shared VM (humanoid-io-2026-12-07): phases of one
    process, alternated, leave that variation and the machine's drift out of the ratio. Two
    configurations with the same command rate differ only in the joint driver's rate: their
    phases follow each other without the lifecycle round (only the driver's rate changes)."""
    from lifecycle_msgs.msg import Transition
    import rclpy

    reason = comparable(base, loaded)
    if reason:
        raise ValueError(f"--alternate: {reason}")
    order = abba(base, loaded, phases)
    reconfigure = base.control_hz != loaded.control_hz
    rclpy.init()
    node = rclpy.create_node("oxygen_humanoid_io_bench")
    robot = FakeHumanoid(order[0].joint_hz, base.cameras, base.transport, joint_priority=joint_priority,
                         cpus=tuple(placement()[1]) if base.pinned else ())
    outs = NodeOutputs(node)
    log = open(log_path, "wb")
    proc = start_node(node_params(order[0], robot.topics, ck), log)
    services = NodeServices(node, proc, log_path)
    ex = spin_client(node)
    windows: list[tuple[Run, Snapshot, Snapshot]] = []
    try:
        robot.start()
        _wait_frame(outs, proc, log_path)
        for i, run in enumerate(order):
            robot.set_joint_hz(run.joint_hz)
            if reconfigure:
                services.transition(Transition.TRANSITION_DEACTIVATE)
                services.transition(Transition.TRANSITION_CLEANUP)
                services.set({"control_rate_hz": float(run.control_hz)})
                services.transition(Transition.TRANSITION_CONFIGURE)
                services.transition(Transition.TRANSITION_ACTIVATE)
            _wait_frame(outs, proc, log_path)
            time.sleep(warm)
            s0 = snapshot(proc, robot)
            time.sleep(seconds)
            s1 = snapshot(proc, robot)
            windows.append((run, s0, s1))
            print(f"phase {i + 1} of {len(order)}: {run.name}, "
                  f"{sum(1 for t, _ in list(outs.frames) if s0.t <= t < s1.t) / (s1.t - s0.t):.2f} frames/s",
                  flush=True)
        robot.stop()  # its records: what it sent
        results = [dict(window(run, robot, outs, s0, s1), phase=i, phases=len(order))
                   for i, (run, s0, s1) in enumerate(windows)]
    finally:
        close_all(robot, outs, proc, ex, node, log)
    return results


def summarise(run: Run, robot: FakeHumanoid, outs: NodeOutputs, t0: float, t1: float,
              t_half: float | None) -> dict:
    dt = t1 - t0
    cmds = sorted(c for c in list(outs.commands) if t0 <= c[1] < t1)
    stamps = np.array([c[0] for c in cmds], dtype=np.int64)
    per = np.diff(stamps) * 1e-6 if len(stamps) > 1 else np.array([])  # ms
    nominal = 1e3 / run.control_hz
    frames = [m for t, m in list(outs.frames) if t0 <= t < t1]
    diags = [(t, d) for t, d in list(outs.diags) if t0 <= t < t1]
    r: dict = {
        "seconds": dt, "commands": len(cmds), "command_hz": len(cmds) / dt,
        "period_ms_p50": _pct(per, 50), "period_ms_p99": _pct(per, 99),
        "period_ms_max": float(per.max()) if len(per) else float("nan"),
        "gaps_over_4_periods": int((per > 4 * nominal).sum()),
        "action_hz": len(frames) / dt,
        "tokens_per_s": sum(m.tokens_this_frame for m in frames) / dt,
        "frame_ms_mean": statistics.mean(m.frame_ms for m in frames) if frames else float("nan"),
    }
    r["age_at_command_ms"] = _window_stats(diags, "inputs", f"{JOINT_TOPIC} age_at_command_ms")
    r["joint_delivery_ms"] = _window_stats(diags, "inputs", f"{JOINT_TOPIC} delivery_ms")
    # the truth: at each command's time, the age of the newest joint state the driver had stamped
    # (in 2-s windows as the node's figure: the median window's p50, the worst window's p99)
    r["sender_age_floor_at_command_ms"] = _by_windows(
        stamps, age_floor_ms(robot.joints.sent_stamps, robot.joint_published_ns, stamps), HEALTH_WINDOW_S)
    r["age_at_inference_ms"] = _window_stats(diags, "inputs", f"{JOINT_TOPIC} age_at_inference_ms")
    r["image_age_at_inference_ms"] = _window_stats(diags, "inputs",
                                                   f"{robot.topics[0]} age_at_inference_ms")
    delays = [_num(d.get("inputs", (None, None, {}))[2].get("executor_delay_max_ms")) for _, d in diags]
    delays = [x for x in delays if x is not None]
    r["executor_stall_ms"] = max(delays) if delays else float("nan")
    lates = [_num(d.get("control", (None, None, {}))[2].get("tick_late_max_ms")) for _, d in diags]
    lates = [x for x in lates if x is not None]
    r["tick_late_max_ms"] = max(lates) if lates else float("nan")
    # received (the node's counters between its first and last report) vs sent meanwhile
    span = _counter_span(diags)
    streams = {}
    for s in (robot.joints, *robot.cams):
        got = _counter(diags, "inputs", f"{s.topic} received")
        sent = robot.sent_between(s, *span) if span else 0
        # the sender's own longest pause: an age at use beyond it is the node's doing
        gap = s.max_pause_ms(t0, t1)
        streams[s.topic] = {"sent": sent, "received": got, "sender_max_gap_ms": gap}
    r["streams"] = streams
    cpu = {}
    for kind in ("joint_states", "camera_callbacks", "control_ticks", "inference"):
        v = _counter(diags, "inputs", f"cpu_s {kind}")
        cpu[kind] = None if v is None or not span else v / (span[1] - span[0])
    r["cpu_s_per_s"] = cpu
    # what the inputs diagnostic said, per half for a slowed stream
    halves = [("all", diags)] if t_half is None else [
        ("before", [x for x in diags if x[0] < t_half]),
        ("slowed", [x for x in diags if x[0] >= t_half + 3.0])]  # its windows have seen it
    said = {}
    for label, ds in halves:
        levels = [d.get("inputs", ("?", "", {}))[0] for _, d in ds]
        msgs = [d.get("inputs", ("?", "", {}))[1] for _, d in ds]
        common = max(set(msgs), key=msgs.count) if msgs else ""
        warns = [m for lvl, m in zip(levels, msgs) if lvl == "WARN"]
        said[label] = {"reports": len(levels), "ok": levels.count("OK"), "warn": levels.count("WARN"),
                       "most_said": common,
                       "warnings": {m: warns.count(m) for m in sorted(set(warns), key=warns.count)[-3:]}}
    r["inputs_diagnostic"] = said
    return r


def row_name(r: dict) -> str:
    """A result's row name: the configuration, its repetition when there were several, its
    phase when it was one of an alternating process."""
    name = r["run"] if not r.get("repeats", 1) > 1 else f"{r['run']} #{r['repeat'] + 1}"
    return name if "phase" not in r else f"{name}, phase {r['phase'] + 1} of {r['phases']}"


def base_of(r: dict, results: list[dict]) -> dict | None:
    """The run without the input load measured in the same repetition (None: not run, or a
    phase of an alternating process: those are compared by `alternation`)."""
    if "phase" in r:
        return None
    name = RUNS[r["run"]].baseline
    return next((b for b in results if b["run"] == name and b.get("repeat", 0) == r.get("repeat", 0)),
                None)


def ratios(results: list[dict]) -> dict[str, list[float]]:
    """Action Hz against the run without the load, per loaded configuration, one per repetition."""
    out: dict[str, list[float]] = {}
    for r in results:
        b = base_of(r, results)
        if b is not None and b is not r and b["action_hz"]:
            out.setdefault(r["run"], []).append(r["action_hz"] / b["action_hz"])
    return out


def alternation(results: list[dict]) -> list[str]:
    """The report's section for alternating processes: per process, each phase's frames/s,
    the loaded phases' mean against the base phases' (the ratio), and the ratio per block of
    four phases (base, loaded, loaded, base)."""
    procs: dict[int, list[dict]] = {}
    for r in results:
        if "phase" in r:
            procs.setdefault(r.get("repeat", 0), []).append(r)
    if not procs:
        return []
    lines = ["", "## Base and loaded phases in one node process (`--alternate`)", "",
             "Each process runs the configuration without the load and the loaded one as phases in "
             "the order without, loaded, loaded, without, ...; where their command rates differ, "
             "every phase starts with the node cleaned up and configured again at the phase's "
             "command rate, else only the joint driver's rate changes. Ratio: the loaded phases' "
             "mean action Hz over the others' mean; per block: the same within each block of four "
             "phases, and their median and range.", "",
             "| process | without / with the load | phases without, frames/s | loaded phases frames/s "
             "| ratio | ratio per block | blocks: median (min - max) | tokens/s ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for rep, rs in sorted(procs.items()):
        base_name = rs[0]["run"]
        loaded = next((r["run"] for r in rs if r["run"] != base_name), "?")
        kind = lambda rr, name: [r for r in rr if r["run"] == name]
        b, lo = kind(rs, base_name), kind(rs, loaded)
        mean = lambda xs, key: statistics.mean(x[key] for x in xs) if xs else float("nan")
        hz = lambda xs: [x["action_hz"] for x in xs]
        blocks = [rs[i:i + 4] for i in range(0, len(rs), 4)]
        per_block = [mean(kind(bl, loaded), "action_hz") / mean(kind(bl, base_name), "action_hz")
                     for bl in blocks if kind(bl, loaded) and kind(bl, base_name)]
        spread = (f"{statistics.median(per_block):.3f} ({min(per_block):.3f} - {max(per_block):.3f})"
                  if per_block else "n/a")
        lines.append(
            f"| {rep + 1} | {base_name} / {loaded} | {', '.join(f'{x:.2f}' for x in hz(b))} | "
            f"{', '.join(f'{x:.2f}' for x in hz(lo))} | "
            f"{mean(lo, 'action_hz') / mean(b, 'action_hz'):.3f} | "
            f"{', '.join(f'{x:.3f}' for x in per_block)} | {spread} | "
            f"{mean(lo, 'tokens_per_s') / mean(b, 'tokens_per_s'):.3f} |")
    return lines


def report(results: list[dict], args, load0: str, load1: str) -> str:
    f = lambda x, d=1: "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{d}f}"
    lines = ["# Humanoid I/O benchmark", "",
             f"Command: `oxygen-bench humanoid-io {shlex.join(args)}`", "",
             f"`/proc/loadavg` before: `{load0}`; after: `{load1}` ({os.cpu_count()} CPUs; a shared "
             "machine distorts absolute numbers).", "",
             "Fake humanoid: 30 joints (best effort), 640x480 cameras at 30 Hz; oxygen mode, k=1, N=30, a "
             f"memory request every frame; chunk step rate {CHUNK_HZ:g} Hz, commands interpolated. "
             "`base`: joint states at 50 Hz and commands at 50 Hz (the run without the input load). "
             "The joint driver and the camera rig are processes of their own; the joint driver's "
             f"scheduling: {', '.join(sorted({r.get('joint_driver_scheduling', '?') for r in results}))}. "
             "Sender's floor: at each command's time, the age of the newest joint state the driver had "
             "published (the youngest any receiver could use); stamp -> arrival: a taken joint state's "
             "stamp to its arrival in the node's middleware (the node's `delivery_ms`).", "",
             "## Rates and timing", "",
             "| run | cmd Hz (nominal) | period p50 / p99 / max ms | gaps > 4 periods | executor stall ms "
             "| control tick late max ms | joint age at command p50 / p99 ms (sender's floor; stamp -> arrival) | joint age "
             "at inference p50 / p99 ms | image age at inference p50 / p99 ms | action Hz (x base) "
             "| tokens/s (x base) | node CPU s/s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        b = base_of(r, results)
        xa = f" ({r['action_hz'] / b['action_hz']:.3f}x)" if b and b["action_hz"] else ""
        xt = f" ({r['tokens_per_s'] / b['tokens_per_s']:.3f}x)" if b and b["tokens_per_s"] else ""
        a, i, im = r["age_at_command_ms"], r["age_at_inference_ms"], r["image_age_at_inference_ms"]
        fl = r.get("sender_age_floor_at_command_ms", (None, None))
        dl = r.get("joint_delivery_ms", (None, None))
        lines.append(
            f"| {row_name(r)} | {f(r['command_hz'])} ({r['control_hz']:g}) | {f(r['period_ms_p50'], 2)} / "
            f"{f(r['period_ms_p99'], 2)} / {f(r['period_ms_max'])} | {r['gaps_over_4_periods']} | "
            f"{f(r['executor_stall_ms'])} | {f(r['tick_late_max_ms'])} | {f(a[0], 2)} / {f(a[1], 2)} "
            f"({f(fl[0], 2)} / {f(fl[1], 2)}; {f(dl[0], 2)} / {f(dl[1], 2)}) | "
            f"{f(i[0])} / {f(i[1])} | {f(im[0])} / {f(im[1])} | {f(r['action_hz'], 2)}{xa} | "
            f"{f(r['tokens_per_s'])}{xt} | {f(r['node_cpu_s_per_s'], 2)} |")
    lines += ["", "## Streams: received by the node vs sent, and CPU by callback kind", "",
              "| run | joint states received / sent | joint sender's longest pause ms "
              "| joint driver's publish() p99 / max ms "
              "| cameras received / sent | CPU s/s: joint states (taken) "
              "| camera callbacks | control ticks | inference | other (executor, middleware, GC) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        st = list(r["streams"].items())
        js = st[0][1]
        cams = ", ".join(f"{v['received'] if v['received'] is not None else 'n/a'} / {v['sent']}" for _, v in st[1:])
        c = r["cpu_s_per_s"]
        pb = r.get("joint_driver_publish_ms", (None, None, None))
        known = [v for v in c.values() if v is not None]
        other = r["node_cpu_s_per_s"] - sum(known) if len(known) == len(c) else None
        lines.append(f"| {row_name(r)} | {js['received'] if js['received'] is not None else 'n/a'} / {js['sent']} | "
                     f"{f(js.get('sender_max_gap_ms'))} | {f(pb[1], 2)} / {f(pb[2], 1)} | {cams} | {f(c['joint_states'], 3)} | {f(c['camera_callbacks'], 3)} | "
                     f"{f(c['control_ticks'], 3)} | {f(c['inference'], 3)} | {f(other, 3)} |")
    lines += ["", "## The machine meanwhile (CPU s/s; 'busy': CPUs in use of "
              f"{os.cpu_count()}, all processes)", "",
              "| run | node | joint driver | camera rig | this benchmark | machine busy | stolen by the host |",
              "|---|---|---|---|---|---|---|"]
    for r in results:
        rc = r.get("robot_cpu_s_per_s", {})
        lines.append(f"| {row_name(r)} | {f(r['node_cpu_s_per_s'], 2)} | {f(rc.get('joint_driver'), 2)} | "
                     f"{f(rc.get('camera_rig'), 2)} | {f(r.get('bench_cpu_s_per_s'), 2)} | "
                     f"{f(r.get('machine_busy_cpus'), 2)} | {f(r.get('machine_steal_cpus'), 3)} |")
    lines += ["", "## What `oxygen: inputs` said (1 Hz reports: OK / WARN, the most frequent message)", "",
              "| run | part | OK | WARN | most said | warnings (count) |", "|---|---|---|---|---|---|"]
    for r in results:
        for part, s in r["inputs_diagnostic"].items():
            warned = "; ".join(f"{m} ({n})" for m, n in s.get("warnings", {}).items())
            lines.append(f"| {row_name(r)} | {part} | {s['ok']} | {s['warn']} | {s['most_said']} | {warned} |")
    per = ratios(results)
    if any(len(v) > 1 for v in per.values()):
        lines += ["", "## Action Hz against the run without the input load, per repetition", "",
                  "Each repetition measures the base and then the loaded configuration, each in a fresh "
                  "node process: the base's own rate varies between processes on a shared machine, so "
                  "the spread of the ratios is part of the result.", "",
                  "| run | ratio per repetition | median | min - max |", "|---|---|---|---|"]
        for name, v in per.items():
            lines.append(f"| {name} | {', '.join(f'{x:.3f}' for x in v)} | {statistics.median(v):.3f} "
                         f"| {min(v):.3f} - {max(v):.3f} |")
    lines += alternation(results)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="measured seconds per configuration")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds after the first frame before measuring")
    ap.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, choices=list(RUNS), metavar="RUN",
                    help=f"configurations (default: {len(DEFAULT_RUNS)} of them): {', '.join(RUNS)}")
    ap.add_argument("--dds-profile", default=str(ROOT / "config" / "fastdds_big_images.xml"),
                    help="FASTDDS_DEFAULT_PROFILES_FILE for this process and the node ('' = defaults)")
    ap.add_argument("--joint-priority", type=int, default=JOINT_PRIORITY,
                    help="SCHED_FIFO priority of the fake joint driver (0: normal), as a robot's is")
    ap.add_argument("--repeats", type=int, default=1,
                    help="measure the --runs this many times, in order (each loaded run is compared "
                         "with its base of the same repetition)")
    ap.add_argument("--alternate", type=int, default=0, metavar="N",
                    help="run the two --runs (a base, then a loaded configuration of it) as N phases "
                         "each of ONE node process, in the order base, loaded, loaded, base, ... "
                         "(--seconds per phase): the ratio without the variation between processes")
    ap.add_argument("--out", default=None, help="folder for README.md (the report) and results.json")
    args = ap.parse_args(argv)
    if not 1 <= args.repeats <= 20:
        ap.error("--repeats must be 1..20")
    if args.alternate:
        if not 1 <= args.alternate <= 50:
            ap.error("--alternate must be 1..50")
        if len(args.runs) != 2:
            ap.error("--alternate takes two --runs: the one without the load, then the loaded one "
                     "(e.g. 3cam-raw-base-fifo 3cam-raw-js500-cmd200-fifo)")
        reason = comparable(RUNS[args.runs[0]], RUNS[args.runs[1]])
        if reason:
            ap.error(f"--alternate: {reason}")
    if args.dds_profile:
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = args.dds_profile
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("ROS_DOMAIN_ID", str(101 + os.getpid() % 100))
    load0 = Path("/proc/loadavg").read_text().strip()
    tmp = Path(tempfile.mkdtemp(prefix="oxygen_humanoid_io_"))
    runs = [RUNS[n] for n in args.runs]
    ck = checkpoint(tmp) if any(r.cameras == 3 for r in runs) else None
    results = []
    for rep in range(args.repeats):
        for run in [] if args.alternate else runs:
            print(f"== {run.name} (repetition {rep + 1} of {args.repeats})", flush=True)
            res = measure(run, args.seconds, args.warmup, ck, tmp / f"{run.name}-{rep}.log",
                          args.joint_priority)
            res.update(repeat=rep, repeats=args.repeats)
            print(json.dumps(res, default=float), flush=True)
            results.append(res)
        if args.alternate:
            print(f"== {runs[0].name} / {runs[1].name} alternating, {args.alternate} phases each "
                  f"(repetition {rep + 1} of {args.repeats})", flush=True)
            for res in measure_alternating(runs[0], runs[1], args.alternate, args.seconds, args.warmup,
                                           ck, tmp / f"alternate-{rep}.log", args.joint_priority):
                res.update(repeat=rep, repeats=args.repeats)
                print(json.dumps(res, default=float), flush=True)
                results.append(res)
    load1 = Path("/proc/loadavg").read_text().strip()
    text = report(results, argv, load0, load1)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "README.md").write_text(text)
        (out / "results.json").write_text(json.dumps(results, indent=1, default=float) + "\n")
    return 0
