"""How far each door-task memory miss is from a change of the shown stage (same episode)."""
import bisect, collections, sys
import numpy as np
from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim.episodes import Status, stamp_ns
from oxygen_ros.sim.metrics import Timeline, check_memory

for path in sys.argv[1:]:
    b = read_bag(path, topics=["/sim/episode", "/oxygen/memory"])
    tl = Timeline(); ok = {}; changes = collections.defaultdict(list); last = {}
    for _, m in b.get("/sim/episode"):
        st = Status.from_json(m.data)
        if st.stamp_ns:
            tl.add(st.stamp_ns, st.task, st.caption, st.episode, st.success)
            if last.get(st.episode) is not None and last[st.episode] != st.caption:
                changes[st.episode].append(st.stamp_ns)
            last[st.episode] = st.caption
        ok[st.episode] = ok.get(st.episode, False) or st.success
    dist = collections.defaultdict(list)
    for _, m in b.get("/oxygen/memory"):
        if not (m.is_final and m.kind == "memory"):
            continue
        t = stamp_ns(m.header.stamp)
        sc = tl.scene_at(t)
        if sc is None or not sc.task.startswith("door"):
            continue
        c = check_memory(m.text.strip(), sc, t)
        ch = changes.get(sc.episode, [])
        d = min((abs(t - x) for x in ch), default=10**12) / 1e6
        dist[(sc.task, "ok" if ok.get(sc.episode) else "failed", "hit" if c.names_stage else "miss")].append(d)
    print(path)
    for k in sorted(dist):
        v = np.array(dist[k])
        print(f"  {k}: n {len(v)}  within 50 ms {np.mean(v<=50):.2f}  100 ms {np.mean(v<=100):.2f}  250 ms {np.mean(v<=250):.2f}")
