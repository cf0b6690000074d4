"""Does a camera that sees the lock tell door-unlock's stages apart? Two policies trained the same
way from scratch on door-unlock alone (the same layouts, expert, missing, high missing and
leaving episodes; only the camera differs), their memory text on every held-out frame of their
own recording (the same episodes for both: the split is by layout seed) against its label:

    python camera_captions.py runs/du-corner4 data/du_corner4.npz runs/du-behindGripper data/du_behindGripper.npz

(A recording of several cameras, stack_cameras.py's, feeds the policy all of them.)

Per policy: exact caption accuracy on the expert's frames and on the caption-only frames (the
expert aiming beside or above the lock, or leaving it part-turned), and what was said per label.
"""
import collections
import json
import sys
from pathlib import Path

import numpy as np

from oxygen_ros.bench.compare import collect_requests
from oxygen_ros.sim.dataset import Demos
from oxygen_ros.sim.offline_eval import load_policy
from oxygen_ros.sim.policy import policy_observation as _observation

for ckpt, data in zip(sys.argv[1::2], sys.argv[2::2]):
    demos = Demos.load(data)
    held_eps = json.loads((Path(ckpt) / "training.json").read_text())["held_out_episodes"]
    held = np.flatnonzero(np.isin(demos.episode, held_eps))
    built = load_policy(ckpt, memory=True)
    outputs = []
    for f, i in enumerate(held):
        outputs.append(built.engine.step(_observation(built, demos.images[i], demos.state[i],
                                                      demos.instructions[int(demos.task[i])], float(f))))
    outputs += built.engine.drain(max_frames=200)
    first = outputs[0].frame
    texts = {r["frame"] - first: built.engine.tokenizer.decode(r["tokens"]).strip()
             for r in collect_requests(outputs)}
    said = [texts.get(f, "") for f in range(len(held))]
    truth = [demos.captions[int(demos.caption[i])] for i in held]
    print(f"{ckpt} on {data} (cameras {demos.meta.get('cameras') or demos.meta['camera']}): {len(held)} held-out frames of "
          f"{len(held_eps)} episodes")
    for name, mask in (("expert", demos.expert_frames[held]), ("caption-only", demos.caption_only[held])):
        hit = [s == t for s, t, m in zip(said, truth, mask) if m]
        print(f"  {name} frames: {sum(hit)}/{len(hit)} = {np.mean(hit):.3f} exact")
    table = collections.Counter(zip(truth, said))
    for t in sorted(set(truth)):
        row = {s: n for (tt, s), n in table.items() if tt == t}
        print(f"  label {t!r}: {dict(sorted(row.items(), key=lambda kv: -kv[1]))}")
