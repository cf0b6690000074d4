"""What the rtc runs' bags show at each episode's start (read from an oxygen-sim eval bag):

    python reset_gap.py rtc-transfer-cube/bags/isolated_rtc rtc-transfer-cube/bags/isolated_crossfade

per bag: the first action chunk stamped after each episode's reset (its first status), step 0
against the robot's joint state at the chunk's stamp (worst joint, rad; median over episodes), and
how many episodes had the measured left gripper outside -0.1..1.1 (its range 0..1) at any time.
"""
import bisect
import json
import sys
from pathlib import Path

import numpy as np
from rosbags.highlevel import AnyReader


def ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


for arg in sys.argv[1:]:
    with AnyReader([Path(arg)]) as r:
        conns = {c.topic: c for c in r.connections}
        # episode -> stamp of its first status (the bag's receive time where the status has no
        # stamp: the sim's statuses carry one since this change, not in the first run)
        starts: dict[int, int] = {}
        for c, t, raw in r.messages(connections=[conns["/aloha/episode"]]):
            s = json.loads(r.deserialize(raw, c.msgtype).data)
            starts.setdefault(s["episode"], s.get("stamp_ns") or t)
        jt, jv = [], []
        for c, _, raw in r.messages(connections=[conns["/aloha/joint_states"]]):
            m = r.deserialize(raw, c.msgtype)
            jt.append(ns(m.header.stamp))
            jv.append(np.asarray(m.position))
        chunks = []
        for c, _, raw in r.messages(connections=[conns["/oxygen/action_chunk"]]):
            m = r.deserialize(raw, c.msgtype)
            chunks.append((ns(m.header.stamp), np.asarray(m.points[0].positions)))
    order = np.argsort(jt)
    jt, jv = [jt[i] for i in order], np.stack([jv[i] for i in order])
    chunks.sort(key=lambda x: x[0])
    eps = sorted(starts.items())
    gaps, broken = [], 0
    for k, (ep, t0) in enumerate(eps):
        t1 = eps[k + 1][1] if k + 1 < len(eps) else 1 << 62
        first = next(((t, v) for t, v in chunks if t0 <= t < t1), None)
        if first is not None:
            i = max(0, bisect.bisect_right(jt, first[0]) - 1)
            gaps.append(float(np.max(np.abs(first[1] - jv[i]))))
        lo, hi = bisect.bisect_left(jt, t0), bisect.bisect_left(jt, t1)
        grip = jv[lo:hi, 6]
        broken += bool(grip.size and ((grip < -0.1) | (grip > 1.1)).any())
    print(f"{arg}: {len(eps)} episodes; first chunk's step 0 vs the robot, worst joint: median "
          f"{np.median(gaps):.2f} rad; left gripper outside -0.1..1.1 in {broken} episodes")
