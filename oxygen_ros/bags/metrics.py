"""Numbers of one recorded run, from its bag (pure: BagData in, plain values out).

Clocks: a joint_command's header stamp is the node's clock when it was published; an action
chunk's, a FrameStats' and a TextMemory's header stamp is the SOURCE observation's stamp; log times
are when the recorder received the message (the node recorder and `ros2 bag record` stamp with
the receiving clock). So:
- commands: the node's ~/joint_command as either command_type records it (COMMAND_TYPES):
  sensor_msgs/JointState, or std_msgs/Float64MultiArray, which has no stamp and no names: its
  log time stands for its stamp and the action chunks' joint names name its values;
- command rate and period: from joint_command header stamps (the control loop's own times);
- action rate: action_chunk log times (one chunk per inference frame);
- observation -> command latency: for each chunk, the first joint_command recorded after it;
  latency = that command's stamp - the chunk's observation stamp;
- seam error: consecutive action chunks' first 4 steps against the previous chunk's steps at the
  same times (robot/seam.py): at the recorded joint_command ticks (seam_error, p99), and on the
  stamps' grid (seam_error_grid);
- tokens/s: tokens_this_frame summed over frames 2..n / (last - first FrameStats log time);
- memory / answer completion: frames_spanned of the final message, and final log time - the
  source observation stamp;
- command motion (per joint): velocity, acceleration and jerk of the joint_command positions by
  finite differences over the median command period (one command per control tick), max and p99
  of their magnitudes; the seam jump: the command step at every chunk switch (the first command
  logged at or after a chunk's log time) against the steps within chunks; limit hits and gate
  refusals from the control status' limited_ticks / gated_chunks counters;
- hold (stale) periods: runs of 1 Hz `<node>: control` diagnostics saying stale/holding, from the
  first such message to the first one that does not (so 1 s resolution); `stale_ticks` (the
  control status' counter) counts the held ticks exactly.
"""
from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from oxygen_ros.robot.seam import seam_errors

from .messages import stamp_ns
from .reader import BagData
from .typestore import DIAGNOSTICS, FLOAT64_ARRAY, FRAME_STATS, JOINT_STATE, TEXT_MEMORY, TRAJECTORY

# the parts of frame_ms (stacked in the plot); FrameStats may gain fields (e.g. a rate
# controller's chosen k or target): every other numeric field is reported as "other fields"
STAGES = ("vision_prefill_ms", "denoise_ms", "decode_ms", "kv_ms", "sched_ms")
KNOWN = {"header", "frame", "mode", "k", "n", "s", "frame_ms", *STAGES, "batch_size",
         "tokens_this_frame", "waiting_requests", "action_rate_hz", "tokens_per_s", "kv_blocks_used",
         "kv_blocks_total", "kv_bytes_used"}
# every type the node records its ~/joint_command as (node/outputs.py's COMMAND_OUTPUTS), in the
# order a topic is looked for
COMMAND_TYPES = (JOINT_STATE, FLOAT64_ARRAY)
TYPES = (*COMMAND_TYPES, TRAJECTORY, FRAME_STATS, TEXT_MEMORY, DIAGNOSTICS)  # what evaluate reads


@dataclass
class Topics:
    """Topic of each role; None = found by type and name suffix."""

    command: str | None = None
    chunk: str | None = None
    stats: str | None = None
    memory: str | None = None
    answer: str | None = None
    diagnostics: str | None = None

    def resolve(self, bag: BagData) -> "Topics":
        return Topics(
            command=_command_topic(bag, self.command),
            chunk=bag.find(TRAJECTORY, "action_chunk", self.chunk),
            stats=bag.find(FRAME_STATS, "", self.stats),
            memory=bag.find(TEXT_MEMORY, "memory", self.memory),
            answer=bag.find(TEXT_MEMORY, "answer", self.answer),
            diagnostics=bag.find(DIAGNOSTICS, "diagnostics", self.diagnostics))


def _command_topic(bag: BagData, explicit: str | None) -> str | None:
    """`explicit`, else the first topic in name order ending with joint_command of any
    COMMAND_TYPES type (as bag.find does for one type)."""
    if explicit:
        return explicit if explicit in bag.topics else None
    cands = sorted(c for ty in COMMAND_TYPES for c in bag.topics_of(ty) if c.endswith("joint_command"))
    return cands[0] if cands else None


