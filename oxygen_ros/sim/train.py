"""Train the simulator policy (oxygen_ros/sim/policy.py) on recorded demonstrations, on the CPU.

    oxygen-sim train --data data/sim_demos.npz --out checkpoints/sim-policy

Flow matching on the action chunks plus cross-entropy on the stage captions
(oxygen_ros/sim/train_forward.py), AdamW with a linear warm-up and a cosine decay, normalisation
statistics (q01 / q99, pi0.5's) from the training episodes, a byte-level BPE learnt from the
instructions and captions. Deterministic for a seed and thread count (shuffling, noise and
times come from seeded generators). Writes into --out: the LeRobot-format checkpoint
(engine/families/pi05/writer.py; `oxygen-inspect` reads it, the node loads it with model.checkpoint)
with tokenizer.json, training.json (the command, the data, the split, the time, the final
losses), loss.csv and loss.png. The checkpoint is written after every epoch too, so a run cut
short still leaves a usable (less trained) policy.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ..engine import init_model, load_checkpoint, save_lerobot_checkpoint
from .dataset import Batcher, Demos, norm_stats
from .policy import MEMORY_PROMPT, PromptCodec, build_tokenizer, policy_config
from .train_forward import losses

LOG_FIELDS = ("step", "epoch", "seconds", "lr", "loss", "flow", "caption")


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    """Linear warm-up to `peak`, then cosine to 10% of it."""
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(frac, 1.0))))


def plot_losses(csv_path: Path, png_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(csv.DictReader(csv_path.open()))
    if not rows:
        return
    step = [int(r["step"]) for r in rows]
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    ax[0].plot(step, [float(r["flow"]) for r in rows])
    ax[0].set_title("flow-matching MSE")
    ax[1].plot(step, [float(r["caption"]) for r in rows])
    ax[1].set_title("caption cross-entropy")
    for a in ax:
        a.set_xlabel("step")
        a.set_yscale("log")
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)


def train(data: str | Path, out: str | Path, epochs: float = 8.0, batch_size: int = 32,
          lr: float = 3e-4, weight_decay: float = 0.01, warmup: int = 200, seed: int = 0,
          held_out: float = 0.1, caption_weight: float = 0.25, threads: int = 1,
          log_every: int = 20, max_minutes: float = 0.0, model_kw: dict | None = None,
          progress: bool = True, command: str = "", init: str | Path | None = None,
          stop_step: int = 0) -> dict:
    """Train and write the checkpoint folder; returns the summary written to training.json.
    `init`: start from that checkpoint's weights, tokenizer and normalisation (fine-tuning; its
    shape must be policy_config(**model_kw)'s) instead of fresh ones. `stop_step` > 0: stop (and
    save) after that many steps of the planned schedule, which stays `epochs`' (the learning rate
    as in the whole run): a run `max_minutes` stopped is repeated exactly with its step count."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    demos = Demos.load(data)
    train_idx, held_idx = demos.split(held_out, seed)
    # the data decide the cameras, the action size and the image size (Meta-World: 1, 4, 64;
    # ALOHA: 3, 14, 64)
    model_kw = {"num_cameras": demos.num_cameras, "action_dim": int(demos.target.shape[1]),
                "image_size": int(demos.images.shape[-2]), **(model_kw or {})}
    config = policy_config(**(model_kw or {}))
    if init:
        model, loaded, tokenizer, stats = load_checkpoint(init)
        if loaded.to_dict() != config.to_dict() or stats is None:
            raise ValueError(f"--init {init}: not a simulator policy of this shape (with statistics)")
        model = model.train().requires_grad_(True)
    else:
        tokenizer = build_tokenizer(demos.instructions + demos.captions, config.vocab_size)
        # statistics of the expert's motions: a caption-only frame's target is wrong on purpose
        stats = norm_stats(demos, train_idx[demos.expert_frames[train_idx]])
        model = init_model(config, seed=seed).train().requires_grad_(True)
    codec = PromptCodec(config, tokenizer)
    batcher = Batcher(demos, codec, stats)
    params = [p for p in model.parameters()]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))
    steps_per_epoch = max(1, len(train_idx) // batch_size)
    total = max(1, int(round(epochs * steps_per_epoch)))
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    csv_path, png_path = out / "loss.csv", out / "loss.png"
    log_file = csv_path.open("w", newline="")
    log = csv.DictWriter(log_file, LOG_FIELDS)
    log.writeheader()
    sums = np.zeros(3)
    count = 0
    t0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, desc="train", unit="step", mininterval=5.0)
    step, stopped_early = 0, False
    order = np.empty(0, dtype=np.int64)
    last: dict = {}
    while step < total:
        if len(order) < batch_size:
            order = np.concatenate((order, rng.permutation(train_idx)))
        frames, order = order[:batch_size], order[batch_size:]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total, lr, warmup)
        out_l = losses(model, batcher.batch(frames), gen, caption_weight)
        opt.zero_grad(set_to_none=True)
        out_l.total.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sums += [float(out_l.total.detach()), float(out_l.flow.detach()), float(out_l.caption.detach())]
        count += 1
        step += 1
        if bar is not None:
            bar.update(1)
        if step % log_every == 0 or step == total:
            mean = sums / count
            last = {"step": step, "epoch": round(step / steps_per_epoch, 3),
                    "seconds": round(time.perf_counter() - t0, 1),
                    "lr": f"{opt.param_groups[0]['lr']:.3g}", "loss": f"{mean[0]:.5f}",
                    "flow": f"{mean[1]:.5f}", "caption": f"{mean[2]:.5f}"}
            log.writerow(last)
            log_file.flush()
            if bar is not None:
                bar.set_postfix(flow=last["flow"], caption=last["caption"])
            sums[:] = 0
            count = 0
        epoch_end = step % steps_per_epoch == 0
        stop = (max_minutes > 0 and time.perf_counter() - t0 > 60 * max_minutes
                or 0 < stop_step <= step)  # out of time, or at the step asked for
        if epoch_end or step == total or stop:
            save(model, config, out, tokenizer, stats, demos)
            plot_losses(csv_path, png_path)
        if stop and step < total:
            stopped_early = True
            break
    if bar is not None:
        bar.close()
    log_file.close()
    summary = {
        "command": command, "data": str(data), "data_meta": demos.meta,
        "frames": len(demos), "episodes": int(len(np.unique(demos.episode))),
        "caption_only_frames": int(demos.caption_only.sum()), "init": str(init) if init else None,
        "train_frames": int(len(train_idx)), "held_out_frames": int(len(held_idx)),
        "held_out_episodes": sorted(int(e) for e in np.unique(demos.episode[held_idx])),
        "tasks": demos.tasks, "instructions": demos.instructions, "captions": demos.captions,
        "model": config.to_dict(), "params": int(sum(p.numel() for p in params)),
        "steps": step, "planned_steps": total, "stopped_early": stopped_early,
        "batch_size": batch_size, "epochs": round(step / steps_per_epoch, 3), "lr": lr,
        "weight_decay": weight_decay, "warmup": warmup, "seed": seed, "threads": threads,
        "caption_weight": caption_weight, "seconds": round(time.perf_counter() - t0, 1),
        "final": last, "memory_prompt": MEMORY_PROMPT,
        "action_period_steps": demos.action_period_steps,
        "control_rate_hz": 1.0 / (demos.action_period_steps * demos.meta.get("control_period_s", 0.0125)),
    }
    (out / "training.json").write_text(json.dumps(summary, indent=2))
    return summary


