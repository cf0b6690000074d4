"""One benchmark run in a fresh process (used for per-mode peak memory): JSON in argv[1],
one JSON row on stdout."""
from __future__ import annotations

import json

import torch

from ..engine.config import load_model_config
from ..engine.families.loader import init_model
from ..engine.model.tokenizer import build_tiny_tokenizer
from .sweep import Context, RunSpec, run
from .timing import peak_rss_bytes, rss_bytes


def child(argv: list[str]) -> int:
    """argv: [the run's JSON] (sweep.probe_in_subprocess)."""
    p = json.loads(argv[0])
    torch.set_num_threads(p["threads"])
    mc = load_model_config(p["preset"], p["model_config"])
    base_before_model = rss_bytes()
    model = init_model(mc, seed=p["seed"], device=p["device"], dtype=p["dtype"])
    tok = build_tiny_tokenizer(min(mc.vocab_size, 2048))
    ctx = Context(mc, model, tok, p["device"], p["dtype"], p["seed"],
                  attention_backend=p["attention_backend"],
                  compile_denoise=p.get("compile_denoise", False),
                  linear_layout=p.get("linear_layout", "standard"),
                  cuda_graphs=p.get("cuda_graphs", False))
    base = rss_bytes()
    row, _ = run(ctx, RunSpec(**p["spec"]))
    row.pop("trace", None)
    row.update(rss_before_model_bytes=base_before_model, rss_after_model_bytes=base,
               rss_maxrss_bytes=peak_rss_bytes())
    print(json.dumps(row))
    return 0
