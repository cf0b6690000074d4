"""StarVLA's action heads on the Qwen3-VL backbone (docs/starvla.md): a frame runs one prefill
that keeps the hidden states the heads read, then each head in turn on them (PI_v3 and GR00T
DiTs cross-attending, hidden-crossattn; OFT regressing its action queries, regress), one chunk
per head. Named by its presets (ModelConfig.family "starvla"), never inferred from the heads.
The layout, prompt, model and folders are the Qwen3-VL family's."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

from ...runner.action_stage import ActionInputs
from ...config.family_rules import Capabilities
from ..base import HeadParams, ParamCounts, StageCost
from ..qwen3vl.family import QwenVLFamily
from .heads import (crossattn_memory, crossattn_memory_bytes, crossattn_sample, kept_hidden_bytes,
                    query_positions, regress_chunk)

if TYPE_CHECKING:
    from ...config.model_config import ExpertConfig, ModelConfig
    from ...runner.model_runner import ModelRunner


def head_base(e: "ExpertConfig") -> str:
    """pi_v3 / gr00t / oft: a hidden-crossattn head reading every layer / the last, a regress
    head."""
    if e.kind == "regress":
        return "oft"
    return "pi_v3" if e.head.source == "layerwise" else "gr00t"


class StarVLAFamily(QwenVLFamily):
    name = "starvla"
    capabilities = Capabilities(rtc=False, cuda_graphs=False, causal_prefix=True, bos=False,
                                keeps_hidden=True)
    action_stage_label = "heads"

    def validate(self, config: "ModelConfig") -> None:
        super().validate(config)
        for e in config.action_experts:
            self._check_head(config, e)

    @staticmethod
    def _check_head(config: "ModelConfig", e: "ExpertConfig") -> None:
        """A head on the prefill's hidden states (engine/config/head_config.py): an OFT head's input is
        the backbone's width and its placeholder a token of the vocabulary."""
        if e.kind == "kv-layerwise":
            raise ValueError(f"family starvla runs StarVLA heads (hidden-crossattn, regress), "
                             f"not kv-layerwise experts (family qwen3vl); a frame runs one or "
                             f"the other, not both (docs/starvla.md)")
        if e.head.action_dim != config.action_dim:
            raise ValueError(f"a {e.kind} head's action_dim {e.head.action_dim} must be the "
                             f"model's {config.action_dim} (one noise and one joint space)")
        if e.kind == "regress":
            if e.width != config.vlm.width:
                raise ValueError(f"a regress head reads the backbone's hidden states: its width "
                                 f"must be the VLM's {config.vlm.width}, got {e.width}")
            if e.head.query_token_id >= config.vocab_size:
                raise ValueError(f"regress query_token_id {e.head.query_token_id} outside vocab "
                                 f"of {config.vocab_size}")
            queries = config.qwen.action_query_ids
            if list(queries).count(e.head.query_token_id) < e.head.horizon:
                raise ValueError(f"a regress head of horizon {e.head.horizon} reads as many "
                                 f"action-query tokens {e.head.query_token_id}: put them in "
                                 f"qwen.action_query_ids (got {list(queries)})")

    def head_names(self, config: "ModelConfig") -> tuple[str, ...]:
        """pi_v3 / gr00t / oft, numbered from the second alike (pi_v3, pi_v3_2, ...)."""
        names: list[str] = []
        for e in config.action_experts:
            base = head_base(e)
            n = sum(1 for x in names if x == base or x.startswith(base + "_"))
            names.append(base if n == 0 else f"{base}_{n + 1}")
        return tuple(names)

    def noise_rows(self, config: "ModelConfig") -> int:
        """Every DiT head's chunk one after the other (each head its own rows, in head order)."""
        return sum(e.head.horizon for e in config.action_experts if e.kind == "hidden-crossattn")

    def action_tokens(self, config: "ModelConfig") -> int:
        # the heads read hidden states, not scratch K/V: the chunk's slots stay reserved as the
        # Qwen3-VL layout always has (state + time + chunk), so a frame's blocks do not change
        return config.qwen.state_tokens + 1 + config.action_horizon

    def kept_layers(self, config: "ModelConfig") -> tuple[int, ...]:
        # lazy: loads transformers; config validation resolves the family
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
__all__ = ["FAMILY", "HeadParams", "StarVLAFamily", "head_base"]