@dataclass
class Evaluation:
    summary: dict[str, Any]
    series: dict[str, Any] = field(default_factory=dict)


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else float("nan")


def _rate(times_ns: np.ndarray) -> float:
    """Events per second; integer nanoseconds in (float seconds since 1970 lose the last digits)."""
    if len(times_ns) < 2 or times_ns[-1] <= times_ns[0]:
        return 0.0
    return (len(times_ns) - 1) / (int(times_ns[-1] - times_ns[0]) * 1e-9)


def evaluate(bag: BagData, topics: Topics | None = None) -> Evaluation:
    t = (topics or Topics()).resolve(bag)
    starts = [m[0][0] for m in bag.messages.values() if m]
    t0 = min(starts) if starts else 0
    ends = [m[-1][0] for m in bag.messages.values() if m]
    s: dict[str, Any] = {"bag": bag.path, "storage": bag.storage, "messages": bag.count,
                         "duration_s": (max(ends) - t0) * 1e-9 if ends else 0.0,
                         "errors": list(bag.errors), "topics": vars(t)}
    series: dict[str, Any] = {"t0_ns": t0}
    s["command_type"] = bag.topics.get(t.command, "") if t.command else ""
    if t.command and s["command_type"] not in COMMAND_TYPES:  # an explicit topic of another type
        s["errors"].append(f"command topic {t.command} is {s['command_type']}: oxygen-eval reads "
                           f"commands of types {list(COMMAND_TYPES)} only")
        t = dataclasses.replace(t, command=None)
    _commands(bag, t, t0, s, series)
    _chunks(bag, t, t0, s, series)
    _frames(bag, t, t0, s, series)
    _texts(bag, t, t0, s, series)
    _stale(bag, t, t0, s, series)
    _motion(bag, t, t0, s, series)
    return Evaluation(s, series)


