"""Where the hand is (cm from door-unlock's contact point at reset) when a memory text is said
while the scene shows "reaching the lock", by what was said and the episode's outcome, from
oxygen-sim eval bags:

    python reaching_hand.py BAGS/isolated_crossfade [...]
"""
import bisect
import collections
import sys

import numpy as np

from oxygen_ros.sim import SimEnv, get_task
from oxygen_ros.sim.claim_audit import read_eval_bag

TASK = "door-unlock"
env = SimEnv(TASK)
contact = np.asarray(get_task(TASK).contact)
for path in sys.argv[1:]:
    eb = read_eval_bag(path, joints=True)
    seeds = {st.episode: st.seed for st in eb.statuses}
    jt = [t for t, _ in eb.joints]
    points = {}
    rows = collections.defaultdict(list)
    for c in eb.memory:
        if c.task != TASK or c.caption != "reaching the lock":
            continue
        if c.episode not in points:
            env.reset(seeds[c.episode])
            points[c.episode] = env.raw_obs[4:7] + contact
        hand = eb.joints[bisect.bisect_right(jt, c.stamp_ns) - 1][1][:3]
        rows[(c.text.strip(), c.episode in eb.timeline.success_ns)].append((hand - points[c.episode]) * 100)
    print(path)
    for k, v in sorted(rows.items()):
        v = np.array(v)
        xy = np.linalg.norm(v[:, :2], axis=1)
        near = xy <= 2
        print(f"  said {k[0]!r} ep ok {k[1]}: n {len(v)}; xy<=2cm {near.mean():.2f}; of those dz p10/50/90 "
              f"{np.percentile(v[near,2],[10,50,90]).round(1) if near.any() else '-'}; xy p50 {np.median(xy):.1f}; dz p50 {np.median(v[:,2]):.1f}")
env.close()
