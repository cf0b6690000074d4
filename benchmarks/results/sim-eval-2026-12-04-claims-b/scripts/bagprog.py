import sys, bisect, json, collections
import numpy as np
from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim.episodes import Status
from oxygen_ros.sim.metrics import Timeline, check_memory, claim_is_true
bag = sys.argv[1]
b = read_bag(bag, topics=["/sim/episode", "/oxygen/memory"])
sts = sorted([Status.from_json(m.data) for _, m in b.get("/sim/episode")], key=lambda x: x.stamp_ns)
tl = Timeline()
for st in sts: tl.add(st.stamp_ns, st.task, st.caption, st.episode, st.success)
final = {st.episode: st for st in sts if st.done}
success = {e: tl.success_ns.get(e) for e in final}
byep = collections.defaultdict(list)
for st in sts: byep[st.episode].append(st)
maxprog = {e: max(s.progress for s in v) for e, v in byep.items()}
def prog_at(ep, ns):
    v = byep[ep]; ts = [s.stamp_ns for s in v]; j = bisect.bisect_right(ts, ns) - 1
    return v[max(j, 0)].progress
rows = collections.defaultdict(list)
for _, m in b.get("/oxygen/memory"):
    if not (m.is_final and m.kind == "memory"): continue
    ns = m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
    sc = tl.scene_at(ns)
    if sc is None: continue
    c = check_memory(m.text, sc, ns)
    if not c.claims_done: continue
    ok = claim_is_true(c, success)
    rows[(sc.task, ok)].append((sc.episode, round(prog_at(sc.episode, ns), 2), round(maxprog[sc.episode], 2), final[sc.episode].success))
for k, v in sorted(rows.items()):
    p = [x[1] for x in v]
    print(k, len(v), "progress at claim: median", np.median(p), "min", min(p), "max", max(p), "episodes", sorted({(x[0], x[2], x[3]) for x in v}))
