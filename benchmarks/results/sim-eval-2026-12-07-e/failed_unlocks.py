"""How far a policy's failed door-unlock episodes turned the lock, from an oxygen-sim eval bag:

    python failed_unlocks.py BAGS/isolated_crossfade [...]

Per failed episode: its seed, its last progress and the fraction of the way to the target the
lock had turned at least (progress = 0.5 reach + 0.5 turned, reach <= 1, so turned >= 2 progress
- 1; the expert's locks succeed at 0.82-0.86), and the stage shown over its last second.
"""
import collections
import sys

from oxygen_ros.bags.reader import read_bag
from oxygen_ros.sim.episodes import Status

for path in sys.argv[1:]:
    b = read_bag(path, topics=["/sim/episode"])
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
        print(f"  episode {ep} seed {last.seed}: progress {last.progress:.2f} (max "
              f"{max(s.progress for s in sts):.2f}), turned >= {max(0.0, 2 * last.progress - 1):.2f}, "
              f"last second shows {shown}")
