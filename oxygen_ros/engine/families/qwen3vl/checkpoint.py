"""Qwen3-VL folders: transformers' config <-> ModelConfig, a ``save_pretrained`` folder as the
backbone, and the action experts' own files (``action_expert.safetensors`` and
``action_expert.json``): the Xiaomi-Robotics-0 DiT or StarVLA's heads (docs/checkpoints.md,
"StarVLA checkpoints").

No Xiaomi-Robotics-0 or StarVLA checkpoint is reachable here, so the experts' files are written by
``save_action_expert`` (our layout). The JSON holds every ModelConfig field config.json does not
(the heads' kinds and configs, the prompt's action queries, the chat template's ids, ...), so a
folder loads as the model that wrote it; a head file that does not fit it is refused, tensor by
tensor, from its header. A folder without the experts' files loads the backbone and a random
expert, with a warning (what benchmarks need).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration
from safetensors import safe_open

from ...config.model_config import ExpertConfig, ModelConfig, VisionConfig, model_config_from_dict
from .config import QwenVLConfig
from ...config.presets import PRESETS
from ..base import HeadParams, ParamCounts
from ...config.family_registry import family_of
from ...model.formats import CheckpointInfo
from ..loader import Checkpoint, resolve_tokenizer
from ...model.chat_template import describe_chat_template, with_chat_template
from ...model.tokenizer import describe_vocab
from .model import Qwen3VLModel
from ..starvla.heads import init_head

log = logging.getLogger(__name__)

EXPERT_FILE = "action_expert.safetensors"
EXPERT_CONFIG = "action_expert.json"
# ModelConfig fields a Qwen3-VL config.json does not hold: the action side's shape, the name,
# the special tokens; of `qwen`, the chat template's ids, the DiT's state tokens and the prompt's
# action queries (OFT); of `vision`, the image side (a processor setting in transformers)
_ACTION_FIELDS = ("action_experts", "num_cameras", "max_prompt_tokens", "action_horizon",
                  "action_dim", "state_bins")
_SPEC_FIELDS = ("name", "family", *_ACTION_FIELDS, "eos_token_id", "pad_token_id", "bos_token_id")
_SPEC_QWEN = ("head_ids", "tail_ids", "state_tokens", "action_query_ids")
_SPEC_VISION = ("image_size",)


def is_qwen3vl_folder(path: str | Path) -> bool:
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        return False
    try:
        return json.loads(cfg.read_text()).get("model_type") == "qwen3_vl"
    except (OSError, ValueError):
        return False


def hf_config(mc: ModelConfig):
    """transformers' Qwen3VLConfig of our backbone (tests build the reference from it)."""
    q, v = mc.qwen, mc.vision
    return Qwen3VLConfig(
        text_config=dict(
            vocab_size=mc.vocab_size, hidden_size=mc.vlm.width, intermediate_size=mc.vlm.mlp_dim,
            num_hidden_layers=mc.depth, num_attention_heads=mc.num_heads,
            num_key_value_heads=mc.num_kv_heads, head_dim=mc.head_dim, rms_norm_eps=mc.rms_eps,
            tie_word_embeddings=q.tie_word_embeddings, hidden_act=q.hidden_act,
            rope_parameters=dict(rope_type="default", rope_theta=mc.rope_theta,
                                 mrope_section=list(q.mrope_section), mrope_interleaved=True)),
        vision_config=dict(
            depth=v.depth, hidden_size=v.width, intermediate_size=v.mlp_dim, num_heads=v.num_heads,
            hidden_act=q.vision_hidden_act, patch_size=v.patch_size,
            spatial_merge_size=q.spatial_merge_size, temporal_patch_size=q.temporal_patch_size,
            out_hidden_size=mc.vlm.width,
            num_position_embeddings=q.num_position_embeddings,
            deepstack_visual_indexes=list(q.deepstack_visual_indexes)),
        image_token_id=q.image_token_id, vision_start_token_id=q.vision_start_token_id,
        vision_end_token_id=q.vision_end_token_id, tie_word_embeddings=q.tie_word_embeddings)


