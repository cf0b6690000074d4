"""One episode of an oxygen-sim eval bag, every command the node sent: the command's target and
the measured hand at its stamp, both as offsets (cm) from the contact point on the object at reset:

    python benchmarks/results/sim-eval-2026-12-07-e/trace_episode.py BAGS/isolated_crossfade EPISODE

(from 0.3 s before the episode's first status, so the last commands of the episode before show)
"""
import bisect
import sys

import numpy as np

from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim import SimEnv
from oxygen_ros.sim.episodes import Status, stamp_ns

b = read_bag(sys.argv[1], topics=["/sim/episode", "/sim/joint_states", "/oxygen/joint_command"])
want = int(sys.argv[2])
sts = [s for s in (Status.from_json(m.data) for _, m in b.get("/sim/episode")) if s.episode == want]
t0, t1 = sts[0].stamp_ns, sts[-1].stamp_ns
env = SimEnv(sts[0].task)
env.reset(sts[0].seed)
point = env.raw_obs[4:7] + np.asarray(env.task.contact)
env.close()
joints = [(stamp_ns(m.header.stamp), np.asarray(m.position[:3])) for _, m in b.get("/sim/joint_states")]
jt = [t for t, _ in joints]
print(f"episode {want} {sts[0].task} seed {sts[0].seed} success {sts[-1].success}")
for _, m in b.get("/oxygen/joint_command"):
    ts = stamp_ns(m.header.stamp)
    if not t0 - 3e8 <= ts <= t1:
        continue
    hand = joints[bisect.bisect_right(jt, ts) - 1][1]
    cmd = ", ".join(f"{x:5.1f}" for x in (np.asarray(m.position[:3]) - point) * 100)
    at = ", ".join(f"{x:5.1f}" for x in (hand - point) * 100)
    print(f"t {(ts - t0) / 1e9:5.2f} s  command ({cmd})  hand ({at})")
