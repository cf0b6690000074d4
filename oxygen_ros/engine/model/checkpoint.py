"""Random init, and save / load in the LeRobot pi05 checkpoint layout.

Files: config.json ("type": "pi05", LeRobot fields, our ModelConfig under "oxygen_model_config"),
model.safetensors (``model.paligemma_with_expert...`` names), policy_preprocessor.json +
policy_preprocessor_step_3_normalizer_processor.safetensors, policy_postprocessor.json +
policy_postprocessor_step_0_unnormalizer_processor.safetensors, tokenizer.json.

Extension for E > 2 (not in LeRobot): action expert i >= 2 is ``gemma_expert_{i}`` with
``action_in_proj_{i}`` etc.; expert 1 keeps the pi0.5 names.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file as np_load_file, save_file as np_save_file
from safetensors.torch import load_file, save_file

from ..config import ModelConfig, PRESETS, model_config_from_dict
from .mot import MoTModel

PWE = "model.paligemma_with_expert."
VLM = PWE + "paligemma.model.language_model."
VISION = PWE + "paligemma.model.vision_tower."
VISION_OLD = VISION + "vision_model."
PROJ = PWE + "paligemma.model.multi_modal_projector.linear."
EMBED = VLM + "embed_tokens.weight"
LM_HEAD = PWE + "paligemma.lm_head.weight"
CONFIG_KEY = "oxygen_model_config"
PRE_STATE = "policy_preprocessor_step_3_normalizer_processor.safetensors"
POST_STATE = "policy_postprocessor_step_0_unnormalizer_processor.safetensors"
# present in real checkpoints, unused by pi0.5 inference
IGNORED_SUFFIXES = ("lm_head.weight", "model.embed_tokens.weight")
IGNORED_EXACT = ("model.state_proj.weight", "model.state_proj.bias")
_LAYER_MAP = {"input_norm": "input_layernorm", "post_norm": "post_attention_layernorm",
              "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj",
              "v_proj": "self_attn.v_proj", "o_proj": "self_attn.o_proj", "mlp": "mlp"}


def _expert_prefix(e: int) -> str:
    if e == 0:
        return VLM
    return PWE + ("gemma_expert.model." if e == 1 else f"gemma_expert_{e}.model.")


def _head_suffix(e: int) -> str:
    return "" if e == 1 else f"_{e}"


def to_lerobot_name(name: str) -> str:
    """Our parameter name -> LeRobot pi05 key (transformers 5.2x vision naming)."""
    parts = name.split(".")
    if parts[0] == "vision":
        if parts[1] == "tower":
            return VISION + ".".join(parts[2:])
        return PROJ + parts[-1]
    if parts[0] == "token_embedding":
        return EMBED
    if parts[0] == "experts":
        e = int(parts[1])
        pre = _expert_prefix(e)
        if parts[2] == "norm":
            return pre + "norm." + ".".join(parts[3:])
        layer, mod, rest = parts[3], parts[4], parts[5:]
        return f"{pre}layers.{layer}.{_LAYER_MAP[mod]}." + ".".join(rest)
    if parts[0] == "action_heads":
        e = int(parts[1]) + 1
        return f"model.{parts[2]}{_head_suffix(e)}.{parts[3]}"
    raise KeyError(f"no LeRobot name for parameter {name}")


def _canonical(key: str) -> str | None:
    """Normalise a checkpoint key to the names to_lerobot_name writes; None to ignore it."""
    if not key.startswith("model."):
        key = "model." + key  # openpi's converter writes the same names without "model."
    if key.startswith(VISION_OLD):
        key = VISION + key[len(VISION_OLD):]
    if key.startswith("model.action_time_mlp_"):
        key = "model.time_mlp_" + key[len("model.action_time_mlp_"):]
    if key in IGNORED_EXACT or key.startswith(VISION + "head."):
        return None
    if key == LM_HEAD:
        return key  # handled by the tie
    if key.startswith(PWE + "gemma_expert") and key.endswith(IGNORED_SUFFIXES):
        return None
    return key


def init_model(config: ModelConfig, seed: int = 0, device: str | torch.device = "cpu",
               dtype: torch.dtype | str = torch.float32) -> MoTModel:
    """Deterministic random init (same seed -> same weights on any device); inference-only
    (requires_grad off, eval mode), as is the model load_checkpoint returns.

    Linear weights ~ N(0, 1/fan_in) (residual branches as large as the input, so the output
    depends on context), embeddings ~ N(0, 1/W_vlm) (so sqrt(W)-scaled inputs and tied logits
    are O(1)), norm weights ~ N(0, 0.1) except the VLM's final norm (see below),
    adaRMS dense small weights with bias (scale, shift, gate) = (0, 0, 1), biases 0.
    """
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    with torch.device("cpu"):
        model = MoTModel(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("vision.tower.") and "patch_embedding" not in name \
                    and "position_embedding" not in name:
                if name.endswith("weight") and p.dim() == 2:
                    p.normal_(0.0, p.shape[1] ** -0.5, generator=gen)
                elif "norm" in name and name.endswith("weight"):
                    p.fill_(1.0)
                else:
                    p.zero_()
                continue
            if name == "token_embedding.weight":
                p.normal_(0.0, config.vlm.width ** -0.5, generator=gen)
            elif "patch_embedding.weight" in name:
                p.normal_(0.0, (p[0].numel()) ** -0.5, generator=gen)
            elif "position_embedding" in name:
                p.normal_(0.0, 0.5, generator=gen)
            elif name.endswith("dense.weight"):
                p.normal_(0.0, 0.1 * p.shape[1] ** -0.5, generator=gen)
            elif name.endswith("dense.bias"):
                p.zero_()
                p[2 * p.shape[0] // 3:] = 1.0  # gate = 1
            elif name == "experts.0.norm.weight":
                # (1 + w) ~ N(0, 1): random per-channel gains with random signs, so the tied
                # LM head does not simply echo the input token (a random tied model otherwise
                # predicts its own input forever, which makes greedy-decoding tests vacuous).
                p.normal_(-1.0, 1.0, generator=gen)
            elif p.dim() == 1 and name.endswith("norm.weight"):
                p.normal_(0.0, 0.1, generator=gen)
            elif p.dim() == 2:
                p.normal_(0.0, p.shape[1] ** -0.5, generator=gen)
            else:
                p.zero_()
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)


# ---- normalisation stats (pi05: QUANTILES with q01/q99) ---------------------------------------
@dataclass
class NormStats:
    """q01/q99 quantile normalisation (LeRobot NormalizationMode.QUANTILES, eps 1e-8 when equal)."""

    state_q01: np.ndarray
    state_q99: np.ndarray
    action_q01: np.ndarray
    action_q99: np.ndarray
    extra: dict[str, np.ndarray] | None = None  # other stats (mean/std/min/max/count/qNN) by key
    eps: float = 1e-8

    @staticmethod
    def _denom(lo: np.ndarray, hi: np.ndarray, eps: float) -> np.ndarray:
        d = (hi - lo).astype(np.float32)
        return np.where(d == 0, np.float32(eps), d)

    def normalize_state(self, state) -> np.ndarray:
        s = np.asarray(state, dtype=np.float32)
        return 2.0 * (s - self.state_q01) / self._denom(self.state_q01, self.state_q99, self.eps) - 1.0

    def unnormalize_actions(self, actions) -> np.ndarray:
        a = np.asarray(actions, dtype=np.float32)[..., : self.action_q01.shape[-1]]
        return (a + 1.0) * self._denom(self.action_q01, self.action_q99, self.eps) / 2.0 + self.action_q01

    @classmethod
    def from_flat(cls, pre: dict[str, np.ndarray], post: dict[str, np.ndarray]) -> "NormStats":
        need = [("observation.state.q01", pre), ("observation.state.q99", pre),
                ("action.q01", post), ("action.q99", post)]
        missing = [k for k, d in need if k not in d]
        if missing:
            raise ValueError(f"normalizer stats are missing {missing}")
        return cls(pre["observation.state.q01"].astype(np.float32),
                   pre["observation.state.q99"].astype(np.float32),
                   post["action.q01"].astype(np.float32), post["action.q99"].astype(np.float32),
                   extra={**pre, **post})

    def flat(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        pre = {k: v for k, v in (self.extra or {}).items()}
        pre.update({"observation.state.q01": self.state_q01, "observation.state.q99": self.state_q99,
                    "action.q01": self.action_q01, "action.q99": self.action_q99})
        post = {k: v for k, v in pre.items() if k.startswith("action.")}
        return ({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in pre.items()},
                {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in post.items()})


# ---- save ------------------------------------------------------------------------------------
def _features(config: ModelConfig, state_dim: int, action_dim: int) -> tuple[dict, dict]:
    img = [3, config.vision.image_size, config.vision.image_size]
    inputs = {f"observation.images.camera{i}": {"type": "VISUAL", "shape": img}
              for i in range(config.num_cameras)}
    inputs["observation.state"] = {"type": "STATE", "shape": [state_dim]}
    return inputs, {"action": {"type": "ACTION", "shape": [action_dim]}}


def save_lerobot_checkpoint(model: MoTModel, config: ModelConfig, folder: str | Path,
                            tokenizer=None, norm_stats: NormStats | None = None) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {to_lerobot_name(n): p.detach().to("cpu").contiguous()
               for n, p in model.state_dict().items()}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})

    is_pi05 = config.vlm.width == 2048 and config.action_experts[0].width == 1024
    state_dim = int(norm_stats.state_q01.shape[-1]) if norm_stats is not None else config.action_dim
    action_dim = int(norm_stats.action_q01.shape[-1]) if norm_stats is not None else config.action_dim
    inputs, outputs = _features(config, state_dim, action_dim)
    norm_map = {"VISUAL": "IDENTITY", "STATE": "QUANTILES", "ACTION": "QUANTILES"}
    cfg = {
        "type": "pi05",
        "paligemma_variant": "gemma_2b" if is_pi05 else "custom",
        "action_expert_variant": "gemma_300m" if is_pi05 else "custom",
        "dtype": str(model.dtype).replace("torch.", ""),
        "n_obs_steps": 1, "chunk_size": config.action_horizon, "n_action_steps": config.action_horizon,
        "max_state_dim": config.action_dim, "max_action_dim": config.action_dim,
        "num_inference_steps": 10, "min_period": 4e-3, "max_period": 4.0,
        "image_resolution": [config.vision.image_size, config.vision.image_size],
        "tokenizer_max_length": config.max_prompt_tokens,
        "normalization_mapping": norm_map, "input_features": inputs, "output_features": outputs,
        CONFIG_KEY: config.to_dict(),
    }
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))

    pre_steps = [
        {"registry_name": "rename_observations_processor", "config": {"rename_map": {}}},
        {"registry_name": "to_batch_processor", "config": {}},
        {"registry_name": "device_processor", "config": {"device": "cpu", "float_dtype": None}},
        {"registry_name": "normalizer_processor",
         "config": {"eps": 1e-8, "features": {**inputs, **outputs}, "norm_map": norm_map},
         "state_file": PRE_STATE},
        {"registry_name": "pi05_prepare_state_tokenizer_processor_step",
         "config": {"max_state_dim": config.action_dim}},
        {"registry_name": "tokenizer_processor",
         "config": {"max_length": config.max_prompt_tokens, "padding_side": "right",
                    "padding": "max_length", "truncation": True}},
    ]
    post_steps = [
        {"registry_name": "unnormalizer_processor",
         "config": {"eps": 1e-8, "features": outputs, "norm_map": norm_map}, "state_file": POST_STATE},
        {"registry_name": "device_processor", "config": {"device": "cpu", "float_dtype": None}},
    ]
    (folder / "policy_preprocessor.json").write_text(
        json.dumps({"name": "policy_preprocessor", "steps": pre_steps}, indent=2))
    (folder / "policy_postprocessor.json").write_text(
        json.dumps({"name": "policy_postprocessor", "steps": post_steps}, indent=2))
    if norm_stats is not None:
        pre, post = norm_stats.flat()
        np_save_file(pre, str(folder / PRE_STATE))
        np_save_file(post, str(folder / POST_STATE))
    if tokenizer is not None:
        if not hasattr(tokenizer, "save"):
            raise ValueError(f"tokenizer {type(tokenizer).__name__} cannot be saved as tokenizer.json")
        tokenizer.save(folder / "tokenizer.json")
    return folder


# ---- load ------------------------------------------------------------------------------------
def _config_from_json(cfg: dict) -> ModelConfig:
    if CONFIG_KEY in cfg:
        return model_config_from_dict(cfg[CONFIG_KEY])
    if cfg.get("type") != "pi05":
        raise ValueError(f"config.json type is {cfg.get('type')!r}, expected 'pi05'")
    over: dict = {}
    if "chunk_size" in cfg:
        over["action_horizon"] = int(cfg["chunk_size"])
    if "max_action_dim" in cfg:
        over["action_dim"] = int(cfg["max_action_dim"])
    if "tokenizer_max_length" in cfg:
        over["max_prompt_tokens"] = int(cfg["tokenizer_max_length"])
    cams = [k for k, f in cfg.get("input_features", {}).items()
            if isinstance(f, dict) and f.get("type") == "VISUAL"]
    if cams:
        over["num_cameras"] = len(cams) + int(cfg.get("empty_cameras", 0))
    return PRESETS["pi05"].replace(**over)


def _processor_state(folder: Path, json_name: str, step_name: str, default: str) -> Path:
    p = folder / json_name
    if p.is_file():
        for step in json.loads(p.read_text()).get("steps", []):
            if step.get("registry_name") == step_name and step.get("state_file"):
                return folder / step["state_file"]
    return folder / default


def load_checkpoint(folder: str | Path, device: str | torch.device = "cpu",
                    dtype: torch.dtype | str = torch.float32):
    """-> (model, config, tokenizer | None, NormStats | None). Strict: missing or unexpected
    weights raise a ValueError listing them (known-unused keys are ignored)."""
    from ..tokenizer import load_tokenizer

    folder = Path(folder)
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    cfg_file = folder / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{cfg_file} not found")
    config = _config_from_json(json.loads(cfg_file.read_text()))
    raw = load_file(str(folder / "model.safetensors"))
    ckpt: dict[str, torch.Tensor] = {}
    for key, t in raw.items():
        c = _canonical(key)
        if c is None:
            continue
        if c in ckpt:
            raise ValueError(f"checkpoint key {key} duplicates {c} (both vision naming forms?)")
        ckpt[c] = t
    lm_head = ckpt.pop(LM_HEAD, None)
    if EMBED not in ckpt and lm_head is not None:
        ckpt[EMBED] = lm_head  # tied: copy lm_head into embed_tokens when it is missing

    with torch.device("meta"):
        model = MoTModel(config)
    wanted = {to_lerobot_name(n): n for n in model.state_dict()}
    missing = sorted(set(wanted) - set(ckpt))
    unexpected = sorted(set(ckpt) - set(wanted))
    if missing or unexpected:
        raise ValueError(
            f"{folder / 'model.safetensors'} does not match {config.name!r}: "
            f"missing {len(missing)} keys {missing[:10]}{' ...' if len(missing) > 10 else ''}; "
            f"unexpected {len(unexpected)} keys {unexpected[:10]}{' ...' if len(unexpected) > 10 else ''}")
    state = {}
    shapes = model.state_dict()
    for lr_name, ours in wanted.items():
        t = ckpt.pop(lr_name)
        if tuple(t.shape) != tuple(shapes[ours].shape):
            raise ValueError(f"{lr_name}: shape {tuple(t.shape)} != expected {tuple(shapes[ours].shape)}")
        # a fresh (aligned) copy: kernels then see the same memory layout as after init_model, so
        # outputs do not depend on where the tensor sat in the safetensors file
        state[ours] = t.to(dtype=dtype, copy=True)
    model.load_state_dict(state, assign=True, strict=True)
    emb = model.vision.tower.embeddings  # its non-persistent buffer is still on "meta"
    emb.register_buffer("position_ids", torch.arange(emb.num_positions).expand((1, -1)),
                        persistent=False)
    still_meta = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if still_meta:
        raise RuntimeError(f"tensors left uninitialised after loading: {still_meta}")
    model = model.to(device=device).eval().requires_grad_(False)

    tokenizer = None
    if (folder / "tokenizer.json").is_file() or (folder / "tokenizer.model").is_file():
        tokenizer = load_tokenizer(folder)
    pre_file = _processor_state(folder, "policy_preprocessor.json", "normalizer_processor", PRE_STATE)
    post_file = _processor_state(folder, "policy_postprocessor.json", "unnormalizer_processor", POST_STATE)
    stats = None
    if pre_file.is_file() and post_file.is_file():
        stats = NormStats.from_flat(np_load_file(str(pre_file)), np_load_file(str(post_file)))
    return model, config, tokenizer, stats