def model_config_from_hf(d: dict[str, Any], base: ModelConfig | None = None,
                         action: dict[str, Any] | None = None) -> ModelConfig:
    """A ModelConfig from a Qwen3-VL config.json (dict); the action side from ``action`` (our
    expert JSON) or ``base`` (default: the xr0 preset)."""
    if d.get("model_type") != "qwen3_vl":
        raise ValueError(f"not a Qwen3-VL config (model_type {d.get('model_type')!r})")
    t, vis = d.get("text_config", {}), d.get("vision_config", {})
    if base is None:  # Qwen's own chat-template ids, or xr0-tiny's for a small random vocab
        base = PRESETS["xr0"] if t.get("vocab_size", 0) >= PRESETS["xr0"].vocab_size \
            else PRESETS["xr0-tiny"]
    # tie_word_embeddings, the rotary parameters and the activations as transformers resolves
    # them from this file (its defaults, not ours): only the top-level tie flag counts (default
    # False), a missing rope_theta is Qwen3VLTextConfig.default_theta
    hf = _resolved_hf_config(d)
    rope = hf.text_config.rope_parameters
    heads = t["num_attention_heads"]
    tie = bool(hf.tie_word_embeddings)
    image_size = base.vision.image_size
    cell = vis.get("patch_size", 16) * vis.get("spatial_merge_size", 2)
    image_size = max(cell, image_size // cell * cell)
    qwen = dataclasses.replace(
        base.qwen or QwenVLConfig(),
        temporal_patch_size=vis.get("temporal_patch_size", 2),
        spatial_merge_size=vis.get("spatial_merge_size", 2),
        num_position_embeddings=vis.get("num_position_embeddings", 2304),
        deepstack_visual_indexes=tuple(vis.get("deepstack_visual_indexes", (8, 16, 24))),
        mrope_section=tuple(rope.get("mrope_section", (24, 20, 20))),
        image_token_id=d.get("image_token_id", 151655),
        vision_start_token_id=d.get("vision_start_token_id", 151652),
        vision_end_token_id=d.get("vision_end_token_id", 151653),
        tie_word_embeddings=tie, hidden_act=hf.text_config.hidden_act,
        vision_hidden_act=hf.vision_config.hidden_act)
    fields = dict(
        name="qwen3vl", family=base.family, vocab_size=t["vocab_size"],
        depth=t["num_hidden_layers"], num_heads=heads,
        num_kv_heads=t.get("num_key_value_heads", heads),
        head_dim=t.get("head_dim") or t["hidden_size"] // heads,
        vlm=ExpertConfig(t["hidden_size"], t["intermediate_size"]),
        vision=VisionConfig(image_size=image_size, patch_size=vis.get("patch_size", 16),
                            width=vis["hidden_size"], depth=vis["depth"],
                            num_heads=vis["num_heads"], mlp_dim=vis["intermediate_size"]),
        rope_theta=float(rope["rope_theta"]),
        rms_eps=t.get("rms_norm_eps", 1e-6), qwen=qwen)
    for name in _ACTION_FIELDS:
        fields[name] = getattr(base, name)
    depth = t["num_hidden_layers"]  # an expert on the last L layers of a shallower backbone
    fields["action_experts"] = tuple(dataclasses.replace(e, num_layers=min(e.num_layers, depth))
                                     for e in base.action_experts)
    for tok in ("eos_token_id", "pad_token_id", "bos_token_id"):
        value = getattr(base, tok)
        fields[tok] = value if value < t["vocab_size"] else 0
    merged = {**dataclasses.asdict(base), **fields}
    action = dict(action or {})
    if "state_tokens" in action:  # the first expert JSON kept it at the top
        action.setdefault("qwen", {})["state_tokens"] = action.pop("state_tokens")
    qwen = dataclasses.replace(qwen, **{k: tuple(v) if isinstance(v, list) else v
                                        for k, v in action.pop("qwen", {}).items()})
    vision = dataclasses.replace(fields["vision"], **action.pop("vision", {}))
    merged.update(action)
    merged["vlm"], merged["vision"], merged["qwen"] = fields["vlm"], vision, qwen
    return model_config_from_dict(merged)


def _resolved_hf_config(d: dict[str, Any]):
    """transformers' Qwen3VLConfig of a config.json dict (its defaults filled in, its rotary
    parameters standardised); ValueError when transformers cannot read it."""
    try:
        return Qwen3VLConfig.from_dict(copy.deepcopy(d))  # it may edit nested dicts
    except (TypeError, ValueError, KeyError) as err:
        raise ValueError(f"transformers cannot read this Qwen3-VL config: {err}") from None


def folder_config(folder: str | Path, base: ModelConfig | None = None) -> ModelConfig:
    """The ModelConfig of a Qwen3-VL folder: config.json's backbone, our expert JSON's rest
    (without one: ``base``'s action side). ValueError (with the file) when they do not fit."""
    return read_folder_config(folder, model_config_from_hf, base)


def read_folder_config(folder: str | Path,
                       from_hf: Callable[[dict[str, Any], ModelConfig | None, dict | None], ModelConfig],
                       base: ModelConfig | None = None) -> ModelConfig:
    """config.json + our expert JSON (when there) through ``from_hf`` (a family's
    model_config_from_hf); ValueError naming the file when either cannot be read or they do
    not make a model config."""
    folder = Path(folder)
    d = json.loads((folder / "config.json").read_text())
    spec = None
    if (folder / EXPERT_CONFIG).is_file():
        try:
            spec = json.loads((folder / EXPERT_CONFIG).read_text())
        except ValueError as err:
            raise ValueError(f"{folder / EXPERT_CONFIG}: not JSON ({err})") from None
        if not isinstance(spec, dict):
            raise ValueError(f"{folder / EXPERT_CONFIG}: a JSON object expected")
    try:
        return from_hf(d, base, spec)
    except (TypeError, KeyError) as err:  # an unknown or missing field of a nested config
        raise ValueError(f"{folder}: config.json / {EXPERT_CONFIG} do not make a model "
                         f"config: {err}") from None


_KEY_PREFIXES = (("model.visual.", "visual."), ("model.language_model.", "language_model."),
                 ("lm_head.", "lm_head."))


def rename_prefix(key: str, pairs: tuple[tuple[str, str], ...]) -> str | None:
    """``key`` with the first matching prefix ``src`` of ``pairs`` replaced by its ``dst``
    (None: no prefix matches)."""
    for src, dst in pairs:
        if key.startswith(src):
            return dst + key[len(src):]
    return None


def backbone_key(hf_key: str) -> str | None:
    """transformers' Qwen3VLForConditionalGeneration key -> ours (None: not a weight we hold)."""
    return rename_prefix(hf_key, _KEY_PREFIXES)


def hf_key(our_key: str) -> str | None:
    """Our backbone key -> transformers' (None: an action expert's, in our own file)."""
    return rename_prefix(our_key, tuple((dst, src) for src, dst in _KEY_PREFIXES))


def expert_shapes(mc: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every action-expert tensor ``mc`` builds (key -> shape), from a meta-device model."""
    with torch.device("meta"):
        sd = Qwen3VLModel(mc).state_dict()
    return {k: tuple(v.shape) for k, v in sd.items() if k.startswith("experts.")}


def expert_file_problems(path: str | Path, want: dict[str, tuple[int, ...]]) -> list[str]:
    """Why the experts' file at ``path`` does not hold the tensors ``want`` (expert_shapes of
    its config), from its header alone: each missing, unexpected or mis-shaped tensor ([] when
    it fits)."""
    with safe_open(str(path), "pt") as sf:
        got = {k: tuple(sf.get_slice(k).get_shape()) for k in sf.keys()}
    problems = [f"{k}: shape {got[k]} in the file, {want[k]} for its config"
                for k in want if k in got and got[k] != want[k]]
    for what, keys in (("missing", [k for k in want if k not in got]),
                       ("unexpected (not in the config's heads)",
                        [k for k in got if k not in want])):
        by_expert: dict[str, list[str]] = {}
        for k in keys:  # one line per expert: "experts.2.*"
            by_expert.setdefault(".".join(k.split(".")[:2]), []).append(k)
        problems += [f"{what} {len(ks)} tensor(s) of {prefix}.* (e.g. {ks[0]})"
                     for prefix, ks in by_expert.items()]
    return problems


def _refusal(folder: Path, problems: list[str]) -> str:
    more = f" (+ {len(problems) - 6} more)" if len(problems) > 6 else ""
    return (f"{folder}: {EXPERT_FILE} does not fit {EXPERT_CONFIG} (the heads' kinds and "
            f"shapes): {'; '.join(problems[:6])}{more}")


def _read_tensors(folder: Path) -> dict[str, torch.Tensor]:
    files = sorted(folder.glob("model*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder}: no model*.safetensors (a Qwen3-VL save_pretrained "
                                f"folder holds model.safetensors or model-0000N-of-M.safetensors)")
    out: dict[str, torch.Tensor] = {}
    for f in files:
        out.update(load_file(str(f)))
    return out


def save_action_expert(model: torch.nn.Module, folder: str | Path) -> None:
    """Write the action experts' weights (``experts.*``) and every ModelConfig field config.json
    does not hold (the heads, the prompt's action queries, ...) beside a backbone folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()
               if k.startswith("experts.")}
    save_file(tensors, str(folder / EXPERT_FILE))
    mc = model.config
    spec = {name: getattr(mc, name) for name in _SPEC_FIELDS}
    spec["action_experts"] = [dataclasses.asdict(e) for e in mc.action_experts]
    spec["qwen"] = {name: getattr(mc.qwen, name) for name in _SPEC_QWEN}
    spec["vision"] = {name: getattr(mc.vision, name) for name in _SPEC_VISION}
    (folder / EXPERT_CONFIG).write_text(json.dumps(spec, indent=1))


def save_qwen3vl_folder(model: torch.nn.Module, folder: str | Path) -> None:
    """The whole model as a folder: the backbone as transformers' Qwen3VLForConditionalGeneration
    ``save_pretrained`` (config.json + model.safetensors), the action experts by
    save_action_expert. load_qwen3vl_folder gives the same config and weights back."""
    save_hf_folder(model, folder, Qwen3VLForConditionalGeneration(hf_config(model.config)), hf_key)


def save_hf_folder(model: torch.nn.Module, folder: str | Path, hf: torch.nn.Module,
                   to_hf: Callable[[str], str | None]) -> None:
    """``model``'s backbone through the transformers model ``hf`` (built from its config;
    ``to_hf``: our key -> its key, None for a head's) as ``save_pretrained``, and the action
    heads by save_action_expert. ValueError when our weights do not fill ``hf`` exactly (a tied
    LM head aside)."""
    mc = model.config
    sd = {to_hf(k): v.detach().to(torch.float32).cpu() for k, v in model.state_dict().items()
          if to_hf(k) is not None}
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    tied = {"lm_head.weight"} if mc.qwen.tie_word_embeddings else set()
    if unexpected or set(missing) - tied:
        raise ValueError(f"our backbone does not map onto transformers' {type(hf).__name__}: missing "
                         f"{sorted(set(missing) - tied)[:5]}, unexpected {sorted(unexpected)[:5]}")
    hf.save_pretrained(folder)
    save_action_expert(model, folder)


def load_qwen3vl_folder(folder: str | Path, base: ModelConfig | None = None,
                        dtype: torch.dtype = torch.float32):
    """(ModelConfig, Qwen3VLModel) from a save_pretrained folder (+ our experts' files; ``base``
    gives the action side only for a folder without our JSON). The experts' file is checked
    against the config from its header before any weight is read: ValueError with each
    missing, unexpected or mis-shaped tensor."""
    folder = Path(folder)
    mc = folder_config(folder, base)
    expert_file = folder / EXPERT_FILE
    if expert_file.is_file():
        problems = expert_file_problems(expert_file, expert_shapes(mc))
        if problems:
            raise ValueError(_refusal(folder, problems))
    model = Qwen3VLModel(mc)
    ours = {}
    for key, value in _read_tensors(folder).items():
        mapped = backbone_key(key)
        if mapped is not None and not (mapped.startswith("lm_head.") and model.lm_head is None):
            ours[mapped] = value
    if expert_file.is_file():
        ours.update(load_file(str(expert_file)))
    else:
        log.warning("%s: no %s: the action expert is RANDOM (benchmarks only; write one with "
                    "save_action_expert)", folder, EXPERT_FILE)
        ours.update({k: v for k, v in model.state_dict().items() if k.startswith("experts.")})
    try:
        missing, unexpected = model.load_state_dict(ours, strict=False)
    except RuntimeError as err:  # a mis-shaped backbone tensor
        raise ValueError(f"{folder}: weights do not match the Qwen3-VL backbone: {err}") from None
    if missing or unexpected:
        raise ValueError(f"{folder}: weights do not match the Qwen3-VL backbone: missing "
                         f"{sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}")
    return mc, model.to(dtype).eval()


def qwen3vl_info(folder: str | Path, mc: ModelConfig):
    """The CheckpointInfo of a Qwen3-VL folder: no statistics, no named cameras or joints (the
    random presets' camera0.. keys; the robot's joint limits normalise), every chunk step run."""
    size = mc.vision.image_size
    cameras = tuple(f"camera{i}" for i in range(mc.num_cameras))
    return CheckpointInfo(Path(folder), "qwen3vl", cameras, None, None, 0, (size, size), ())


def open_qwen3vl_folder(folder: str | Path, device: str | torch.device = "cpu",
                        dtype: torch.dtype | str = torch.float32, tokenizer=None):
    """open_checkpoint for a Qwen3-VL folder (the node's model.checkpoint, oxygen-demo's
    --checkpoint): its config and experts' files checked, then its tokenizer (given, or
    tokenizer.json / tokenizer.model next to it: never a made-up vocabulary), then the weights."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    folder = Path(folder)
    mc = folder_config(folder)
    info = qwen3vl_info(folder, mc)
    tok, source = resolve_tokenizer(folder, mc, info, tokenizer)
    mc = with_chat_template(mc, tok)  # the prompt's head and tail as the template renders them
    _, model = load_qwen3vl_folder(folder, dtype=dtype)
    model.config = mc  # those ids only place tokens: the weights are the same
    return Checkpoint(model.to(device).requires_grad_(False), mc, tok, source, None, info)


def init_qwen3vl(config: ModelConfig, seed: int = 0, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32):
    """Deterministic random Qwen3-VL + DiT (same seed -> same weights on any device), by
    init_model's rules: linear weights ~ N(0, 1/fan_in), biases 0, embeddings ~ N(0, 1/W),
    norm gains 1 + N(0, 0.1), the final LM norm's gains ~ N(0, 1) (random signs, so the tied
    head does not echo its input token), the ViT's position table ~ N(0, 0.5); a StarVLA head
    by starvla_heads.init_head's rules (its own seed per expert)."""

    with torch.device(device):
        model = Qwen3VLModel(config)
    heads = [i for i, e in enumerate(config.action_experts) if e.kind != "kv-layerwise"]
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for i in heads:
            init_head(model.experts[i], seed=seed * 1_000_003 + i + 1)
        for name, p in model.named_parameters():
            if any(name.startswith(f"experts.{i}.") for i in heads):
                continue
            value = torch.empty(p.shape, dtype=torch.float32)
            if name == "language_model.norm.weight":
                value.normal_(0.0, 1.0, generator=gen)
            elif "pos_embed" in name:
                value.normal_(0.0, 0.5, generator=gen)
            elif "embed_tokens" in name or name == "lm_head.weight":
                value.normal_(0.0, p.shape[1] ** -0.5, generator=gen)
            elif p.dim() == 1 and "norm" in name and name.endswith("weight"):
                value.normal_(1.0, 0.1, generator=gen)
            elif p.dim() >= 2:
                value.normal_(0.0, p[0].numel() ** -0.5, generator=gen)
            else:
                value.zero_()
            p.copy_(value)
    return model.to(dtype).eval().requires_grad_(False)


