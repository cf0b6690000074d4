"""StarVLA's rules for a ModelConfig (torch-free: ModelConfig's validation and properties ask them,
engine/config/family_registry.py): the Qwen3-VL backbone's, then its heads on the prefill's hidden
states (hidden-crossattn, regress; engine/config/head_config.py), one chunk per head, named by
head_base."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...config.family_rules import Capabilities
from ..qwen3vl.config import QwenVLRules

if TYPE_CHECKING:
    from ...config.model_config import ExpertConfig, ModelConfig


def head_base(e: "ExpertConfig") -> str:
    """pi_v3 / gr00t / oft: a hidden-crossattn head reading every layer / the last, a regress
    head."""
    if e.kind == "regress":
        return "oft"
    return "pi_v3" if e.head.source == "layerwise" else "gr00t"


class StarVLARules(QwenVLRules):
    name = "starvla"
    capabilities = Capabilities(rtc=False, cuda_graphs=False, causal_prefix=True, bos=False,
                                keeps_hidden=True)

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


RULES = StarVLARules()
