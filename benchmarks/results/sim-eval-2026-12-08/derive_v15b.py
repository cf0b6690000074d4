"""v15b's recording from v15's: the driven frames of every task but door-unlock made caption-only
again, which is what `oxygen-sim demos ... --policy-actions door-unlock` records (the same
episodes; only the flags differ). Made this way to save the 11-minute recording:

    python derive_v15b.py data/sim_demos_v15.npz data/sim_demos_v15b.npz
"""
import sys

from oxygen_ros.sim.dataset import Demos

d = Demos.load(sys.argv[1])
acted = ["door-unlock"]
caption_only = d.caption_only.copy()
for ti, name in enumerate(d.tasks):
    if name not in acted:
        caption_only[d.driven & (d.task == ti)] = True
meta = {k: v for k, v in d.meta.items() if k != "policy_actions"}  # v15's flag, before task lists
meta["policy_action_tasks"] = acted
fields = {k: getattr(d, k) for k in d.__dataclass_fields__}
out = Demos(**{**fields, "caption_only": caption_only, "meta": meta})
out.save(sys.argv[2])
print(f"{len(out)} frames, {int(out.expert_frames.sum())} the expert's, {int(out.driven.sum())} "
      f"driven, {int((out.driven & ~out.caption_only).sum())} of them trained as actions")
