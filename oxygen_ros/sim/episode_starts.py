"""How each episode of an oxygen-sim-eval run started, from its bag: did the node command the new
scene, or was it still holding the previous episode's last command?

    python -m oxygen_ros.sim.episode_starts BAG [BAG ...]

Why: the simulator resets by teleporting the arm and opening the gripper, and while it resets it
publishes no image (env.reset + a first render). When that gap is longer than the node's
observation_timeout_s minus its latency, the node holds (stale); after a hold its restart check
(max_tracking_error) sees the measured pose far from its last command, a pose jump, and keeps
holding the last command until the arm is back near it (docs/command-safety.md): the sim then
drives the arm towards the previous episode's final pose before the policy takes over.

Per episode: whether the node's newest command when the sim's reset hold ends (the first
status with step > 0) is still exactly the previous episode's last command (`held`: the node
was holding, not commanding the new scene), for how long after that it stays so (`held_s`),
the longest gap between two camera images around the reset, and the outcome. Prints a JSON
summary.
"""
from __future__ import annotations

import argparse
import bisect
import json
import sys
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


def episode_starts(bag: str | Path) -> list[Start]:
    from oxygen_ros.bags.reader import read_bag

    b = read_bag(bag, topics=["/sim/episode", "/oxygen/joint_command",
                              "/sim/camera/image_raw"])
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
    p = argparse.ArgumentParser(prog="python -m oxygen_ros.sim.episode_starts", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bags", nargs="+")
    p.add_argument("--episodes", action="store_true", help="also print every episode")
    args = p.parse_args(argv)
    report = {}
    for bag in args.bags:
        starts = episode_starts(bag)
        report[str(bag)] = summary(starts)
        if args.episodes:
            report[str(bag)]["starts"] = [{**asdict(s), "held": s.held} for s in starts]
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
