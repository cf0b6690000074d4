"""Does the completion claim follow the image or the state? Caption (image_i, state_j) pairs."""
import sys, json
import numpy as np
from oxygen_ros.sim.dataset import Demos
from oxygen_ros.sim.claim_audit import _memory_engine, _caption
from oxygen_ros.sim import get_task
ck, data = sys.argv[1], sys.argv[2]; n = int(sys.argv[3]) if len(sys.argv) > 3 else 8
d = Demos.load(data)
built = _memory_engine(ck)
held = json.load(open(ck + "/training.json"))["held_out_episodes"]
rng = np.random.default_rng(0)
out = {}
f = 0
for ti, name in enumerate(d.tasks):
    task = get_task(name)
    done_i = d.captions.index(task.done)
    eps = [e for e in held if d.episode_task[e] == ti and d.episode_success[e]][:n]
    D, E = [], []
    for e in eps:
        idx = np.where((d.episode == e) & ~d.caption_only)[0]
        dn = idx[d.caption[idx] == done_i]
        if len(dn) == 0: continue
        D.append(dn[len(dn)//2]); E.append(idx[0])  # a done frame; the episode's first frame (object untouched)
    res = {}
    for label, pairs in (("img done, state done", zip(D, D)), ("img start, state done", zip(E, D)),
                         ("img done, state start", zip(D, E)), ("img start, state start", zip(E, E))):
        texts = []
        for i, j in pairs:
            t, _ = _caption(built, d.images[i], d.state[j], task.instruction, f); f += 1
            texts.append(t)
        res[label] = f"{sum(t == task.done for t in texts)}/{len(texts)} claim"
    out[name] = res
    print(name, res, flush=True)
