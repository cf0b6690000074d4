"""StarVLA's action heads on the Qwen3-VL backbone (docs/starvla.md): a frame runs one prefill
that keeps the hidden states the heads read, then each head in turn on them (PI_v3 and GR00T
DiTs cross-attending, hidden-crossattn; OFT regressing its action queries, regress), one chunk
per head. Named by its presets (ModelConfig.family "starvla"), never inferred from the heads.
The layout, prompt, model and folders are the Qwen3-VL family's."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

from ...runner.action_stage import ActionInputs
from ..base import ParamCounts, StageCost
from ..qwen3vl.family import QwenVLFamily
from .config import StarVLARules
from .heads import (crossattn_memory, crossattn_memory_bytes, crossattn_sample, kept_hidden_bytes,
                    query_positions, regress_chunk)

if TYPE_CHECKING:
    from ...config.model_config import ModelConfig
    from ...runner.model_runner import ModelRunner


class StarVLAFamily(StarVLARules, QwenVLFamily):
    """StarVLA's config rules (config.py) and its heads' action stage and floor."""

    action_stage_label = "heads"

    def kept_layers(self, config: "ModelConfig") -> tuple[int, ...]:
        # lazy: loads transformers; the loader resolves every family to find a folder's
        from ..qwen3vl.model import prefill_kept_layers

        return prefill_kept_layers(config)

    def action_chunks(self, runner: "ModelRunner", a: ActionInputs) -> dict[str, torch.Tensor]:
        """Each head in turn on the hidden states the prefill kept; ``a.noise`` holds every DiT
        head's rows one after the other, ``a.state`` feeds a head with a state token, the
        prefix's images and prompt give OFT its action queries."""
        if a.guide is not None:  # the engine refuses an action prior for this family first
            raise ValueError(f"real-time chunking covers families with capabilities.rtc, not "
                             f"{self.name}")
        with torch.inference_mode():
            return self._head_chunks(runner, a.prefix_len, a.noise, a.num_steps, a.state,
                                     a.num_images, a.prompt_ids)

    def _head_chunks(self, r: "ModelRunner", prefix_len: int, noise: torch.Tensor,
                     num_steps: int, state: torch.Tensor | None, num_images: int,
                     prompt_ids: Sequence[int]) -> dict[str, torch.Tensor]:
        c, m = r.config, r.model
        if noise.shape != (self.noise_rows(c), c.action_dim):
            raise ValueError(f"noise must be [{self.noise_rows(c)}, {c.action_dim}], got "
                             f"{tuple(noise.shape)}")
        last = r.hidden[c.depth - 1][:prefix_len][None]
        chunks, row = {}, 0
        for i, (name, e) in enumerate(zip(self.head_names(c), c.action_experts)):
            head = m.head(i + 1)
            if e.kind == "regress":
                ids = m.prefix_ids(num_images, list(prompt_ids))
                if len(ids) != prefix_len:
                    raise ValueError(f"an OFT head needs the prefix's images and prompt "
                                     f"({prefix_len} tokens), got {len(ids)}")
                ids = torch.as_tensor(ids, device=r.device)[None]
                pos = query_positions(ids, e.head.query_token_id, e.head.horizon)
                chunks[name] = regress_chunk(head, last, pos)[0]
                continue
            if e.head.source == "layerwise":
                hidden = [r.hidden[layer][:prefix_len][None]
                          for layer in range(c.depth - e.num_layers, c.depth)]
            else:
                hidden = last
            x0 = noise[row:row + e.head.horizon].to(r.device)[None]
            row += e.head.horizon
            s = None
            if e.head.state_dim:
                s = torch.zeros(1, e.head.state_dim, device=r.device)
                if state is not None:
                    v = state.reshape(-1)[:e.head.state_dim]
                    s[0, :v.numel()] = v.to(r.device)
            chunks[name] = crossattn_sample(head, crossattn_memory(head, hidden), x0, num_steps,
                                            s)[0]
        return chunks

    # -- the floor -------------------------------------------------------------------------------
    def action_costs(self, config: "ModelConfig", counts: ParamCounts, prefix_tokens: int,
                     elem: int) -> list[StageCost]:
        """What the prefill adds (an entry named "prefill": the hidden states it keeps for the
        heads), then each head's per-frame part and step (OFT: per frame only)."""
        p = prefix_tokens
        out = [StageCost("prefill", 0, 0, kept_hidden_bytes(config, p, elem), "1")]
        for e, hp in zip(config.action_experts, counts.heads):
            if e.kind == "regress":
                out.append(StageCost(f"head {hp.name}", hp.per_frame * elem, 0,
                                     e.head.horizon * config.vlm.width * elem, "1"))
                continue
            memory = crossattn_memory_bytes(e, p, elem)
            layers = e.num_layers if e.head.source == "layerwise" else 1
            # cross K/V written once, read by every step; the kept hidden states read once
            out.append(StageCost(f"head {hp.name} (per frame)", hp.per_frame * elem, memory,
                                 layers * p * config.vlm.width * elem, "1"))
            out.append(StageCost(f"head {hp.name} step", hp.per_step * elem, memory, 0, "S"))
        return out


FAMILY = StarVLAFamily()
__all__ = ["FAMILY", "StarVLAFamily"]
