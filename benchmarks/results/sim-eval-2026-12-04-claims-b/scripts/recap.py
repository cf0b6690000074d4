"""Re-caption a sim-eval bag's frames offline: do the node's claims reproduce from the same image+state?"""
import sys, bisect, json, collections
import numpy as np
from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim.episodes import Status
from oxygen_ros.sim.metrics import Timeline, check_memory, claim_is_true
from oxygen_ros.sim.claim_audit import _memory_engine, _caption
from oxygen_ros.sim import get_task
bag, ck = sys.argv[1], sys.argv[2]
b = read_bag(bag, topics=["/sim/episode", "/oxygen/memory", "/sim/joint_states", "/sim/camera/image_raw"])
ns = lambda s: s.sec * 10**9 + s.nanosec
sts = sorted([Status.from_json(m.data) for _, m in b.get("/sim/episode")], key=lambda x: x.stamp_ns)
tl = Timeline()
for st in sts: tl.add(st.stamp_ns, st.task, st.caption, st.episode, st.success)
final = {st.episode: st for st in sts if st.done}
success = {e: tl.success_ns.get(e) for e in final}
imgs = {ns(m.header.stamp): m for _, m in b.get("/sim/camera/image_raw")}
joints = sorted((ns(m.header.stamp), list(m.position)) for _, m in b.get("/sim/joint_states"))
jt = [t for t, _ in joints]
built = _memory_engine(ck)
stats = collections.Counter(); f = 0; saved = 0
rng = np.random.default_rng(0)
for _, m in b.get("/oxygen/memory"):
    if not (m.is_final and m.kind == "memory"): continue
    s = ns(m.header.stamp); sc = tl.scene_at(s)
    if sc is None: continue
    c = check_memory(m.text, sc, s)
    kind = "claim_false" if c.claims_done and not claim_is_true(c, success) else ("claim_true" if c.claims_done else "stage")
    if kind == "stage" and rng.random() > 0.15: continue
    im = imgs.get(s)
    if im is None: stats[(kind, "no image")] += 1; continue
    img = np.frombuffer(im.data, np.uint8).reshape(im.height, im.width, 3)
    j = bisect.bisect_right(jt, s) - 1
    state = np.asarray(joints[j][1][:4], np.float32)
    task = get_task(sc.task)
    t, _ = _caption(built, img, state, task.instruction, f); f += 1
    stats[(sc.task, kind, "offline same" if t == m.text.strip() else "offline differs")] += 1
    if kind == "claim_false" and saved < 6 and t == m.text.strip():
        saved += 1  # (the images were looked at by hand)
for k, v in sorted(stats.items()): print(k, v)
