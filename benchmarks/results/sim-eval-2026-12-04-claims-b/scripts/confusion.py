import sys, collections
from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim.episodes import Status
from oxygen_ros.sim.metrics import Timeline
b = read_bag(sys.argv[1], topics=["/sim/episode", "/oxygen/memory"])
sts = sorted([Status.from_json(m.data) for _, m in b.get("/sim/episode")], key=lambda x: x.stamp_ns)
tl = Timeline()
for st in sts: tl.add(st.stamp_ns, st.task, st.caption, st.episode, st.success)
c = collections.Counter()
for _, m in b.get("/oxygen/memory"):
    if not (m.is_final and m.kind == "memory"): continue
    s = m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
    sc = tl.scene_at(s)
    if sc is None or not sc.task.startswith("door"): continue
    c[(sc.task, sc.caption, m.text.strip())] += 1
for k, v in sorted(c.items()): print(v, k)
