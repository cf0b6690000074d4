"""How far a policy's failed door-unlock episodes turned the lock, from an oxygen-sim eval bag:

    python failed_unlocks.py BAGS/isolated_crossfade [...]

Per failed episode: its seed, its last progress and the fraction of the way to the target the
lock had turned at least (progress = 0.5 reach + 0.5 turned, reach <= 1, so turned >= 2 progress
- 1; the expert's locks succeed at 0.82-0.86), the stage shown over its last second, and the
memory texts whose observation was taken during it (how many, how many "turning the lock").
"""
import collections
import sys

from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim.episodes import Status, stamp_ns

for path in sys.argv[1:]:
    b = read_bag(path, topics=["/sim/episode", "/oxygen/memory"])
    texts = [(stamp_ns(m.header.stamp), m.text.strip()) for _, m in b.get("/oxygen/memory")
             if m.is_final and m.kind == "memory"]
    by_ep = collections.defaultdict(list)
    for _, m in b.get("/sim/episode"):
        st = Status.from_json(m.data)
        if st.task == "door-unlock":
            by_ep[st.episode].append(st)
    print(path)
    for ep, sts in sorted(by_ep.items()):
        last = sts[-1]
        if last.success:
            continue
        tail = [s.caption for s in sts if s.t > last.t - 1.0]
        shown = collections.Counter(tail).most_common()
        said = [t for ns, t in texts if sts[0].stamp_ns <= ns <= last.stamp_ns]
        print(f"  episode {ep} seed {last.seed}: progress {last.progress:.2f} (max "
              f"{max(s.progress for s in sts):.2f}), turned >= {max(0.0, 2 * last.progress - 1):.2f}, "
              f"last second shows {shown}; {len(said)} memory texts, "
              f"{said.count('turning the lock')} 'turning the lock'")
