"""Door tasks' stage accuracy in successful vs failed episodes, from eval bags."""
import collections, sys
from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim.episodes import Status, stamp_ns
from oxygen_ros.sim.metrics import Timeline, check_memory

for path in sys.argv[1:]:
    b = read_bag(path, topics=["/sim/episode", "/oxygen/memory"])
    tl = Timeline(); ok = {}
    for _, m in b.get("/sim/episode"):
        st = Status.from_json(m.data)
        if st.stamp_ns:
            tl.add(st.stamp_ns, st.task, st.caption, st.episode, st.success)
        ok[st.episode] = ok.get(st.episode, False) or st.success
    agg = collections.defaultdict(lambda: [0, 0])
    miss = collections.Counter()
    for _, m in b.get("/oxygen/memory"):
        if not (m.is_final and m.kind == "memory"):
            continue
        sc = tl.scene_at(stamp_ns(m.header.stamp))
        if sc is None or not sc.task.startswith("door"):
            continue
        c = check_memory(m.text.strip(), sc, stamp_ns(m.header.stamp))
        k = (sc.task, "ok" if ok.get(sc.episode) else "failed")
        agg[k][0] += c.names_stage; agg[k][1] += 1
        if not c.names_stage:
            miss[(k, sc.caption, m.text.strip())] += 1
    print(path)
    for k, (a, n) in sorted(agg.items()):
        print(f"  {k}: {a}/{n} = {a/n:.3f}")
    for (k, cap, said), n in miss.most_common(8):
        print(f"    miss {k} shown {cap!r} said {said!r}: {n}")
