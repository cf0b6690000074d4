"""Where the hand is (cm from door-unlock's contact point at reset) when a memory text says
'turning the lock' while the scene shows 'reaching the lock', and the same for hits."""
import bisect, collections, sys
import numpy as np
from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim import SimEnv, get_task
from oxygen_ros.sim.episodes import Status, stamp_ns
from oxygen_ros.sim.metrics import Timeline

TASK = "door-unlock"
env = SimEnv(TASK); contact = np.asarray(get_task(TASK).contact)
for path in sys.argv[1:]:
    b = read_bag(path, topics=["/sim/episode", "/oxygen/memory", "/sim/joint_states"])
    tl = Timeline(); seeds = {}; ok = {}
    for _, m in b.get("/sim/episode"):
        st = Status.from_json(m.data)
        if st.stamp_ns:
            tl.add(st.stamp_ns, st.task, st.caption, st.episode, st.success)
        seeds[st.episode] = (st.task, st.seed); ok[st.episode] = ok.get(st.episode, False) or st.success
    joints = [(stamp_ns(m.header.stamp), np.asarray(m.position[:3])) for _, m in b.get("/sim/joint_states")]
    jt = [t for t, _ in joints]
    points = {}
    rows = collections.defaultdict(list)
    for _, m in b.get("/oxygen/memory"):
        if not (m.is_final and m.kind == "memory"):
            continue
        t = stamp_ns(m.header.stamp); sc = tl.scene_at(t)
        if sc is None or sc.task != TASK or sc.caption != "reaching the lock":
            continue
        if sc.episode not in points:
            env.reset(seeds[sc.episode][1]); points[sc.episode] = env.raw_obs[4:7] + contact
        hand = joints[bisect.bisect_right(jt, t) - 1][1]
        off = (hand - points[sc.episode]) * 100
        rows[(m.text.strip(), ok[sc.episode])].append(off)
    print(path)
    for k, v in sorted(rows.items()):
        v = np.array(v); xy = np.linalg.norm(v[:, :2], axis=1)
        near = (xy <= 2)
        print(f"  said {k[0]!r} ep ok {k[1]}: n {len(v)}; xy<=2cm {near.mean():.2f}; of those dz p10/50/90 "
              f"{np.percentile(v[near,2],[10,50,90]).round(1) if near.any() else '-'}; xy p50 {np.median(xy):.1f}; dz p50 {np.median(v[:,2]):.1f}")
env.close()
