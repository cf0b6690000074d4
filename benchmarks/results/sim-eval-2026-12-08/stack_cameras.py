"""Two recordings of the same episodes by different cameras -> one recording with both cameras
([F, 2, S, S, 3], meta "cameras" in the given order). The expert's physics does not depend on
the camera, so the frames must agree in everything but the images (checked):

    python stack_cameras.py data/du_corner4.npz data/du_behindGripper.npz data/du_both.npz
"""
import sys

import numpy as np

from oxygen_ros.sim.dataset import Demos

a, b = Demos.load(sys.argv[1]), Demos.load(sys.argv[2])
for k in ("state", "target", "episode", "step", "task", "caption", "caption_only", "driven"):
    if not np.array_equal(getattr(a, k), getattr(b, k)):
        raise SystemExit(f"the recordings differ in {k}")
fields = {k: getattr(a, k) for k in a.__dataclass_fields__}
meta = {**a.meta, "camera": None, "cameras": [a.meta["camera"], b.meta["camera"]]}
out = Demos(**{**fields, "images": np.stack([a.images, b.images], axis=1), "meta": meta})
out.save(sys.argv[3])
print(f"{len(out)} frames, images {out.images.shape}, cameras {meta['cameras']}")
