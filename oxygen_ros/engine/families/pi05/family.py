"""pi0.5: a PaliGemma (SigLIP + Gemma) backbone and a layerwise adaRMS action expert on every
layer (a Mixture of Transformers, engine/families/pi05/model.py); bidirectional prefix, BOS-led prompts,
one chunk "action" from S flow-matching Euler steps; real-time chunking and CUDA graphs.
Checkpoints: LeRobot and openpi folders (engine/families/pi05/checkpoint.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ...runner.paging import PagedContext
from ...model.rtc import Guide, guided_euler_sample
from ...runner.action_stage import ActionInputs
from ..base import Family, ParamCounts, StageCost
from .config import Pi05Rules
from ...model.sampler import LocalContext, euler_sample

# the model code (transformers' SigLIP) is imported where it runs: the loader resolves every
# family to find which one owns a folder (engine/families/loader.py)
if TYPE_CHECKING:
    from .model import AdaRMSModulations
    from ...model.sampler import Velocity
    from ...config.model_config import ModelConfig
    from ...runner.model_runner import ModelRunner, SeqView
    from ...model.tokenizer import Tokenizer

# a kv-layerwise model's stages after the prefill and how many times a frame runs each
MOT_PER_FRAME = {"prefill": "1", "denoise_step": "S", "adarms_once": "1", "decode_step": "k"}


def velocity_fn(model: torch.nn.Module, expert: int, x: torch.Tensor, positions: torch.Tensor,
                ctx: PagedContext, cond: torch.Tensor) -> torch.Tensor:
    """The action expert's flow-matching velocity v(x, t) over the frame's prefix."""
    hidden = model.action_in(expert, x)
    out = model.forward_tokens(expert, hidden, positions, ctx, cond)  # cond [W]: broadcast
    return model.action_out(expert, out).float()


# One compiled function for the whole process, so engines that share a model (the modes of a
# benchmark) share the compiled graphs instead of compiling again.
compiled_velocity_fn = torch.compile(velocity_fn, dynamic=False)


def kv_action_costs(config: "ModelConfig", counts: ParamCounts, prefix_tokens: int,
                    elem: int) -> list[StageCost]:
    """A kv-layerwise expert's floor entries: one denoise step (S times) and the once-per-S
    part (adaRMS for pi0.5, the time/state MLPs for the DiT)."""
    h, p = config.action_horizon, prefix_tokens
    layers = config.action_experts[0].num_layers or config.depth
    kv_action = layers * 2 * config.num_kv_heads * config.head_dim * elem
    # prefix + action tokens read once (all action queries share one block-table row) and the
    # action tokens written, over the expert's layers
    return [StageCost("denoise_step", counts.action_step * elem, (p + h) * kv_action + h * kv_action,
                      0, "S"),
            StageCost("adarms_once", counts.adarms_once * elem, 0, 0, "1")]


class Pi05Family(Pi05Rules, Family):
    """pi0.5's config rules (config.py) and its model, prompt, action stage and folders."""

    def prompt_ids(self, config: "ModelConfig", tokenizer: "Tokenizer", text: str) -> list[int]:
        return tokenizer.encode(text, add_bos=True)

    # -- the model -------------------------------------------------------------------------------
    def init_model(self, config, seed, device, dtype):
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import init_mot

        return init_mot(config, seed, device, dtype)

    def prepare(self, model: torch.nn.Module, linear_layout: str) -> None:
        model.fuse_projections(linear_layout)

    def action_chunks(self, runner: "ModelRunner", a: ActionInputs) -> dict[str, torch.Tensor]:
        # runner.denoise picks its own grad mode (RTC's vjp needs one)
        return {"action": runner.denoise(a.seq, a.prefix_len, a.noise, a.num_steps,
                                         guide=a.guide, state=a.state)}

    def denoise(self, runner: "ModelRunner", seq: "SeqView", prefix_len: int,
                noise: torch.Tensor, num_steps: int, expert: int, guide: Guide | None,
                state: torch.Tensor | None) -> torch.Tensor:
        """Flow-matching Euler from t=1 (noise) to t=0 (ModelRunner.denoise)."""
        if guide is not None and guide.method == "guided" and guide.jacobian == "vjp":
            return self._denoise_vjp(runner, seq, prefix_len, noise, num_steps, expert, guide)
        with torch.inference_mode():
            return self._denoise(runner, seq, prefix_len, noise, num_steps, expert, guide)

    def _denoise(self, r: "ModelRunner", seq: "SeqView", prefix_len: int, noise: torch.Tensor,
                 num_steps: int, expert: int, guide: Guide | None) -> torch.Tensor:
        h = noise.shape[0]
        conds = self.adarms_schedule(r, expert, num_steps)
        x0 = noise.to(device=r.device, dtype=torch.float32)
        velocity_of = compiled_velocity_fn if r.compile_denoise else velocity_fn
        if r.denoise_graphs is not None and guide is None:  # the whole S-step loop as one graph
            return r.denoise_graphs.run(expert, seq.block_table, prefix_len,
                                        r.slots_of(seq.block_table, prefix_len, h), x0, conds,
                                        velocity_of)
        slots = r.long(r.slots_of(seq.block_table, prefix_len, h))
        ctx = PagedContext(r, slots, r.tables([seq.block_table]), r.int32([0] * h),
                           r.int32([prefix_len + h] * h), r.seq_start([h]))
        positions = torch.arange(prefix_len, prefix_len + h, device=r.device)
        velocity = self._on_schedule(r, velocity_of, expert, positions, ctx, conds)
        if guide is not None:
            return guided_euler_sample(velocity, x0, num_steps, guide)
        # The model's own Euler schedule (one copy of the pi0.5 sampler, shared with the
        # unpaged reference path and the captured denoise graph).
        return euler_sample(velocity, x0, num_steps)

    def _denoise_vjp(self, r: "ModelRunner", seq: "SeqView", prefix_len: int,
                     noise: torch.Tensor, num_steps: int, expert: int, guide: Guide
                     ) -> torch.Tensor:
        """Guided denoising with the vector-Jacobian product through the action expert: the
        prefix K/V are gathered once from the pool (read, never differentiated) and the action
        tokens attend to [prefix ; actions] with differentiable attention (LocalContext, the
        reference path); the paged kernels have no backward. Outside inference mode (autograd),
        under no_grad except each step's velocity."""
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .model import AdaRMSModulations

        with torch.no_grad():
            # the prefix's slots, as every other path addresses the pool (a [slots, Hkv, D] copy)
            slots = r.long(r.slots_of(seq.block_table, 0, prefix_len))
            ks = [k.flatten(0, 1)[slots] for k in r.k_cache]
            vs = [v.flatten(0, 1)[slots] for v in r.v_cache]
            ctx = LocalContext(r.config.depth, r.scale, k=ks, v=vs)
            h = noise.shape[0]
            positions = torch.arange(prefix_len, prefix_len + h, device=r.device)
            # the cached modulations are inference tensors: autograd may not save them
            conds = {t: AdaRMSModulations(tuple((a.clone(), b.clone()) for a, b in c.layers),
                                          c.final.clone())
                     for t, c in self.adarms_schedule(r, expert, num_steps).items()}
            velocity = self._on_schedule(r, velocity_fn, expert, positions, ctx, conds)
            x0 = noise.to(device=r.device, dtype=torch.float32)
            return guided_euler_sample(velocity, x0, num_steps, guide, grad_velocity=velocity)

    @staticmethod
    def _on_schedule(r: "ModelRunner", fn, expert: int, positions: torch.Tensor, ctx,
                     conds: dict[float, "AdaRMSModulations"]) -> "Velocity":
        """v(x, t) of the action expert (`fn`: velocity_fn, compiled or not) with the
        modulations precomputed at the schedule's times; a time off the schedule (never, with
        euler_sample) computes its own."""
        m = r.model

        def velocity(x: torch.Tensor, t: float) -> torch.Tensor:
            cond = conds.get(t)
            if cond is None:
                cond = m.adarms_modulations(expert, m.time_cond(expert, t))
            return fn(m, expert, x.to(r.dtype), positions, ctx, cond)

        return velocity

    @staticmethod
    def adarms_schedule(r: "ModelRunner", expert: int, num_steps: int
                        ) -> dict[float, "AdaRMSModulations"]:
        """The adaRMS modulations at every time of the fixed S-step Euler schedule (t_k = 1 +
        k dt, as euler_sample computes them), made once per (expert, S) instead of every step:
        each step would otherwise re-read the time MLP and 2 x depth + 1 dense layers (~117 M
        parameters for pi0.5). A few schedules are kept in the runner (S may change live)."""
        def make() -> dict[float, "AdaRMSModulations"]:
            m, dt = r.model, -1.0 / num_steps
            times = [1.0 + k * dt for k in range(num_steps)]
            return {t: m.adarms_modulations(expert, m.time_cond(expert, t)) for t in times}

        return r.schedules.get((expert, num_steps), make)

    # -- the floor -------------------------------------------------------------------------------
    def count_params(self, config: "ModelConfig", expert: int = 1) -> ParamCounts:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .model import MoTModel

        with torch.device("meta"):
            model = MoTModel(config)
        groups = dict(vision=0, vlm_layers=0, lm_head=0, action_step=0, adarms_once=0)
        for name, p in model.named_parameters():
            n = p.numel()
            if name.startswith("vision."):
                groups["vision"] += n
            elif name == "token_embedding.weight":
                groups["lm_head"] += n
            elif name.startswith("experts.0."):
                groups["vlm_layers"] += n
            elif name.startswith(f"experts.{expert}."):
                groups["adarms_once" if ".dense." in name else "action_step"] += n
            elif name.startswith(f"action_heads.{expert - 1}."):
                groups["adarms_once" if ".time_mlp" in name else "action_step"] += n
        return ParamCounts(**groups)

    def action_costs(self, config, counts, prefix_tokens, elem):
        return kv_action_costs(config, counts, prefix_tokens, elem)

    # -- checkpoints (LeRobot / openpi folders) --------------------------------------------------
    # every folder no other family claims: formats.read_checkpoint_files says what it is
    # (LeRobot or openpi) or why it is neither
    opens_unclaimed = True
    lerobot_conventions = True

    def pixel_dtype(self, model, dtype):
        return model.pixel_dtype  # float32 where LeRobot keeps the vision tower in float32

    # lerobot_version: which LeRobot version's conventions apply ("auto": what the folder shows;
    # engine/model/conventions.py); only this family takes it (loader.open_checkpoint)
    def open_folder(self, folder, device, dtype, tokenizer=None, asset_id=None, progress=None,
                    lerobot_version="auto"):
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import open_pi05_folder

        return open_pi05_folder(folder, device, dtype, tokenizer, asset_id, progress, lerobot_version)

    def inspect_folder(self, folder, tokenizer=None, asset_id=None, lerobot_version="auto") -> dict[str, Any]:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .checkpoint import inspect_pi05_folder

        return inspect_pi05_folder(folder, tokenizer, asset_id, lerobot_version)

    def write_folder(self, model, folder) -> None:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from .writer import save_lerobot_checkpoint

        save_lerobot_checkpoint(model, model.config, folder)


FAMILY = Pi05Family()