def describe_heads(mc: ModelConfig) -> list[str]:
    """One line per action expert: its chunk's name (FrameOutput.chunks), kind and shape."""
    head_names = family_of(mc).head_names
    names = head_names(mc) if len(head_names(mc)) == len(mc.action_experts) else \
        tuple(f"expert {i + 1}" for i in range(len(mc.action_experts)))
    lines = []
    for name, e in zip(names, mc.action_experts):
        if e.kind == "kv-layerwise":
            lines.append(f"{name}: kv-layerwise, {e.num_layers or mc.depth} layers {e.width} "
                         f"wide, chunk {mc.action_horizon} x {mc.action_dim}")
        elif e.kind == "hidden-crossattn":
            lines.append(f"{name}: hidden-crossattn ({e.head.source}), {e.num_layers} blocks "
                         f"{e.width} wide, chunk {e.head.horizon} x {e.head.action_dim}")
        else:
            lines.append(f"{name}: regress, {e.head.horizon} action queries "
                         f"(token {e.head.query_token_id}), chunk {e.head.horizon} x "
                         f"{e.head.action_dim}")
    return lines


def inspect_qwen3vl(folder: str | Path, tokenizer: str | None = None) -> dict[str, Any]:
    """oxygen-inspect's view of a Qwen3-VL folder from the safetensors headers alone."""
    def shapes(mc: ModelConfig) -> dict[str, tuple[int, ...]]:
        with torch.device("meta"):
            return {k: tuple(v.shape) for k, v in Qwen3VLModel(mc).state_dict().items()}

    return inspect_folder(folder, "qwen3vl", folder_config, qwen3vl_info, shapes, backbone_key, tokenizer)


