"""Which labels the shown-now caption (tasks.SHOWN_STEPS) changed: the v9 recording (furthest
stage) against v10 (the stage the scene shows now), on their expert and missing episodes (the same
seeds and steps in both; the policy-driven episodes differ: v9's were driven by 7d8fa31's
checkpoint, v10's by v9).

    python benchmarks/results/sim-eval-2026-12-07-d/label_changes.py data/sim_demos_v9.npz data/sim_demos_v10.npz
"""
import collections
import sys

import numpy as np


def load(path: str) -> dict:
    z = np.load(path, allow_pickle=False)
    keys = ("caption", "task", "episode", "step", "caption_only")
    out = {k: z[k] for k in keys}
    out["captions"], out["tasks"] = [str(c) for c in z["captions"]], [str(t) for t in z["tasks"]]
    return out


a, b = load(sys.argv[1]), load(sys.argv[2])
changes = collections.Counter()
per_task = collections.Counter()
frames = collections.Counter()
for ti, name in enumerate(a["tasks"]):
    # expert and missing episodes come first per task, in the same order in both recordings
    ea = sorted(set(a["episode"][a["task"] == ti]))
    eb = sorted(set(b["episode"][b["task"] == ti]))
    for x, y in zip(ea, eb):
        ma, mb = a["episode"] == x, b["episode"] == y
        if ma.sum() != mb.sum() or not np.array_equal(a["step"][ma], b["step"][mb]):
            break  # the policy-driven episodes: different drivers
        ca = [a["captions"][i] for i in a["caption"][ma]]
        cb = [b["captions"][i] for i in b["caption"][mb]]
        kind = "missing" if a["caption_only"][ma][0] else "expert"
        frames[(name, kind)] += len(ca)
        for u, v in zip(ca, cb):
            if u != v:
                changes[(name, kind, u, v)] += 1
                per_task[(name, kind)] += 1
for (name, kind), n in sorted(frames.items()):
    print(f"{name} {kind}: {n} frames, {per_task[(name, kind)]} relabelled")
for (name, kind, u, v), n in sorted(changes.items()):
    print(f"  {name} {kind}: {u!r} -> {v!r}: {n}")
