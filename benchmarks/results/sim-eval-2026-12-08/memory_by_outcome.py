"""Door tasks' stage accuracy in successful vs failed episodes, from oxygen-sim eval bags:

    python memory_by_outcome.py BAGS/isolated_crossfade [...]

Per bag, door task and episode outcome: the texts naming the stage of their source scene, and
the most common misses (scene shown, text said).
"""
import collections
import sys

from oxygen_ros.sim.claim_audit import read_eval_bag

for path in sys.argv[1:]:
    eb = read_eval_bag(path)
    agg = collections.defaultdict(lambda: [0, 0])
    miss = collections.Counter()
    for c in eb.memory:
        if not c.task.startswith("door"):
            continue
        k = (c.task, "ok" if c.episode in eb.timeline.success_ns else "failed")
        agg[k][0] += c.names_stage
        agg[k][1] += 1
        if not c.names_stage:
            miss[(k, c.caption, c.text.strip())] += 1
    print(path)
    for k, (a, n) in sorted(agg.items()):
        print(f"  {k}: {a}/{n} = {a/n:.3f}")
    for (k, cap, said), n in miss.most_common(8):
        print(f"    miss {k} shown {cap!r} said {said!r}: {n}")
