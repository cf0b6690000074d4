"""The pi05 family's checkpoints: random init, loading and inspecting LeRobot / openpi pi0.5 checkpoints (formats.py reads their small
files, writer.py writes both layouts).

Weights: ``model.paligemma_with_expert...`` names (openpi's converter writes the same without
``model.``; older transformers put the vision tower under ``vision_model.``). Loading is lean: the
model is built on the meta device and every tensor is copied from the memory-mapped file straight
into its final dtype and device (no float32 detour, no second copy; the mapping is reopened every
~256 MB so touched file pages do not add up in the resident set).

Extension for E > 2 (not in LeRobot): action expert i >= 2 is ``gemma_expert_{i}`` with
``action_in_proj_{i}`` etc.; expert 1 keeps the pi0.5 names.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors import safe_open
from tqdm import tqdm

from ...config.model_config import ModelConfig
from ...model.formats import read_checkpoint_files
from ..loader import Checkpoint, init_model, load_checkpoint, open_checkpoint, resolve_tokenizer
from .model import MoTModel
from ...model.tokenizer import describe_vocab

# init_model, open_checkpoint, load_checkpoint, Checkpoint and resolve_tokenizer are
# family-neutral (engine/families/loader.py); imported from here as well as before
__all__ = ["Checkpoint", "WEIGHTS", "check_weights", "describe_checkpoint", "init_model",
           "init_mot", "inspect_pi05_folder", "load_checkpoint", "load_weights",
           "open_checkpoint", "open_pi05_folder", "resolve_tokenizer", "to_lerobot_name"]

PWE = "model.paligemma_with_expert."
VLM = PWE + "paligemma.model.language_model."
VISION = PWE + "paligemma.model.vision_tower."
VISION_OLD = VISION + "vision_model."
PROJ = PWE + "paligemma.model.multi_modal_projector.linear."
EMBED = VLM + "embed_tokens.weight"
LM_HEAD = PWE + "paligemma.lm_head.weight"
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


def init_mot(config: ModelConfig, seed: int = 0, device: torch.device = torch.device("cpu"),
             dtype: torch.dtype = torch.float32) -> MoTModel:
    """Deterministic random init (same seed -> same weights on any device); inference-only
    (requires_grad off, eval mode), as is the model load_checkpoint returns.

    Linear weights ~ N(0, 1/fan_in) (residual branches as large as the input, so the output
    depends on context), embeddings ~ N(0, 1/W_vlm) (so sqrt(W)-scaled inputs and tied logits
    are O(1)), norm weights ~ N(0, 0.1) except the VLM's final norm (see below),
    adaRMS dense small weights with bias (scale, shift, gate) = (0, 0, 1), biases 0.

    Lean: the model is built on the meta device and each parameter is drawn in float32 on the
    CPU and stored straight in `dtype` on `device`, so the peak is the model in `dtype` plus one
    float32 parameter (row blocks of at most 64 MiB for the big ones: the embedding); building
    float32 first and casting peaked at the float32 model (2x the bf16 parameters for pi05).
    Draws are made in the parameters' order with one generator, so float32 values do not depend
    on the block size; in other dtypes, blocked parameters round the same float32 draws.
    """
    with torch.device("meta"):
        model = MoTModel(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, meta in list(model.named_parameters()):
            module_name, _, leaf = name.rpartition(".")
            module = model.get_submodule(module_name)
            out = torch.empty(meta.shape, dtype=dtype, device=device)
            rows = meta.shape[0] if meta.dim() == 2 else 0
            block = max(1, _INIT_BLOCK_BYTES // (4 * meta.shape[1])) if rows else 0
            if dtype == torch.float32 or not rows or block >= rows:
                out.copy_(_init_value(name, torch.empty(meta.shape), config, gen))
            else:
                for lo in range(0, rows, block):
                    hi = min(rows, lo + block)
                    out[lo:hi].copy_(_init_value(name, torch.empty(hi - lo, meta.shape[1]), config, gen))
            module._parameters[leaf] = torch.nn.Parameter(out, requires_grad=False)
    emb = model.vision.tower.embeddings  # its non-persistent buffer is still on "meta"
    emb.register_buffer("position_ids", torch.arange(emb.num_positions, device=device).expand((1, -1)),
                        persistent=False)
    return model.eval().requires_grad_(False)


_INIT_BLOCK_BYTES = 64 << 20


def _init_value(name: str, p: torch.Tensor, config: ModelConfig, gen: torch.Generator) -> torch.Tensor:
    """Fill the float32 tensor p (a parameter or a block of its rows) by init_mot's rules."""
    if name.startswith("vision.tower.") and "patch_embedding" not in name \
            and "position_embedding" not in name:
        if name.endswith("weight") and p.dim() == 2:
            p.normal_(0.0, p.shape[1] ** -0.5, generator=gen)
        elif "norm" in name and name.endswith("weight"):
            p.fill_(1.0)
        else:
            p.zero_()
        return p
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
    return p


