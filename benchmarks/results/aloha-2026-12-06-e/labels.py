"""Step 7's transfer-cube recordings (recorder version 4, --after 150), counted:

    python labels.py data/aloha_tc100_v4.npz data/aloha_tc100b_v4.npz data/aloha_tc60c_v4.npz

episodes; those whose frames show the held hand-over ("the cube is handed over") and the median
control period of its first frame; those with caption-only frames after success (the cube fell);
frames per caption.
"""
import sys

import numpy as np

episodes = held = fell = 0
first_done: list[int] = []
frames: dict[str, int] = {}
for path in sys.argv[1:]:
    z = np.load(path, allow_pickle=True)
    captions = [str(c) for c in z["captions"]]
    done = captions.index("the cube is handed over")
    for e in np.unique(z["episode"]):
        m = z["episode"] == e
        episodes += 1
        shown = m & (z["caption"] == done)
        if shown.any():
            held += 1
            first_done.append(int(z["step"][shown].min()))
        fell += bool(z["caption_only"][m].any())
    for i, c in enumerate(captions):
        frames[c] = frames.get(c, 0) + int((z["caption"] == i).sum())
    frames["(caption-only)"] = frames.get("(caption-only)", 0) + int(z["caption_only"].sum())
print(f"{episodes} episodes; {held} show the held hand-over (its first frame at period "
      f"{np.median(first_done):.0f}, median); {fell} have caption-only frames after a fall")
print(frames)
