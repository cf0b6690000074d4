"""Where the hand was at each door-task memory text of an oxygen-sim eval bag, by (the stage the
simulator showed, the stage the memory said):

    python stage_misses.py BAGS/isolated_crossfade

the hand's offset from the task's contact point (the lock plus Task.contact) at the text's source
observation, the lock taken at the episode's reset (its layout remade from the seed): right for
door-unlock's "reaching the lock" (the lock has not turned yet), not after a lock has moved.
"""
import bisect
import collections
import sys

import numpy as np

from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim import SimEnv, get_task
from oxygen_ros.sim.episodes import Status, stamp_ns
from oxygen_ros.sim.metrics import Timeline

b = read_bag(sys.argv[1], topics=["/sim/episode", "/oxygen/memory", "/sim/joint_states"])
statuses = [Status.from_json(m.data) for _, m in b.get("/sim/episode")]
timeline = Timeline()
for st in sorted(statuses, key=lambda x: x.stamp_ns):
    timeline.add(st.stamp_ns, st.task, st.caption, st.episode, st.success)
final = {st.episode: st for st in statuses if st.done}
joints = [(stamp_ns(m.header.stamp), list(m.position)) for _, m in b.get("/sim/joint_states")]
jt = [t for t, _ in joints]
envs: dict[str, SimEnv] = {}
rows = collections.defaultdict(list)
for _, m in b.get("/oxygen/memory"):
    if not (m.is_final and m.kind == "memory"):
        continue
    stamp = stamp_ns(m.header.stamp)
    scene = timeline.scene_at(stamp)
    if scene is None or not scene.task.startswith("door"):
        continue
    st = final[scene.episode]
    env = envs.setdefault(scene.task, SimEnv(scene.task))
    env.reset(st.seed)
    contact = env.raw_obs[4:7] + np.asarray(get_task(scene.task).contact)
    hand = np.asarray(joints[bisect.bisect_right(jt, stamp) - 1][1][:3])
    rows[(scene.task, scene.caption, m.text.strip())].append((*(hand - contact), st.success))
for env in envs.values():
    env.close()
print("task | stage shown | memory said | texts | in failed episodes | hand - contact, cm: median x, y, z")
for (task, shown, said), v in sorted(rows.items()):
    a = np.array(v)
    print(f"{task} | {shown} | {said} | {len(v)} | {int((a[:, 3] == 0).sum())} | "
          f"{', '.join(f'{x:.1f}' for x in np.median(a[:, :3], axis=0) * 100)}")
