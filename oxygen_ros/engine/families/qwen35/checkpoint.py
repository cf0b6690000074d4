"""Qwen3.5 folders (family qwen35, docs/qwen35.md): transformers' Qwen3_5Config <-> ModelConfig,
a ``Qwen3_5ForConditionalGeneration.save_pretrained`` folder as the backbone, the action heads
in the Qwen3-VL family's own files beside it (qwen3vl_checkpoint: ``action_expert.safetensors``
+ ``action_expert.json``). A folder without them loads the backbone and a RANDOM head, with a
warning (the paper's Table 5 runner also ran a random PI_v3 head).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

from ..base import ParamCounts
from ...config.family_registry import family_of
from .config import HybridConfig
from ...config.model_config import ExpertConfig, ModelConfig, VisionConfig, model_config_from_dict
from ..qwen3vl.config import QwenVLConfig
from ...config.presets import PRESETS
from ...model.formats import CheckpointInfo
from ...model.chat_template import with_chat_template
from ..loader import Checkpoint, resolve_tokenizer
from .model import load_weights
from ..qwen3vl.checkpoint import (EXPERT_CONFIG, EXPERT_FILE, _head_params, count_backbone,
                                  describe_heads, expert_file_problems, inspect_folder,
                                  read_folder_config, rename_prefix, save_action_expert,
                                  save_hf_folder)
from .vla import Qwen35VLA
from ..starvla.heads import build_head, init_head

log = logging.getLogger(__name__)

MODEL_TYPE = "qwen3_5"
_ACTION_FIELDS = ("action_experts", "num_cameras", "max_prompt_tokens", "action_horizon",
                  "action_dim", "state_bins")
# transformers' key -> ours (None: not a weight we hold: the multi-token-prediction head mtp.*)
_KEY_PREFIXES = (("model.visual.", "backbone.visual."),
                 ("model.language_model.", "backbone.language_model."),
                 ("lm_head.", "backbone.lm_head."))


def backbone_key(hf: str) -> str | None:
    return rename_prefix(hf, _KEY_PREFIXES)


def hf_key(ours: str) -> str | None:
    return rename_prefix(ours, tuple((dst, src) for src, dst in _KEY_PREFIXES))


def is_qwen35_folder(path: str | Path) -> bool:
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        return False
    try:
        return json.loads(cfg.read_text()).get("model_type") == MODEL_TYPE
    except (OSError, ValueError):
        return False


def hf_config(mc: ModelConfig):
    """transformers' Qwen3_5Config of our backbone (tests build the reference from it)."""
    q, v, h = mc.qwen, mc.vision, mc.hybrid
    return Qwen3_5Config(
        text_config=dict(
            vocab_size=mc.vocab_size, hidden_size=mc.vlm.width, intermediate_size=mc.vlm.mlp_dim,
            num_hidden_layers=mc.depth, num_attention_heads=mc.num_heads,
            num_key_value_heads=mc.num_kv_heads, head_dim=mc.head_dim, rms_norm_eps=mc.rms_eps,
            hidden_act=q.hidden_act, attention_bias=h.attention_bias,
            layer_types=list(h.layer_types), linear_conv_kernel_dim=h.linear_conv_kernel_dim,
            linear_key_head_dim=h.linear_key_head_dim, linear_value_head_dim=h.linear_value_head_dim,
            linear_num_key_heads=h.linear_num_key_heads,
            linear_num_value_heads=h.linear_num_value_heads,
            rope_parameters=dict(rope_type="default", rope_theta=mc.rope_theta,
                                 partial_rotary_factor=h.partial_rotary_factor,
                                 mrope_section=list(q.mrope_section), mrope_interleaved=True)),
        vision_config=dict(
            depth=v.depth, hidden_size=v.width, intermediate_size=v.mlp_dim, num_heads=v.num_heads,
            hidden_act=q.vision_hidden_act, patch_size=v.patch_size,
            spatial_merge_size=q.spatial_merge_size, temporal_patch_size=q.temporal_patch_size,
            out_hidden_size=mc.vlm.width, num_position_embeddings=q.num_position_embeddings),
        image_token_id=q.image_token_id, vision_start_token_id=q.vision_start_token_id,
        vision_end_token_id=q.vision_end_token_id, tie_word_embeddings=q.tie_word_embeddings)


