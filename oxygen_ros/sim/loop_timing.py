"""What limited a closed-loop run, from its bag (oxygen-sim eval's bags/<setting>/).

    oxygen-sim loop-timing BAG [BAG ...] [--episodes]

1. The chunks' timing: observation -> chunk latency (a chunk's log time minus its observation
   stamp), the period between chunks, and the share of control ticks whose newest chunk was
   older than its last step (`past_end`: the player holds that step, the plan ran out) or than
   the node's observation_timeout_s (`stale`: the node holds its last command). A policy whose
   chunk covers 0.4 s (8 steps at 20 Hz) runs out when latency + period exceed it.

2. How each episode started: did the node command the new scene, or was it still holding the
   previous episode's last command? The simulator resets by teleporting the arm and opening the
   gripper, and while it resets it publishes no image (env.reset + a first render). When that
   gap is longer than the node's observation_timeout_s minus its latency, the node holds
   (stale); after a hold its restart check (max_tracking_error) sees the measured pose far from
   its last command, a pose jump, and keeps holding the last command until the arm is back near
   it (docs/command-safety.md): the sim then drives the arm towards the previous episode's final
   pose before the policy takes over. Per episode: whether the node's newest command when the
   sim's reset hold ends (the first status with step > 0) is still exactly the previous
   episode's last command (`held`), for how long after that it stays so (`held_s`), the longest
   gap between two camera images around the reset, and the outcome.

Prints a JSON summary per bag.
"""
from __future__ import annotations

import argparse
import bisect
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

SAME = 1e-9  # a command this close to another on every joint is the same command (held)


@dataclass
class Start:
    episode: int
    task: str
    held: bool  # the node still sent the previous episode's last command at the hold's end
    held_s: float  # how long after the hold's end it went on sending it (0 when not held)
    image_gap_s: float  # longest interval between camera images in the 1.5 s before the hold's end
    success: bool


def _newest(times: list[int], t: int) -> int | None:
    i = bisect.bisect_right(times, t) - 1
    return i if i >= 0 else None


def _read(bag: str | Path):
    from oxygen_ros.bags.reader import read_bag

    return read_bag(bag, topics=["/sim/episode", "/oxygen/joint_command", "/sim/camera/image_raw",
                                 "/oxygen/action_chunk"])


def chunk_timing(bag: str | Path, observation_timeout_s: float = 0.5, b=None) -> dict:
    """Latency and period of the chunks (ms percentiles) and the share of command ticks whose
    newest chunk was past its last step / older than observation_timeout_s."""
    b = _read(bag) if b is None else b
    chunks = b.get("/oxygen/action_chunk")
    if not chunks:
        return {"chunks": 0}
    log = np.array([t for t, _ in chunks], dtype=np.int64)
    stamp = np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for _, m in chunks], np.int64)
    span = np.array([m.points[-1].time_from_start.sec * 10**9 + m.points[-1].time_from_start.nanosec
                     for _, m in chunks], dtype=np.int64)
    ticks = np.array([t for t, _ in b.get("/oxygen/joint_command")], dtype=np.int64)
    i = np.searchsorted(log, ticks, side="right") - 1
    ticks, i = ticks[i >= 0], i[i >= 0]
    age = ticks - stamp[i]

    def pct(x: np.ndarray) -> list[float]:
        return [round(float(v), 1) for v in np.percentile(x, [50, 90, 99])] if len(x) else []

    return {"chunks": len(chunks), "latency_ms_p50_p90_p99": pct((log - stamp) / 1e6),
            "period_ms_p50_p90_p99": pct(np.diff(log) / 1e6), "chunk_span_s": float(span[-1]) / 1e9,
            "ticks": int(len(ticks)),
            "past_end": round(float(np.mean(age > span[i])), 4) if len(ticks) else None,
            "stale": round(float(np.mean(age > observation_timeout_s * 1e9)), 4) if len(ticks) else None}


def episode_starts(bag: str | Path, b=None) -> list[Start]:
    b = _read(bag) if b is None else b
    cmd = b.get("/oxygen/joint_command")
    cmd_t = [t for t, _ in cmd]
    img_t = [t for t, _ in b.get("/sim/camera/image_raw")]
    out: list[Start] = []
    done_at: dict[int, int] = {}  # episode -> log time of its final status
    started: dict[int, int] = {}  # episode -> log time of its first status with step > 0
    result: dict[int, tuple[str, bool]] = {}
    for t, msg in b.get("/sim/episode"):
        s = json.loads(msg.data)
        ep = int(s["episode"])
        if s["step"] > 0 and ep not in started:
            started[ep] = t
        if s["done"]:
            result[ep], done_at[ep] = (s["task"], bool(s["success"])), t
    for ep, t0 in sorted(started.items()):
        if ep not in result or ep - 1 not in done_at:
            continue  # the first episode has no previous command to hold
        ic, ip = _newest(cmd_t, t0), _newest(cmd_t, done_at[ep - 1])
        if ic is None or ip is None:
            continue
        last = np.asarray(cmd[ip][1].position, dtype=np.float64)
        held, held_s, i = False, 0.0, ic
        while i < len(cmd) and np.max(np.abs(np.asarray(cmd[i][1].position) - last)) <= SAME:
            held, held_s, i = True, (cmd_t[i] - t0) * 1e-9, i + 1
        lo = bisect.bisect_left(img_t, t0 - 1_500_000_000)
        hi = bisect.bisect_right(img_t, t0)
        window = img_t[lo:hi]
        gap = max((b - a for a, b in zip(window, window[1:])), default=0) * 1e-9
        out.append(Start(ep, result[ep][0], held, max(held_s, 0.0) if held else 0.0, gap,
                         result[ep][1]))
    return out


def summary(starts: list[Start]) -> dict:
    def rate(xs: list[Start]) -> dict:
        return {"n": len(xs), "success": sum(s.success for s in xs)}

    held = [s for s in starts if s.held]
    gaps = [s.image_gap_s for s in starts]
    return {"episodes": len(starts), "held_starts": len(held),
            "held_s_p50": float(np.median([s.held_s for s in held])) if held else None,
            "success_after_held_start": rate(held),
            "success_after_commanded_start": rate([s for s in starts if not s.held]),
            "reset_image_gap_s_p50": float(np.median(gaps)) if gaps else None,
            "reset_image_gap_s_max": float(np.max(gaps)) if gaps else None,
            "per_task_held": {t: sum(s.held for s in starts if s.task == t)
                              for t in dict.fromkeys(s.task for s in starts)}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bags", nargs="+")
    p.add_argument("--episodes", action="store_true", help="also print every episode")
    p.add_argument("--observation-timeout", type=float, default=0.5,
                   help="the run's observation_timeout_s (the node's default 0.5)")
    args = p.parse_args(argv)
    report = {}
    for bag in args.bags:
        b = _read(bag)
        starts = episode_starts(bag, b)
        report[str(bag)] = {"timing": chunk_timing(bag, args.observation_timeout, b), **summary(starts)}
        if args.episodes:
            report[str(bag)]["starts"] = [{**asdict(s), "held": s.held} for s in starts]
    print(json.dumps(report, indent=1))
    return 0
