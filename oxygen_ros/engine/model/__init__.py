"""What the model families share, in torch (packed tokens + AttentionContext; knows nothing about
paging): layers, norms, the flow-matching sampler and real-time chunking's guidance, the
tokenizer and the pi0.5-style prompt, checkpoint folder formats. Each family's own model is in
its folder (engine/families/<name>/)."""
from .layers import (AdaRMSNorm, GemmaMLP, RMSNorm, apply_rope, rope_cos_sin,
                     sinusoidal_time_embedding)
from .norm import FeatureNorm, NormStats
from .prompt import clean_instruction, discretize_state, format_prompt
from .sampler import (MASK_VALUE, LocalContext, euler_sample, masked_attention, model_velocity,
                      sample_actions)

__all__ = [
    "AdaRMSNorm", "FeatureNorm", "GemmaMLP", "LocalContext", "MASK_VALUE", "NormStats", "RMSNorm",
    "apply_rope", "clean_instruction", "discretize_state", "euler_sample", "format_prompt",
    "masked_attention", "model_velocity", "rope_cos_sin", "sample_actions",
    "sinusoidal_time_embedding",
]
