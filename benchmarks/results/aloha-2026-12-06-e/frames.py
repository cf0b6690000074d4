"""Frame cost of two checkpoints on identical inputs (isolated, memory every frame, one thread)."""
import sys, time, numpy as np
from oxygen_ros.engine import EngineConfig, Observation
from oxygen_ros.robot.build import ModelSource, build_engine
rng = np.random.default_rng(0)
imgs = [rng.integers(0, 255, (64, 64, 3), dtype=np.uint8) for _ in range(3)]
state = np.zeros(14, np.float32)
for rep in range(2):
    for ck in sys.argv[1:]:
        built = build_engine(ModelSource(checkpoint=ck, threads=1),
                             EngineConfig(mode="isolated", memory_every_n_frames=1, max_decode_steps=30,
                                          decode_steps_per_frame=30, seed=0))
        e = built.engine
        ts = []
        for f in range(25):
            t = time.perf_counter()
            out = e.step(Observation(images=imgs, state=state, instruction="pick up the cube with the right arm and hand it to the left arm", stamp=float(f)))
            ts.append(time.perf_counter() - t)
        toks = sum(len(u.new_tokens) for u in out.updates if u.kind == "memory")
        print(rep, ck, "median ms", round(1000 * float(np.median(ts[5:])), 1), "tokens last frame", toks, flush=True)