def _resolved(d: dict[str, Any]):
    try:
        return Qwen3_5Config.from_dict(copy.deepcopy(d))  # it may edit nested dicts
    except (TypeError, ValueError, KeyError) as err:
        raise ValueError(f"transformers cannot read this Qwen3.5 config: {err}") from None


def model_config_from_hf(d: dict[str, Any], base: ModelConfig | None = None,
                         action: dict[str, Any] | None = None) -> ModelConfig:
    """A ModelConfig from a Qwen3.5 config.json (dict), as transformers resolves it (its
    defaults: layer_types from full_attention_interval, the top-level tie flag, rope values);
    the action side and chat-template ids from ``action`` (our head JSON) or ``base`` (the
    qwen35-0.8b preset for Qwen's vocabulary, else qwen35-tiny)."""
    if d.get("model_type") != MODEL_TYPE:
        raise ValueError(f"not a Qwen3.5 config (model_type {d.get('model_type')!r})")
    hf = _resolved(d)
    t, vis = hf.text_config, hf.vision_config
    if base is None:
        base = PRESETS["qwen35-0.8b"] if t.vocab_size >= PRESETS["qwen35-0.8b"].vocab_size \
            else PRESETS["qwen35-tiny"]
    rope = t.rope_parameters
    cell = vis.patch_size * vis.spatial_merge_size
    qwen = dataclasses.replace(
        base.qwen or QwenVLConfig(), temporal_patch_size=vis.temporal_patch_size,
        spatial_merge_size=vis.spatial_merge_size,
        num_position_embeddings=vis.num_position_embeddings, deepstack_visual_indexes=(),
        mrope_section=tuple(rope.get("mrope_section", (11, 11, 10))),
        image_token_id=hf.image_token_id, vision_start_token_id=hf.vision_start_token_id,
        vision_end_token_id=hf.vision_end_token_id, tie_word_embeddings=bool(hf.tie_word_embeddings),
        hidden_act=t.hidden_act, vision_hidden_act=vis.hidden_act)
    hybrid = HybridConfig(
        layer_types=tuple(t.layer_types), linear_num_key_heads=t.linear_num_key_heads,
        linear_num_value_heads=t.linear_num_value_heads, linear_key_head_dim=t.linear_key_head_dim,
        linear_value_head_dim=t.linear_value_head_dim,
        linear_conv_kernel_dim=t.linear_conv_kernel_dim,
        partial_rotary_factor=float(rope.get("partial_rotary_factor", 1.0)),
        attention_bias=bool(t.attention_bias))
    fields: dict[str, Any] = dict(
        name="qwen35", family=base.family, vocab_size=t.vocab_size, depth=t.num_hidden_layers,
        num_heads=t.num_attention_heads, num_kv_heads=t.num_key_value_heads, head_dim=t.head_dim,
        vlm=ExpertConfig(t.hidden_size, t.intermediate_size),
        vision=VisionConfig(image_size=max(cell, base.vision.image_size // cell * cell),
                            patch_size=vis.patch_size, width=vis.hidden_size, depth=vis.depth,
                            num_heads=vis.num_heads, mlp_dim=vis.intermediate_size),
        rope_theta=float(rope["rope_theta"]), rms_eps=t.rms_norm_eps, qwen=qwen, hybrid=hybrid)
    for name in _ACTION_FIELDS:
        fields[name] = getattr(base, name)
    fields["action_experts"] = tuple(
        dataclasses.replace(e, num_layers=min(e.num_layers, t.num_hidden_layers))
        for e in base.action_experts)
    for tok in ("eos_token_id", "pad_token_id", "bos_token_id"):
        value = getattr(base, tok)
        fields[tok] = value if value < t.vocab_size else 0
    merged = {**dataclasses.asdict(base), **fields}
    action = dict(action or {})
    qwen = dataclasses.replace(qwen, **{k: tuple(v) if isinstance(v, list) else v
                                        for k, v in action.pop("qwen", {}).items()})
    vision = dataclasses.replace(fields["vision"], **action.pop("vision", {}))
    merged.update(action)
    merged["vlm"], merged["vision"], merged["qwen"], merged["hybrid"] = \
        fields["vlm"], vision, qwen, hybrid
    return model_config_from_dict(merged)


def folder_config(folder: str | Path) -> ModelConfig:
    """config.json's backbone + our head JSON's rest; ValueError (with the file) otherwise."""
    return read_folder_config(folder, model_config_from_hf)


def build(mc: ModelConfig):
    return Qwen35VLA(mc, hf_config(mc))


def init_qwen35(mc: ModelConfig, seed: int = 0, device: str | torch.device = "cpu",
                dtype: torch.dtype = torch.float32):
    """Deterministic random weights (same seed -> same weights on any device): matrices
    ~ N(0, 1/fan_in), embeddings ~ N(0, 1/W), biases 0, every norm's effective gain
    1 + N(0, 0.1) (the zero-centred norms store the offset), the final norm's ~ N(0, 1)
    (random signs, so the logits do not echo the input token), decays A = exp(A_log) in
    U(1, 8), dt_bias 1, the ViT's position table ~ N(0, 0.5); heads by starvla_heads.init_head."""
    with torch.device(device):
        model = build(mc)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for i, head in enumerate(model.experts):
            init_head(head, seed=seed * 1_000_003 + i + 1)
        for name, p in model.named_parameters():
            if name.startswith("experts."):
                continue
            value = torch.empty(p.shape, dtype=torch.float32)
            zero_centred = name.endswith("layernorm.weight") or name.endswith("_norm.weight") \
                or name == "backbone.language_model.norm.weight"
            if name == "backbone.language_model.norm.weight":
                value.normal_(-1.0, 1.0, generator=gen)
            elif zero_centred:
                value.normal_(0.0, 0.1, generator=gen)
            elif name.endswith("A_log"):
                value.uniform_(1.0, 8.0, generator=gen).log_()
            elif name.endswith("dt_bias"):
                value.fill_(1.0)
            elif "pos_embed" in name:
                value.normal_(0.0, 0.5, generator=gen)
            elif "embed_tokens" in name or name.endswith("lm_head.weight"):
                value.normal_(0.0, p.shape[1] ** -0.5, generator=gen)
            elif p.dim() == 1 and "norm" in name and name.endswith("weight"):
                value.normal_(1.0, 0.1, generator=gen)
            elif p.dim() >= 2:
                value.normal_(0.0, p[0].numel() ** -0.5, generator=gen)
            else:
                value.zero_()
            p.copy_(value)
    return model.to(dtype).eval().requires_grad_(False)


def _shapes(mc: ModelConfig) -> dict[str, tuple[int, ...]]:
    with torch.device("meta"):
        return {k: tuple(v.shape) for k, v in build(mc).state_dict().items()}


def load_qwen35(folder: str | Path, dtype: torch.dtype = torch.float32):
    """(ModelConfig, Qwen35VLA) from a save_pretrained folder (+ our head files, checked from
    their header first). ValueError with the missing / unexpected / mis-shaped tensors."""
    folder = Path(folder)
    mc = folder_config(folder)
    expert_file = folder / EXPERT_FILE
    want = {k: s for k, s in _shapes(mc).items() if k.startswith("experts.")}
    if expert_file.is_file():
        problems = expert_file_problems(expert_file, want)
        if problems:
            raise ValueError(f"{folder}: {EXPERT_FILE} does not fit {EXPERT_CONFIG}: "
                             f"{'; '.join(problems[:6])}")
    model = build(mc)
    tied = model.backbone.lm_head is None
    files = sorted(folder.glob("model*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder}: no model*.safetensors")
    ours: dict[str, torch.Tensor] = {}
    for f in files:
        for key, value in load_file(str(f)).items():
            mapped = backbone_key(key)
            if mapped is not None and not (tied and mapped == "backbone.lm_head.weight"):
                ours[mapped] = value
    if expert_file.is_file():
        ours.update(load_file(str(expert_file)))
    else:
        log.warning("%s: no %s: the action head is RANDOM (benchmarks only)", folder, EXPERT_FILE)

        for i, e in enumerate(mc.action_experts):  # init_qwen35's heads, seed 0
            head = init_head(build_head(e, mc.vlm.width), seed=i + 1)
            ours.update({f"experts.{i}.{k}": v for k, v in head.state_dict().items()})
    load_weights(model, ours, folder)
    return mc, model.to(dtype).eval().requires_grad_(False)


def save_qwen35_folder(model: torch.nn.Module, folder: str | Path) -> None:
    """The backbone as transformers' Qwen3_5ForConditionalGeneration.save_pretrained, the heads
    by save_action_expert: load_qwen35 gives the same config and weights back."""
    save_hf_folder(model, folder, Qwen3_5ForConditionalGeneration(hf_config(model.config)), hf_key)


def qwen35_info(folder: str | Path, mc: ModelConfig) -> CheckpointInfo:
    size = mc.vision.image_size
    cameras = tuple(f"camera{i}" for i in range(mc.num_cameras))
    return CheckpointInfo(Path(folder), "qwen35", cameras, None, None, 0, (size, size), ())


def open_qwen35_folder(folder: str | Path, device: str | torch.device = "cpu",
                       dtype: torch.dtype | str = torch.float32, tokenizer=None) -> Checkpoint:
    """open_checkpoint for a Qwen3.5 folder: config, tokenizer (given, or next to the folder),
    then the weights."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    folder = Path(folder)
    mc = folder_config(folder)
    info = qwen35_info(folder, mc)
    tok, source = resolve_tokenizer(folder, mc, info, tokenizer)
    mc = with_chat_template(mc, tok)  # the prompt's head and tail as the template renders them
    _, model = load_qwen35(folder, dtype)
    model.config = mc  # those ids only place tokens: the weights are the same
    return Checkpoint(model.to(device), mc, tok, source, None, info)


def inspect_qwen35(folder: str | Path, tokenizer: str | None = None) -> dict[str, Any]:
    """oxygen-inspect's view from headers alone (qwen3vl_checkpoint.inspect_folder)."""
    return inspect_folder(folder, "qwen35", folder_config, qwen35_info, _shapes, backbone_key, tokenizer)


def count_qwen35_params(mc: ModelConfig, expert: int = 1) -> ParamCounts:
    """The floor's parameter groups (bench/floor.py), counted on the meta-device model: the
    tower, the decoder's layers and final norm, the (tied) LM head, each head by how often a
    frame reads it."""
    with torch.device("meta"):
        model = build(mc)
    tied = mc.qwen.tie_word_embeddings
    groups = dict(vision=0, vlm_layers=0, lm_head=0, action_step=0, adarms_once=0, unread=0)
    for name, p in model.named_parameters():
        if not count_backbone(name, p.numel(), groups, "backbone.", tied) and name.startswith("backbone."):
            raise ValueError(f"{name}: a backbone parameter the floor does not know")
    names = family_of(mc).head_names(mc)
    heads = tuple(_head_params(name, e, model.experts[i])
                  for i, (name, e) in enumerate(zip(names, mc.action_experts)))
    return ParamCounts(**groups, heads=heads)