def _command_messages(bag: BagData, t: Topics) -> list[tuple[int, Any]]:
    """The command topic's (log ns, message), each with JointState's header.stamp, name and
    position: a Float64MultiArray command is read with its log time as stamp and the action
    chunks' joint names (joint<i> when no chunk names them)."""
    cmds = bag.get(t.command)
    if bag.topics.get(t.command) != FLOAT64_ARRAY:
        return cmds
    chunk = next((m for _, m in bag.get(t.chunk)), None)
    out = []
    for ts, m in cmds:
        values = [float(v) for v in m.data]
        names = list(chunk.joint_names) if chunk is not None else []
        if len(names) != len(values):
            names = [f"joint{i}" for i in range(len(values))]
        stamp = SimpleNamespace(sec=ts // 1_000_000_000, nanosec=ts % 1_000_000_000)
        out.append((ts, SimpleNamespace(header=SimpleNamespace(stamp=stamp), name=names,
                                        position=values)))
    return out


def _commands(bag: BagData, t: Topics, t0: int, s: dict, series: dict) -> None:
    cmds = _command_messages(bag, t)
    stamps = np.array([stamp_ns(m.header.stamp) for _, m in cmds], dtype=np.int64)
    if len(stamps) and not stamps.any():  # unstamped publisher: fall back to log times
        stamps = np.array([ts for ts, _ in cmds], dtype=np.int64)
    periods_ms = np.diff(stamps) * 1e-6 if len(stamps) > 1 else np.zeros(0)
    s.update(commands=len(cmds), command_rate_hz=_rate(stamps),
             command_period_p50_ms=_pct(periods_ms, 50), command_period_p99_ms=_pct(periods_ms, 99),
             command_period_max_ms=float(periods_ms.max()) if len(periods_ms) else float("nan"))
    series["command_t"] = (stamps[1:] - t0) * 1e-9 if len(stamps) > 1 else np.zeros(0)
    series["command_period_ms"] = periods_ms


def _chunks(bag: BagData, t: Topics, t0: int, s: dict, series: dict) -> None:
    chunks = bag.get(t.chunk)
    logs = np.array([ts for ts, _ in chunks], dtype=np.int64)
    s.update(action_chunks=len(chunks), action_rate_hz=_rate(logs))
    cmds = _command_messages(bag, t)
    cmd_logs = [ts for ts, _ in cmds]
    lat = []
    for ts, m in chunks:
        i = bisect.bisect_left(cmd_logs, ts)
        if i < len(cmds):
            lat.append((stamp_ns(cmds[i][1].header.stamp) - stamp_ns(m.header.stamp)) * 1e-6)
    lat_a = np.array(lat)
    s.update(obs_to_command_ms_p50=_pct(lat_a, 50), obs_to_command_ms_p99=_pct(lat_a, 99),
             obs_to_command_ms_mean=float(lat_a.mean()) if len(lat_a) else float("nan"))
    series["latency_ms"] = lat_a
    values, dt = _chunk_values(chunks)
    ticks = np.sort(np.array([stamp_ns(m.header.stamp) for _, m in cmds], dtype=np.int64)) * 1e-9
    seams = seam_errors(values, dt, ticks=ticks if len(ticks) else None)
    grid = seam_errors(values, dt)
    s.update(seam_error=float(seams.mean()) if seams.size else float("nan"),
             seam_error_p99=_pct(seams, 99),
             seam_error_grid=float(grid.mean()) if grid.size else float("nan"))
    series["seam_error"] = seams


def _chunk_values(chunks: list) -> tuple[list[tuple[float, np.ndarray]], float]:
    """JointTrajectory chunks -> (stamp s, [points, joints]) and their step dt (from the first
    chunk with two points; 1.0 when none has)."""
    values, dt = [], 0.0
    for _, m in chunks:
        pts = list(m.points)
        if not pts:
            continue
        values.append((stamp_ns(m.header.stamp) * 1e-9,
                       np.array([list(p.positions) for p in pts], dtype=np.float64)))
        if not dt and len(pts) > 1:
            dt = stamp_ns(pts[1].time_from_start) * 1e-9  # a Duration: the same sec / nanosec
    return values, dt or 1.0


def _field(m: Any, name: str, default: float = 0.0) -> float:
    v = getattr(m, name, default)
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def _frames(bag: BagData, t: Topics, t0: int, s: dict, series: dict) -> None:
    frames = bag.get(t.stats)
    s["frames"] = len(frames)
    if not frames:
        s.update(tokens=0, tokens_per_s=0.0, frame_ms_p50=float("nan"), frame_ms_p99=float("nan"),
                 stage_ms={}, mean_batch=0.0, max_batch=0, kv_blocks_peak=0, kv_blocks_total=0)
        return
    msgs = [m for _, m in frames]
    logs = np.array([ts for ts, _ in frames], dtype=np.int64)
    # every float *_ms field is a stage (FrameStats may gain fields: read what is there)
    names = [f.name for f in dataclasses.fields(msgs[0])]
    stages = [f for f in STAGES if f in names]
    other = {}
    for f in names:
        if f not in KNOWN and isinstance(getattr(msgs[0], f), (bool, int, float, np.number)):
            vals = np.array([_field(m, f) for m in msgs])
            other[f] = {"mean": float(vals.mean()), "min": float(vals.min()), "max": float(vals.max()),
                        "last": float(vals[-1])}
    ks = np.array([_field(m, "k") for m in msgs])
    frame_ms = np.array([_field(m, "frame_ms") for m in msgs])
    tokens = np.array([_field(m, "tokens_this_frame") for m in msgs])
    batch = np.array([_field(m, "batch_size") for m in msgs])
    kv_used = np.array([_field(m, "kv_blocks_used") for m in msgs])
    kv_total = np.array([_field(m, "kv_blocks_total") for m in msgs])
    span = (logs[-1] - logs[0]) * 1e-9
    last = msgs[-1]
    s.update(tokens=int(tokens.sum()), tokens_per_s=float(tokens[1:].sum() / span) if span > 0 else 0.0,
             frame_ms_p50=_pct(frame_ms, 50), frame_ms_p99=_pct(frame_ms, 99),
             stage_ms={st: float(np.mean([_field(m, st) for m in msgs])) for st in stages},
             mean_batch=float(batch.mean()), max_batch=int(batch.max()),
             kv_blocks_peak=int(kv_used.max()), kv_blocks_total=int(kv_total.max()),
             other_fields=other, k_min=int(ks.min()), k_max=int(ks.max()),
             mode=str(getattr(last, "mode", "")), k=int(_field(last, "k")), N=int(_field(last, "n")),
             S=int(_field(last, "s")))
    series.update(frame_t=(logs - t0) * 1e-9, frame_ms=frame_ms,
                  stages={st: np.array([_field(m, st) for m in msgs]) for st in stages},
                  batch=batch, kv_used=kv_used, kv_total=kv_total, tokens=tokens)


def _texts(bag: BagData, t: Topics, t0: int, s: dict, series: dict) -> None:
    timeline = []
    for kind, topic in (("memory", t.memory), ("answer", t.answer)):
        finals = [(ts, m) for ts, m in bag.get(topic) if getattr(m, "is_final", False)]
        frames = np.array([_field(m, "frames_spanned") for _, m in finals])
        secs = np.array([(ts - stamp_ns(m.header.stamp)) * 1e-9 for ts, m in finals])
        s[f"{kind}_finished"] = len(finals)
        s[f"{kind}_frames_p50"] = _pct(frames, 50)
        s[f"{kind}_s_p50"] = _pct(secs, 50)
        s[f"{kind}_s_p99"] = _pct(secs, 99)
        for (ts, m), sec in zip(finals, secs):
            timeline.append({"kind": kind, "source_t": (stamp_ns(m.header.stamp) - t0) * 1e-9,
                             "final_t": (ts - t0) * 1e-9, "source_frame": int(_field(m, "source_frame")),
                             "frames": int(_field(m, "frames_spanned")), "seconds": float(sec),
                             "tokens": int(_field(m, "token_count")), "text": str(m.text),
                             "finish_reason": str(getattr(m, "finish_reason", ""))})
    timeline.sort(key=lambda r: r["source_t"])
    series["texts"] = timeline


def _periods(flags: list[tuple[float, bool]]) -> list[tuple[float, float]]:
    """(time, flag) in time order -> [start, end) of each run of True (end: first False after)."""
    out, start = [], None
    for ts, flag in flags:
        if flag and start is None:
            start = ts
        elif not flag and start is not None:
            out.append((start, ts))
            start = None
    if start is not None:
        out.append((start, flags[-1][0]))
    return out


def _kv(st: Any) -> dict[str, str]:
    return {str(kv.key): str(kv.value) for kv in st.values}


def _float(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def _stale(bag: BagData, t: Topics, t0: int, s: dict, series: dict) -> None:
    """Hold periods from the control status' stale_ticks counter (exact held time = ticks /
    control_rate_hz; a period is a diagnostics interval in which the counter grew); bags whose
    diagnostics lack the counter fall back to the status message ("stale ... holding")."""
    flags, inputs, ticks = [], [], []
    for ts, arr in bag.get(t.diagnostics):
        rel = (ts - t0) * 1e-9
        for st in arr.status:
            msg = str(st.message).lower()
            if st.name.endswith(": control"):
                flags.append((rel, "stale" in msg or "holding" in msg))
                kv = _kv(st)
                n, rate = _float(kv.get("stale_ticks")), _float(kv.get("control_rate_hz"))
                if n is not None:
                    ticks.append((rel, n, rate))
            elif st.name.endswith(": inputs"):
                inputs.append((rel, "stale" in msg))
    if ticks and all(r for _, _, r in ticks):
        hp: list[tuple[float, float]] = []
        held_s, total = 0.0, 0
        for (a_t, a, _), (b_t, b, rate) in zip(ticks, ticks[1:]):
            d = b - a if b >= a else b  # a smaller counter: the node was re-activated
            if d <= 0:
                continue
            held_s += d / rate
            total += int(d)
            if hp and hp[-1][1] == a_t:  # adjacent intervals: one period
                hp[-1] = (hp[-1][0], b_t)
            else:
                hp.append((a_t, b_t))
        s.update(hold_periods=len(hp), hold_s=float(held_s), stale_ticks=total)
    else:
        hp = _periods(flags)
        s.update(hold_periods=len(hp), hold_s=float(sum(b - a for a, b in hp)), stale_ticks=None)
    ip = _periods(inputs)
    s.update(input_stale_periods=len(ip), input_stale_s=float(sum(b - a for a, b in ip)))
    series.update(hold_periods=hp, input_stale_periods=ip)


def _counter(bag: BagData, t: Topics, key: str) -> int | None:
    """Growth of a control-status counter over the run (a smaller value: the node was
    re-activated and counts again from 0); None when the diagnostics lack it."""
    vals = [_float(_kv(st).get(key)) for _, arr in bag.get(t.diagnostics) for st in arr.status
            if st.name.endswith(": control")]
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    total = 0.0
    for a, b in zip(vals, vals[1:]):
        total += b - a if b >= a else b
    return int(total)


def _abs_stats(x: np.ndarray) -> tuple[float, float]:
    """(max, p99) of |x| over axis 0 -> per column; nan when empty."""
    if len(x) == 0:
        return float("nan"), float("nan")
    a = np.abs(x)
    return a.max(axis=0), np.percentile(a, 99, axis=0)


def _motion(bag: BagData, t: Topics, t0: int, s: dict, series: dict) -> None:
    cmds = _command_messages(bag, t)
    names = list(cmds[0][1].name) if cmds else []
    rows = [(ts, m) for ts, m in cmds if len(m.position) == len(names)]
    s.update(limited_ticks=_counter(bag, t, "limited_ticks"), gated_chunks=_counter(bag, t, "gated_chunks"))
    if len(rows) < 4 or not names:
        s["motion"] = {}
        for k in ("velocity_max", "velocity_p99", "acceleration_max", "jerk_max", "seam_step_mean",
                  "within_step_mean", "seam_jump_ratio"):
            s[f"command_{k}"] = float("nan")
        return
    pos = np.array([m.position for _, m in rows], dtype=np.float64)
    logs = np.array([ts for ts, _ in rows], dtype=np.int64)
    stamps = np.array([stamp_ns(m.header.stamp) for _, m in rows], dtype=np.int64)
    if not stamps.any():
        stamps = logs
    dt = float(np.median(np.diff(stamps))) * 1e-9
    dt = dt if dt > 0 else 1.0
    steps = np.diff(pos, axis=0)
    vel, acc = steps / dt, np.diff(steps, axis=0) / dt**2
    jerk = np.diff(acc, axis=0) / dt
    # the step into the first command logged at or after each chunk's log time: a seam
    chunk_logs = np.array([ts for ts, _ in bag.get(t.chunk)], dtype=np.int64)
    seam_idx = np.unique(np.searchsorted(logs, chunk_logs))  # index into pos
    seam_idx = seam_idx[(seam_idx >= 1) & (seam_idx < len(pos))] - 1  # index into steps
    is_seam = np.zeros(len(steps), bool)
    is_seam[seam_idx] = True
    seam, within = np.abs(steps[is_seam]), np.abs(steps[~is_seam])
    vmax, vp99 = _abs_stats(vel)
    amax, ap99 = _abs_stats(acc)
    jmax, jp99 = _abs_stats(jerk)
    per: dict[str, dict[str, float]] = {}
    for j, n in enumerate(names):
        per[n] = {"velocity_max": float(vmax[j]), "velocity_p99": float(vp99[j]),
                  "acceleration_max": float(amax[j]), "acceleration_p99": float(ap99[j]),
                  "jerk_max": float(jmax[j]), "jerk_p99": float(jp99[j]),
                  "seam_step_max": float(seam[:, j].max()) if len(seam) else float("nan"),
                  "seam_step_mean": float(seam[:, j].mean()) if len(seam) else float("nan"),
                  "within_step_max": float(within[:, j].max()) if len(within) else float("nan"),
                  "within_step_mean": float(within[:, j].mean()) if len(within) else float("nan")}
    seam_mean = float(seam.mean()) if len(seam) else float("nan")
    within_mean = float(within.mean()) if len(within) else float("nan")
    s.update(motion=per, command_velocity_max=float(vmax.max()), command_velocity_p99=float(vp99.max()),
             command_acceleration_max=float(amax.max()), command_jerk_max=float(jmax.max()),
             command_seam_step_mean=seam_mean, command_within_step_mean=within_mean,
             command_seam_jump_ratio=seam_mean / within_mean if within_mean > 0 else float("nan"),
             command_seams=int(is_seam.sum()))
    series.update(motion_names=names, motion_t=(stamps[1:] - t0) * 1e-9, motion_velocity=vel,
                  seam_steps=seam, within_steps=within)