def inspect_folder(folder: str | Path, fmt: str, config_of: Callable[[Path], ModelConfig],
                   info_of: Callable[[Path, ModelConfig], CheckpointInfo],
                   shapes_of: Callable[[ModelConfig], dict[str, tuple[int, ...]]],
                   key_of: Callable[[str], str | None], tokenizer: str | None = None) -> dict[str, Any]:
    """oxygen-inspect's view of a transformers folder plus our head files (Qwen3-VL, Qwen3.5),
    from the safetensors headers alone: the ModelConfig it maps to (with our expert JSON), its
    heads, the tokenizer found (``tokenizer`` given, or next to the folder), whether every
    backbone tensor (``key_of``: the file's key -> ours) and every head tensor has our key and
    shape (``shapes_of``: our model's state dict shapes, heads under ``experts.``)."""
    folder = Path(folder)
    out: dict[str, Any] = {"format": fmt, "problems": []}
    try:
        mc = config_of(folder)
    except (ValueError, KeyError, OSError) as err:
        out["problems"].append(f"config.json / {EXPERT_CONFIG}: {err}")
        return out
    out["config"] = mc
    out["heads"] = describe_heads(mc)
    try:
        tok, source = resolve_tokenizer(folder, mc, info_of(folder, mc), tokenizer)
        out["tokenizer"] = f"{source} ({describe_vocab(tok, mc.vocab_size)})"
    except (ValueError, OSError) as err:
        out["tokenizer"] = "NOT FOUND"
        out["problems"].append(str(err))
    else:
        try:
            out["chat_template"] = describe_chat_template(mc, tok)
        except ValueError as err:
            out["chat_template"] = "does not fit"
            out["problems"].append(f"chat template: {err}")
    shapes = shapes_of(mc)
    files = sorted(folder.glob("model*.safetensors"))
    if not files:
        out["problems"].append("no model*.safetensors")
    seen, bad = set(), []
    for f in files:
        with safe_open(str(f), "pt") as sf:
            for key in sf.keys():
                ours = key_of(key)
                if ours is None or ours not in shapes:
                    continue
                seen.add(ours)
                got = tuple(sf.get_slice(key).get_shape())
                if got != shapes[ours]:
                    bad.append(f"{key}: {got} != {shapes[ours]}")
    missing = [k for k in shapes if not k.startswith("experts.") and k not in seen]
    out["weights"] = (f"{len(seen)} backbone tensors match" if not (bad or missing)
                      else f"{len(bad)} wrong shapes, {len(missing)} missing")
    out["problems"] += bad[:5] + [f"missing {k}" for k in missing[:5]]
    expert_file = folder / EXPERT_FILE
    if not expert_file.is_file():
        out["action_expert"] = f"none ({EXPERT_FILE} absent: RANDOM action heads when loaded)"
        return out
    want = {k: s for k, s in shapes.items() if k.startswith("experts.")}
    try:
        problems = expert_file_problems(expert_file, want)
    except Exception as err:  # a damaged header: safetensors raises its own error types
        problems = [f"{EXPERT_FILE}: {err}"]
    if not (folder / EXPERT_CONFIG).is_file():
        problems.insert(0, f"{EXPERT_CONFIG} absent: the heads' kinds and shapes are unknown")
    out["action_expert"] = (f"{EXPERT_FILE}: {len(want)} tensors match "
                            f"{EXPERT_CONFIG}" if not problems else
                            f"{EXPERT_FILE}: {len(problems)} problem(s)")
    out["problems"] += [f"{EXPERT_FILE}: {p}" for p in problems[:10]]
    return out