def save(model, config, out: Path, tokenizer, stats, demos: Demos) -> None:
    cameras = demos.meta.get("cameras") or [demos.meta.get("camera", "camera0")]
    save_lerobot_checkpoint(model, config, out, tokenizer=tokenizer, norm_stats=stats,
                            camera_keys=[f"observation.images.{c}" for c in cameras],
                            n_action_steps=config.action_horizon)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="dataset file from oxygen_ros.sim.demos")
    p.add_argument("--out", required=True, help="checkpoint folder to write")
    p.add_argument("--epochs", type=float, default=8.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--held-out", type=float, default=0.1, help="fraction of episodes per task")
    p.add_argument("--caption-weight", type=float, default=0.25)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (1: on a shared 2-core machine two OpenMP threads ran 5-10x slower)")
    p.add_argument("--max-minutes", type=float, default=0.0,
                   help="stop (and save) after this long; 0: run the whole schedule")
    p.add_argument("--stop-at-step", type=int, default=0,
                   help="stop (and save) after this many steps, the schedule still --epochs': "
                        "repeats a --max-minutes run exactly (its training.json steps); 0: off")
    p.add_argument("--width", type=int, default=None, help="VLM width")
    p.add_argument("--expert-width", type=int, default=None)
    p.add_argument("--depth", type=int, default=None)
    p.add_argument("--patch", type=int, default=None, help="vision patch size (64 px images)")
    p.add_argument("--horizon", type=int, default=None,
                   help="action chunk steps (default policy.ACTION_HORIZON); a chunk must cover the "
                        "deployment's observation -> next chunk time (latency + period)")
    p.add_argument("--init", default=None,
                   help="start from this checkpoint (weights, tokenizer, statistics): fine-tuning")
    p.add_argument("--max-prompt-tokens", type=int, default=None,
                   help="prompt length limit (default 64; ALOHA's 14 state values need about 100)")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    if a.stop_at_step < 0:
        p.error(f"--stop-at-step must be >= 0, got {a.stop_at_step}")
    model_kw = {k: v for k, v in (("width", a.width), ("expert_width", a.expert_width),
                                  ("depth", a.depth), ("patch", a.patch), ("horizon", a.horizon),
                                  ("max_prompt_tokens", a.max_prompt_tokens))
                if v is not None}
    command = "oxygen-sim train " + " ".join(shlex.quote(x) for x in
                                                            (argv if argv is not None else sys.argv[1:]))
    summary = train(a.data, a.out, a.epochs, a.batch_size, a.lr, a.weight_decay, a.warmup, a.seed,
                    a.held_out, a.caption_weight, a.threads, max_minutes=a.max_minutes,
                    model_kw=model_kw, progress=not a.no_progress, command=command, init=a.init,
                    stop_step=a.stop_at_step)
    print(json.dumps({k: summary[k] for k in ("steps", "epochs", "seconds", "final",
                                               "stopped_early")}, indent=2))
    return 0
