"""oxygen-inspect CHECKPOINT: what a LeRobot / openpi pi0.5 folder (or a Qwen3-VL folder with our
action experts' files: its heads) holds and whether it will load.

Prints the format, model shape, camera keys, state/action sizes, normalisation statistics, the
pi0.5 conventions it will apply (state prompt padding, image bars, bf16 float32 parts, relative
actions, normalisation) with the file or parameter each comes from, the tokenizer found (or where it looked and how to provide one), parameter count and bytes, and checks
every weight's key and shape against the model from the safetensors header alone (no weights are
read). Exit status 0 when the node can serve it, 1 on any problem, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import sys
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


def inspect(folder: str | Path, tokenizer: str | None = None, asset_id: str | None = None,
            lerobot_version: str = "auto") -> dict:
    """-> a report dict; report["problems"] lists everything that stops serving. The folder's
    family (engine/families/loader.py: the one whose format it is) writes the report."""
    from ..engine import folder_family, version_options

    folder = Path(folder)
    report: dict = {"checkpoint": str(folder), "problems": []}
    family = folder_family(folder)
    try:
        options = version_options(family, folder, lerobot_version)
    except ValueError as err:
        report["problems"].append(str(err))
        return report
    report.update(family.inspect_folder(folder, tokenizer, asset_id, **options))
    if "config" in report:
        report["model"] = _shape(report.pop("config"))
    return report


def _print(r: dict) -> None:
    """The report's rows, each where the folder's family reported it (a Qwen3-VL folder: its
    heads and experts' file; a pi0.5 folder: cameras, sizes, statistics, parameters)."""
    rows = [("checkpoint", f"{r['checkpoint']} ({r.get('format', '?')})")]
    if "model" in r:
        rows += [("model", r["model"])]
        rows += [("head", h) for h in r.get("heads", ())]
        if "camera_keys" in r:
            rows += [("cameras", ", ".join(r["camera_keys"])),
                     ("state / action", f"{r['state_dim']} / {r['action_dim']} values, "
                                        f"n_action_steps {r['n_action_steps']}"),
                     ("norm state", r["norm_state"]), ("norm action", r["norm_action"])]
        rows += [("tokenizer", r["tokenizer"])]
        if "chat_template" in r:
            rows.append(("chat template", r["chat_template"]))
        # the pi0.5 pre/post-processing it will apply, each with where it was read or set
        rows += [(f"conv. {k}", v) for k, v in (r.get("conventions") or {}).items()]
        if r.get("asset_id"):
            rows.append(("asset_id", r["asset_id"]))
        if "action_expert" in r:
            rows += [("action expert", r["action_expert"])]
        if "weights" in r and "params" not in r:
            rows += [("weights", r["weights"])]
    if "params" in r:
        rows += [("parameters", f"{r['params']:,} ({r['params'] / 1e9:.3f} B), {r['file_bytes']:,} bytes "
                                f"in the file {r['file_dtypes']}"),
                 ("weights", r["weights"])]
        if r.get("unread"):  # counted in the file's bytes, never loaded
            names = ", ".join(r["unread"][:4]) + (" ..." if len(r["unread"]) > 4 else "")
            rows += [("not read", f"{len(r['unread'])} tensor(s), {r['unread_bytes']:,} bytes: {names}")]
    width = max(15, *(len(k) for k, _ in rows))
    for key, val in rows:
        print(f"{key:<{width}} {val}")
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
    ap.add_argument("--lerobot-version", default="auto", help="LeRobot version whose conventions "
                    "apply (auto: what the folder shows; e.g. 0.4 for a v0.4.x fine-tune), as "
                    "model.lerobot_version")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args(argv)
    from ..engine import check_version_param
    try:
        check_version_param(args.lerobot_version)
    except ValueError as err:
        ap.error(f"--lerobot-version: {err}")
    report = inspect(args.checkpoint, args.tokenizer, args.asset_id, args.lerobot_version)
    if args.json:
        print(json.dumps(report))
    else:
        _print(report)
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
