"""How far each door-task memory text is from a change of the shown stage (same episode), from
oxygen-sim eval bags:

    python misses_near_changes.py BAGS/isolated_crossfade [...]

Per bag, door task, episode outcome and hit or miss: the share of texts whose source
observation is within 50, 100 and 250 ms of a change of the stage shown.
"""
import collections
import sys

import numpy as np

from oxygen_ros.sim.claim_audit import read_eval_bag

for path in sys.argv[1:]:
    eb = read_eval_bag(path)
    changes, last = collections.defaultdict(list), {}
    for st in eb.statuses:
        if last.get(st.episode) is not None and last[st.episode] != st.caption:
            changes[st.episode].append(st.stamp_ns)
        last[st.episode] = st.caption
    dist = collections.defaultdict(list)
    for c in eb.memory:
        if not c.task.startswith("door"):
            continue
        d = min((abs(c.stamp_ns - x) for x in changes.get(c.episode, [])), default=10**12) / 1e6
        ok = "ok" if c.episode in eb.timeline.success_ns else "failed"
        dist[(c.task, ok, "hit" if c.names_stage else "miss")].append(d)
    print(path)
    for k in sorted(dist):
        v = np.array(dist[k])
        print(f"  {k}: n {len(v)}  within 50 ms {np.mean(v<=50):.2f}  100 ms {np.mean(v<=100):.2f}  250 ms {np.mean(v<=250):.2f}")
