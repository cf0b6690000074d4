"""pi0.5's rules for a ModelConfig (torch-free: ModelConfig's validation and properties ask them,
engine/config/family_registry.py): a kv-layerwise action expert on every layer, no Qwen sections;
the layout, heads and cache are FamilyRules' defaults."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...config.family_rules import Capabilities, FamilyRules

if TYPE_CHECKING:
    from ...config.model_config import ModelConfig


class Pi05Rules(FamilyRules):
    name = "pi05"
    capabilities = Capabilities(rtc=True, cuda_graphs=True, causal_prefix=False, bos=True)

    def validate(self, config: "ModelConfig") -> None:
        if config.qwen is not None:
            raise ValueError(f"family {self.name} takes no qwen fields (a Qwen3-VL backbone is "
                             f"family qwen3vl or starvla)")
        if config.hybrid is not None:
            raise ValueError(f"family {self.name} takes no hybrid fields (family qwen35)")
        for e in config.action_experts:
            if e.kind != "kv-layerwise":
                raise ValueError(f"a {e.kind} action head reads the Qwen3-VL prefill's hidden "
                                 f"states: family starvla only, not {self.name}")
            heads = e.num_heads or config.num_heads
            if heads % config.num_kv_heads:
                raise ValueError(f"expert heads {heads} not a multiple of num_kv_heads "
                                 f"{config.num_kv_heads}")


RULES = Pi05Rules()
