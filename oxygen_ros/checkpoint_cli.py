"""oxygen-inspect CHECKPOINT: what a LeRobot / openpi pi0.5 folder (or a Qwen3-VL folder with our
action experts' files: its heads) holds and whether it will load.

Prints the format, model shape, camera keys, state/action sizes, normalisation statistics, the
tokenizer found (or where it looked and how to provide one), parameter count and bytes, and checks
every weight's key and shape against the model from the safetensors header alone (no weights are
read). Exit status 0 when the node can serve it, 1 on any problem, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def _shape(config) -> str:
    v, e = config.vision, config.action_experts
    experts = ", ".join(f"{x.width}/{x.mlp_dim}" for x in e)
    return (f"{config.name}: vocab {config.vocab_size}, depth {config.depth}, VLM width/MLP "
            f"{config.vlm.width}/{config.vlm.mlp_dim}, action expert(s) {experts}, heads "
            f"{config.num_heads} q / {config.num_kv_heads} kv x {config.head_dim}; vision "
            f"{v.image_size}px / patch {v.patch_size}, {v.depth} x {v.width}; {config.num_cameras} "
            f"cameras, horizon {config.action_horizon}, action_dim {config.action_dim} (padded), "
            f"prompt <= {config.max_prompt_tokens} tokens")


def inspect(folder: str | Path, tokenizer: str | None = None, asset_id: str | None = None) -> dict:
    """-> a report dict; report["problems"] lists everything that stops serving."""
    from .engine.model.checkpoint import WEIGHTS, check_weights, describe_checkpoint

    folder = Path(folder)
    report: dict = {"checkpoint": str(folder), "problems": []}
    from .engine.model.qwen3vl_checkpoint import inspect_qwen3vl, is_qwen3vl_folder

    if is_qwen3vl_folder(folder):  # a transformers Qwen3-VL save_pretrained folder
        report.update(inspect_qwen3vl(folder, tokenizer))
        if "config" in report:
            report["model"] = _shape(report.pop("config"))
        return report
    try:
        ck = describe_checkpoint(folder, tokenizer, asset_id)
    except (ValueError, OSError) as err:
        report["problems"].append(str(err))
        return report
    info, cfg = ck.info, ck.config
    report.update(format=info.format, model=_shape(cfg), camera_keys=list(info.camera_keys),
                  state_dim=info.state_dim, action_dim=info.action_dim,
                  n_action_steps=info.n_action_steps, asset_id=info.asset_id, config_dtype=info.dtype)
    if ck.norm_stats is not None:
        report["norm_state"] = ck.norm_stats.state.summary()
        report["norm_action"] = ck.norm_stats.action.summary()
    else:
        report["norm_state"] = report["norm_action"] = "none (joint limits or identity in the node)"
    if ck.tokenizer is not None:
        report["tokenizer"] = f"{ck.tokenizer_source} ({ck.tokenizer.vocab_size} tokens)"
    else:
        report["tokenizer"] = "NOT FOUND"
        report["problems"].append(ck.tokenizer_source)
    weights = folder / WEIGHTS
    if not weights.is_file():
        report["problems"].append(f"{weights} not found")
        return report
    try:
        check = check_weights(weights, cfg)
    except Exception as err:  # a damaged header: safetensors raises its own error types
        report["problems"].append(f"{weights}: {err}")
        return report
    dtypes = Counter(e.file_dtype for e in check.entries.values())
    report["params"] = check.num_params
    report["file_bytes"] = sum(e.file_bytes for e in check.entries.values())
    report["file_dtypes"] = dict(dtypes)
    report["weights"] = (f"{len(check.entries)} tensors match" if not check.problems
                         else "; ".join(check.problems))
    report["problems"] += [f"{weights}: {p}" for p in check.problems]
    return report


def _print(r: dict) -> None:
    rows = [("checkpoint", f"{r['checkpoint']} ({r.get('format', '?')})")]
    if r.get("format") == "qwen3vl" and "model" in r:
        rows += [("model", r["model"])]
        rows += [("head", h) for h in r["heads"]]
        rows += [("tokenizer", r["tokenizer"]), ("action expert", r["action_expert"]),
                 ("weights", r["weights"])]
    elif "model" in r:
        cams = ", ".join(r["camera_keys"])
        rows += [("model", r["model"]), ("cameras", cams),
                 ("state / action", f"{r['state_dim']} / {r['action_dim']} values, "
                                    f"n_action_steps {r['n_action_steps']}"),
                 ("norm state", r["norm_state"]), ("norm action", r["norm_action"]),
                 ("tokenizer", r["tokenizer"])]
        if r.get("asset_id"):
            rows.append(("asset_id", r["asset_id"]))
    if "params" in r:
        rows += [("parameters", f"{r['params']:,} ({r['params'] / 1e9:.3f} B), {r['file_bytes']:,} bytes "
                                f"in the file {r['file_dtypes']}"),
                 ("weights", r["weights"])]
    for key, val in rows:
        print(f"{key:<15} {val}")
    for p in r["problems"]:
        print(f"PROBLEM: {p}")
    print("OK: the node can serve this checkpoint" if not r["problems"] else
          f"{len(r['problems'])} problem(s)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="oxygen-inspect", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="LeRobot or openpi pi0.5 checkpoint folder, "
                    "or a Qwen3-VL folder (docs/checkpoints.md)")
    ap.add_argument("--tokenizer", default=None, help="tokenizer.model / tokenizer.json file, a folder "
                    "with one, or a Hugging Face repo id in the local cache (as model.tokenizer)")
    ap.add_argument("--asset-id", default=None, help="openpi: statistics under assets/<asset_id>/")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args(argv)
    report = inspect(args.checkpoint, args.tokenizer, args.asset_id)
    if args.json:
        print(json.dumps(report))
    else:
        _print(report)
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