def _crossattn_group(head: torch.nn.Module, name: str) -> str:
    """per_frame / per_step for a CrossAttnHead parameter (positions apart). Once a frame: the
    projections and the cross blocks' K/V (crossattn_memory), and what depends only on t or the
    state (timestep MLP, every block's adaLN, the output adaLN, the state encoder: all S
    timesteps at once, as adarms_once for pi0.5); every step: the rest."""
    top, _, rest = name.partition(".")
    if top in ("projections", "time_in", "time_out", "out_ada", "state_in", "state_out"):
        return "per_frame"
    if top == "blocks":
        block, _, leaf = rest.partition(".")
        if leaf.startswith("ada.") or (int(block) in head.cross_blocks
                                       and leaf.startswith(("to_k.", "to_v."))):
            return "per_frame"
    return "per_step"


def _head_params(name: str, expert: ExpertConfig, head: torch.nn.Module) -> HeadParams:
    """One head's parameters: OFT's all once a frame; a DiT's by _crossattn_group."""
    groups = dict(per_frame=0, per_step=0, unread=0)
    for pname, p in head.named_parameters():
        n = p.numel()
        if expert.kind == "regress":
            groups["per_frame"] += n
        elif pname == "positions":  # the chunk's rows only
            used = expert.head.horizon * p.shape[1]
            groups["per_step"] += used
            groups["unread"] += n - used
        else:
            groups[_crossattn_group(head, pname)] += n
    return HeadParams(name, expert.kind, **groups)