# ---- load ------------------------------------------------------------------------------------
WEIGHTS = "model.safetensors"
_BATCH_BYTES = 256 << 20  # reopen the mapping after this many bytes (bounds mapped pages in RSS)
_SLICE_BYTES = 64 << 20  # bigger tensors are copied in row blocks of about this size
_ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
              "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
              "U8": torch.uint8, "BOOL": torch.bool}
# bytes per value of every safetensors dtype (a tensor the model never reads may have any of them)
_ST_ITEMSIZE = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "BF16": 2, "F16": 2,
                "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "BOOL": 1}


@dataclass(frozen=True)
class WeightEntry:
    key: str  # name in the file
    shape: tuple[int, ...]
    file_dtype: str  # safetensors dtype name (BF16, F32, ...)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def file_bytes(self) -> int:
        return self.numel * _ST_ITEMSIZE[self.file_dtype]


@dataclass
class WeightCheck:
    """Every model parameter paired with its tensor in the file, and what does not fit."""

    entries: dict[str, WeightEntry]  # our parameter name -> file tensor
    missing: list[str]
    unexpected: list[str]
    bad_shapes: list[str]

    @property
    def problems(self) -> list[str]:
        out = []
        for label, items in (("missing", self.missing), ("unexpected", self.unexpected),
                             ("wrong shape", self.bad_shapes)):
            if items:
                out.append(f"{label} {len(items)}: {items[:10]}{' ...' if len(items) > 10 else ''}")
        return out

    @property
    def num_params(self) -> int:
        return sum(e.numel for e in self.entries.values())


def file_tensors(path: str | Path) -> list[WeightEntry]:
    """Every tensor the safetensors file holds (read, ignored or tied), from its header alone."""
    with safe_open(str(path), framework="pt") as f:
        return [WeightEntry(key, tuple(int(d) for d in f.get_slice(key).get_shape()),
                            str(f.get_slice(key).get_dtype())) for key in f.keys()]


def check_weights(path: str | Path, config: ModelConfig) -> WeightCheck:
    """Pair the file's tensors with a ``config``-shaped model from the safetensors header alone
    (no tensor data is read): every key and shape is verified."""
    with torch.device("meta"):
        shapes = {n: tuple(t.shape) for n, t in MoTModel(config).state_dict().items()}
    wanted = {to_lerobot_name(n): n for n in shapes}
    found: dict[str, WeightEntry] = {}
    duplicates = []
    with safe_open(str(path), framework="pt") as f:
        for key in f.keys():
            c = _canonical(key)
            if c is None:
                continue
            sl = f.get_slice(key)
            entry = WeightEntry(key, tuple(int(d) for d in sl.get_shape()), str(sl.get_dtype()))
            if c in found:
                duplicates.append(f"{key} duplicates {found[c].key}")
            found[c] = entry
    lm_head = found.pop(LM_HEAD, None)
    if EMBED not in found and lm_head is not None:
        found[EMBED] = lm_head  # tied: lm_head stands in for a missing embed_tokens
    entries, bad = {}, list(duplicates)
    for lr_name, ours in wanted.items():
        e = found.get(lr_name)
        if e is None:
            continue
        if e.shape != shapes[ours]:
            bad.append(f"{e.key} {list(e.shape)} != {list(shapes[ours])}")
        elif e.file_dtype not in _ST_DTYPES or not _ST_DTYPES[e.file_dtype].is_floating_point:
            bad.append(f"{e.key} has dtype {e.file_dtype}")
        else:
            entries[ours] = e
    return WeightCheck(entries, sorted(set(wanted) - set(found)), sorted(set(found) - set(wanted)), bad)


