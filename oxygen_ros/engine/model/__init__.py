"""pi0.5-class MoT VLA in torch (packed tokens + AttentionContext; knows nothing about paging)."""
from .checkpoint import NormStats, init_model, load_checkpoint, save_lerobot_checkpoint, to_lerobot_name
from .layers import (AdaRMSNorm, GemmaMLP, RMSNorm, apply_rope, rope_cos_sin,
                     sinusoidal_time_embedding)
from .mot import AttentionContext, MoTModel
from .prompt import clean_instruction, discretize_state, format_prompt
from .sampler import (MASK_VALUE, LocalContext, euler_sample, masked_attention, model_velocity,
                      sample_actions)

__all__ = [
    "AdaRMSNorm", "AttentionContext", "GemmaMLP", "LocalContext", "MASK_VALUE", "MoTModel", "NormStats",
    "RMSNorm", "apply_rope", "clean_instruction", "discretize_state", "euler_sample", "format_prompt",
    "init_model", "load_checkpoint", "masked_attention", "model_velocity", "rope_cos_sin",
    "sample_actions", "save_lerobot_checkpoint", "sinusoidal_time_embedding", "to_lerobot_name",
]
