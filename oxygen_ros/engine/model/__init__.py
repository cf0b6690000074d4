"""pi0.5-class MoT VLA in torch (packed tokens + AttentionContext; knows nothing about paging)."""
from .checkpoint import describe_checkpoint, to_lerobot_name
from .loader import Checkpoint, init_model, load_checkpoint, open_checkpoint
from .layers import (AdaRMSNorm, GemmaMLP, RMSNorm, apply_rope, rope_cos_sin,
                     sinusoidal_time_embedding)
from .mot import AttentionContext, MoTModel
from .norm import FeatureNorm, NormStats
from .prompt import clean_instruction, discretize_state, format_prompt
from .sampler import (MASK_VALUE, LocalContext, euler_sample, masked_attention, model_velocity,
                      sample_actions)
from .writer import save_lerobot_checkpoint, save_openpi_checkpoint

__all__ = [
    "AdaRMSNorm", "AttentionContext", "Checkpoint", "FeatureNorm", "GemmaMLP", "LocalContext", "MASK_VALUE", "MoTModel", "NormStats",
    "RMSNorm", "apply_rope", "clean_instruction", "describe_checkpoint", "discretize_state", "euler_sample", "format_prompt",
    "init_model", "load_checkpoint", "masked_attention", "model_velocity", "open_checkpoint", "rope_cos_sin",
    "sample_actions", "save_lerobot_checkpoint", "save_openpi_checkpoint", "sinusoidal_time_embedding", "to_lerobot_name",
]