def _jobs(entries: dict[str, WeightEntry]) -> list[list[tuple[str, WeightEntry, int, int]]]:
    """(name, entry, first row, end row) copy jobs grouped into batches of ~_BATCH_BYTES; a big
    tensor is split into row blocks of ~_SLICE_BYTES that may land in different batches."""
    batches: list[list] = [[]]
    size = 0
    for ours, e in sorted(entries.items(), key=lambda kv: kv[1].key):
        rows = e.shape[0] if e.shape else 1
        step = rows if e.file_bytes <= _SLICE_BYTES else max(1, _SLICE_BYTES // (e.file_bytes // rows))
        for i in range(0, rows, step):
            n = min(step, rows - i)
            batches[-1].append((ours, e, i, i + n))
            size += e.file_bytes * n // rows
            if size >= _BATCH_BYTES:
                batches.append([])
                size = 0
    return [b for b in batches if b]


def read_weights(path: str | Path, entries: dict[str, WeightEntry], dtype: torch.dtype,
                 device: torch.device, progress: bool | None = None,
                 keep_fp32: Callable[[str], bool] | None = None) -> dict[str, torch.Tensor]:
    """Our name -> tensor in ``dtype`` on ``device``, copied out of the memory-mapped file (tqdm
    bar on a terminal, or always with progress=True).

    The reader's tensors are views of a whole-file mapping whose touched pages count in the
    resident set until the file is closed, so the file is reopened every ~256 MB and each copy
    goes straight into the final tensor (copy_ casts: no temporary in the file's dtype).
    `keep_fp32(name)`: the parameters that stay float32 when `dtype` is a reduced precision
    (Conventions.keeps_fp32: the norms and the vision tower, as LeRobot keeps them in bf16)."""
    def final(ours: str) -> torch.dtype:
        reduced = dtype in (torch.bfloat16, torch.float16)
        return torch.float32 if reduced and keep_fp32 is not None and keep_fp32(ours) else dtype

    out = {ours: torch.empty(e.shape, dtype=final(ours), device=device) for ours, e in entries.items()}
    total = sum(e.file_bytes for e in entries.values())
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=f"loading {Path(path).name}",
              disable=None if progress is None else not progress, leave=False) as bar:
        for batch in _jobs(entries):
            with safe_open(str(path), framework="pt", device="cpu") as f:
                for ours, e, lo, hi in batch:
                    if not e.shape or (lo == 0 and hi == e.shape[0]):
                        out[ours].copy_(f.get_tensor(e.key))
                    else:
                        out[ours][lo:hi].copy_(f.get_slice(e.key)[lo:hi])
                    bar.update(e.file_bytes * (hi - lo) // (e.shape[0] if e.shape else 1))
    return out


def load_weights(path: str | Path, config: ModelConfig, device: str | torch.device = "cpu",
                 dtype: torch.dtype | str = torch.float32, progress: bool | None = None,
                 check: WeightCheck | None = None,
                 keep_fp32: Callable[[str], bool] | None = None) -> MoTModel:
    """An inference-ready, unfused MoTModel from a safetensors file. Strict: missing, unexpected
    or wrongly shaped weights raise one ValueError listing them (known-unused keys are ignored).
    `keep_fp32`: parameters kept float32 in a bf16 / fp16 model (read_weights)."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    device = torch.device(device)
    check = check or check_weights(path, config)
    if check.problems:
        raise ValueError(f"{path} does not match {config.name!r}: " + "; ".join(check.problems))
    with torch.device("meta"):
        model = MoTModel(config)
    state = read_weights(path, check.entries, dtype, device, progress, keep_fp32)
    model.load_state_dict(state, assign=True, strict=True)
    del state
    emb = model.vision.tower.embeddings  # its non-persistent buffer is still on "meta"
    emb.register_buffer("position_ids", torch.arange(emb.num_positions, device=device).expand((1, -1)),
                        persistent=False)
    still_meta = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if still_meta:
        raise RuntimeError(f"tensors left uninitialised after loading: {still_meta}")
    return model.eval().requires_grad_(False)


def describe_checkpoint(folder: str | Path, tokenizer=None, asset_id: str | None = None,
                        lerobot_version: str = "auto") -> Checkpoint:
    """Everything but the weights (for oxygen-inspect); a tokenizer problem is reported in
    tokenizer_source instead of raised."""
    config, info, stats = read_checkpoint_files(folder, asset_id, lerobot_version)
    try:
        tok, source = resolve_tokenizer(folder, config, info, tokenizer)
    except ValueError as err:
        tok, source = None, str(err)
    return Checkpoint(None, config, tok, source, stats, info)


def open_pi05_folder(folder: str | Path, device: str | torch.device = "cpu",
                     dtype: torch.dtype | str = torch.float32, tokenizer=None,
                     asset_id: str | None = None, progress: bool | None = None,
                     lerobot_version: str = "auto") -> Checkpoint:
    """A LeRobot or openpi pi0.5 checkpoint with its tokenizer and statistics (the pi05
    family's open_folder); its conventions (engine/model/conventions.py) by the LeRobot version
    the folder shows, or `lerobot_version`."""
    folder = Path(folder)
    config, info, stats = read_checkpoint_files(folder, asset_id, lerobot_version)
    tok, source = resolve_tokenizer(folder, config, info, tokenizer)
    model = load_weights(folder / WEIGHTS, config, device, dtype, progress,
                         keep_fp32=info.conventions.keeps_fp32 if info.conventions else None)
    return Checkpoint(model, config, tok, source, stats, info)


def inspect_pi05_folder(folder: str | Path, tokenizer: str | None = None,
                        asset_id: str | None = None, lerobot_version: str = "auto") -> dict[str, Any]:
    """oxygen-inspect's report of a LeRobot / openpi folder (report["problems"]: what stops
    serving), from its small files and the weights' headers."""
    folder = Path(folder)
    report: dict[str, Any] = {"problems": []}
    try:
        ck = describe_checkpoint(folder, tokenizer, asset_id, lerobot_version)
    except (ValueError, OSError) as err:
        report["problems"].append(str(err))
        return report
    info, cfg = ck.info, ck.config
    report.update(format=info.format, config=cfg, camera_keys=list(info.camera_keys),
                  state_dim=info.state_dim, action_dim=info.action_dim,
                  n_action_steps=info.n_action_steps, asset_id=info.asset_id, config_dtype=info.dtype)
    if ck.norm_stats is not None:
        report["norm_state"] = ck.norm_stats.state.summary()
        report["norm_action"] = ck.norm_stats.action.summary()
    else:
        report["norm_state"] = report["norm_action"] = "none (joint limits or identity in the node)"
    if info.conventions is not None:
        report["conventions"] = {k: v for k, v in info.conventions.lines()}
    if ck.tokenizer is not None:
        report["tokenizer"] = f"{ck.tokenizer_source} ({describe_vocab(ck.tokenizer, cfg.vocab_size)})"
    else:
        report["tokenizer"] = "NOT FOUND"
        report["problems"].append(ck.tokenizer_source)
    weights = folder / WEIGHTS
    if not weights.is_file():
        report["problems"].append(f"{weights} not found")
        return report
    try:
        check = check_weights(weights, cfg)
    except Exception as err:  # a damaged header: safetensors raises its own error types
        report["problems"].append(f"{weights}: {err}")
        return report
    held = file_tensors(weights)
    read = {e.key for e in check.entries.values()}
    report["params"] = check.num_params
    # what the file holds, every tensor counted (LeRobot also stores two lm_heads pi0.5 never reads)
    report["file_bytes"] = sum(e.file_bytes for e in held)
    report["file_dtypes"] = dict(Counter(e.file_dtype for e in held))
    report["unread_bytes"] = sum(e.file_bytes for e in held if e.key not in read)
    report["unread"] = sorted(e.key for e in held if e.key not in read)
    report["weights"] = (f"{len(check.entries)} tensors match" if not check.problems
                         else "; ".join(check.problems))
    report["problems"] += [f"{weights}: {p}" for p in check.problems]
    return report