def count_backbone(name: str, n: int, groups: dict[str, int], prefix: str, tied: bool) -> bool:
    """Adds a Qwen backbone parameter (``prefix``: where the backbone sits in the model) of
    ``n`` elements to its bandwidth-floor group: the tower, the decoder's layers and final norm,
    the (tied) LM head. False: not a backbone parameter."""
    if name.startswith(prefix + "visual."):
        groups["vision"] += n
    elif name == prefix + "language_model.embed_tokens.weight":
        groups["lm_head" if tied else "unread"] += n
    elif name.startswith(prefix + "lm_head."):
        groups["lm_head"] += n
    elif name.startswith(prefix + "language_model."):
        groups["vlm_layers"] += n
    else:
        return False
    return True


def count_qwen3vl_params(config: ModelConfig, expert: int = 1) -> ParamCounts:
    """The bandwidth floor's parameter groups (bench/floor.py) of a Qwen3-VL model, counted on
    the model built on the meta device: the DiT ``expert`` by what reads it, StarVLA heads each
    by how often a frame reads them."""
    with torch.device("meta"):
        model = Qwen3VLModel(config)
    tied = config.qwen.tie_word_embeddings
    groups = dict(vision=0, vlm_layers=0, lm_head=0, action_step=0, adarms_once=0, unread=0)
    for name, p in model.named_parameters():
        n = p.numel()
        if count_backbone(name, n, groups, "", tied):
            pass
        elif name.startswith("experts."):
            i = int(name.split(".")[1]) + 1
            if config.action_experts[i - 1].kind != "kv-layerwise":
                continue  # the heads below
            if i != expert:
                groups["unread"] += n
            elif ".time_mlp" in name or ".state_proj." in name:
                groups["adarms_once"] += n  # t (and the state) only: once per frame
            else:
                groups["action_step"] += n
    names = family_of(config).head_names(config)
    heads = tuple(_head_params(name, e, model.experts[i])
                  for i, (name, e) in enumerate(zip(names, config.action_experts))
                  if e.kind != "kv-layerwise")
    return ParamCounts(**groups, heads=heads)
