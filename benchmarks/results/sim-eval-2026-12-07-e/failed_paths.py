"""Where the hand went in a policy's failed door-unlock episodes (or TASK's), from an oxygen-sim
eval bag:

    python failed_paths.py BAGS/isolated_crossfade [TASK]

Per failed episode, every 0.25 s: the hand's offset (cm) from the contact point on the lock at
reset (the object plus Task.contact; door-unlock's lock hardly moved in these episodes), the stage shown and
the last memory text whose observation came before.
"""
import bisect
import collections
import sys

import numpy as np

from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim import SimEnv, get_task
from oxygen_ros.sim.episodes import Status, stamp_ns

TASK = sys.argv[2] if len(sys.argv) > 2 else "door-unlock"
b = read_bag(sys.argv[1], topics=["/sim/episode", "/oxygen/memory", "/sim/joint_states"])
by_ep = collections.defaultdict(list)
for _, m in b.get("/sim/episode"):
    st = Status.from_json(m.data)
    if st.task == TASK:
        by_ep[st.episode].append(st)
failed = {ep: sts for ep, sts in by_ep.items() if not sts[-1].success}
texts = sorted((stamp_ns(m.header.stamp), m.text.strip()) for _, m in b.get("/oxygen/memory")
               if m.is_final and m.kind == "memory")
tt = [t for t, _ in texts]
joints = [(stamp_ns(m.header.stamp), np.asarray(m.position[:3])) for _, m in b.get("/sim/joint_states")]
jt = [t for t, _ in joints]
env = SimEnv(TASK)
contact = np.asarray(get_task(TASK).contact)
for ep, sts in sorted(failed.items()):
    env.reset(sts[-1].seed)
    point = env.raw_obs[4:7] + contact
    print(f"episode {ep} seed {sts[-1].seed}")
    next_t = 0.0
    for st in sts:
        if st.t < next_t or not st.stamp_ns:
            continue
        next_t = st.t + 0.25
        hand = joints[bisect.bisect_right(jt, st.stamp_ns) - 1][1]
        i = bisect.bisect_right(tt, st.stamp_ns) - 1
        said = texts[i][1] if i >= 0 else "-"
        off = ", ".join(f"{x:5.1f}" for x in (hand - point) * 100)
        print(f"  t {st.t:4.2f} s  hand - contact ({off}) cm  shown {st.caption!r}  said {said!r}")
env.close()
