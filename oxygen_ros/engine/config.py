"""Model and engine configuration, validated on construction: ModelConfig (frozen) and
EngineConfig (a plain dataclass; a running engine replaces it whole through
Engine.update_config, which validates the new one first)."""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .head_config import CrossAttnHeadConfig, RegressHeadConfig, head_from

MODES = ("oxygen", "shared", "isolated", "parallel")
DTYPES = ("float32", "bfloat16", "float16")
# standard: nn.Linear weights [out, in] (F.linear); transposed: [in, out] copies (x @ w)
LINEAR_LAYOUTS = ("standard", "transposed")
# How a camera image that is not model-size becomes the vision tower's square input
# (engine/images.py): pad = openpi / LeRobot resize-with-pad (aspect kept, -1 bars), what pi0.5
# checkpoints were trained on; stretch = resize to the square, aspect ratio lost.
IMAGE_RESIZE = ("pad", "stretch")
MAX_TARGET_ACTION_HZ = 10_000.0
ATTENTION_BACKENDS = ("auto", "cpp", "triton", "reference")
# pi05: PaliGemma/Gemma backbone + layerwise adaRMS experts; qwen3vl: Qwen3-VL backbone + a DiT
# action expert on the last layers' prefix K/V (docs/qwen3-vl.md)
FAMILIES = ("pi05", "qwen3vl")
RTC_METHODS = ("guided", "inpaint")  # engine/rtc.py
RTC_JACOBIANS = ("identity", "vjp")
MAX_GUIDANCE = 1000.0


def _positive(name: str, value: int | float) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


@dataclass(frozen=True)
class ExpertConfig:
    """One transformer expert of the MoT: its own width and MLP, the shared depth and heads."""

    width: int
    mlp_dim: int
    # 0: one layer per backbone layer (pi0.5). L > 0: L layers, layer i reading the prefix K/V
    # of backbone layer depth - L + i (the Xiaomi-Robotics-0 DiT).
    num_layers: int = 0
    num_heads: int = 0  # query heads; 0: the backbone's
    # What it shares with the prefill (engine/head_config.py, docs/starvla.md): kv-layerwise
    # (the prefix K/V), hidden-crossattn or regress (the prefill's hidden states, with `head`).
    kind: str = "kv-layerwise"
    head: CrossAttnHeadConfig | RegressHeadConfig | None = None

    def __post_init__(self) -> None:
        _positive("expert width", self.width)
        _positive("expert mlp_dim", self.mlp_dim)
        if self.num_layers < 0 or self.num_heads < 0:
            raise ValueError(f"expert num_layers/num_heads must be >= 0 (0: the backbone's), "
                             f"got {self.num_layers}/{self.num_heads}")
        object.__setattr__(self, "head", head_from(self.kind, self.head))  # dicts from JSON
        if self.kind == "hidden-crossattn":
            if self.num_layers < 1 or self.num_heads < 1 or self.width % self.num_heads:
                raise ValueError(f"a hidden-crossattn expert needs num_layers >= 1 and num_heads "
                                 f">= 1 dividing its width {self.width}, got "
                                 f"{self.num_layers}/{self.num_heads}")
            if (self.width // self.num_heads) % 2:
                raise ValueError(f"hidden-crossattn head dim {self.width // self.num_heads} "
                                 f"must be even")


@dataclass(frozen=True)
class VisionConfig:
    """SigLIP vision tower shape."""

    image_size: int = 224
    patch_size: int = 14
    width: int = 1152
    depth: int = 27
    num_heads: int = 16
    mlp_dim: int = 4304

    def __post_init__(self) -> None:
        for name in ("image_size", "patch_size", "width", "depth", "num_heads", "mlp_dim"):
            _positive(f"vision.{name}", getattr(self, name))
        if self.image_size % self.patch_size:
            raise ValueError(
                f"vision.image_size {self.image_size} is not a multiple of patch_size {self.patch_size}"
            )
        if self.width % self.num_heads:
            raise ValueError(f"vision.width {self.width} not divisible by num_heads {self.num_heads}")

    @property
    def tokens_per_image(self) -> int:
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class QwenVLConfig:
    """What the Qwen3-VL family adds: vision tower details, rotary sections, chat-template ids,
    the DiT expert's state tokens. The tower's width/depth/heads/mlp/patch live in `vision`."""

    temporal_patch_size: int = 2
    spatial_merge_size: int = 2
    num_position_embeddings: int = 2304
    deepstack_visual_indexes: tuple[int, ...] = (5, 11, 17)
    mrope_section: tuple[int, int, int] = (24, 20, 20)
    image_token_id: int = 151655
    vision_start_token_id: int = 151652
    vision_end_token_id: int = 151653
    # "<|im_start|>user\n" before the images, "<|im_end|>\n<|im_start|>assistant\n" after the text
    head_ids: tuple[int, ...] = (151644, 872, 198)
    tail_ids: tuple[int, ...] = (151645, 198, 151644, 77091, 198)
    tie_word_embeddings: bool = True
    state_tokens: int = 1  # DiT tokens carrying the proprioceptive state

    def __post_init__(self) -> None:
        _positive("qwen.temporal_patch_size", self.temporal_patch_size)
        _positive("qwen.spatial_merge_size", self.spatial_merge_size)
        _positive("qwen.num_position_embeddings", self.num_position_embeddings)
        if math.isqrt(self.num_position_embeddings) ** 2 != self.num_position_embeddings:
            raise ValueError(f"qwen.num_position_embeddings must be a square, got "
                             f"{self.num_position_embeddings}")
        if len(self.mrope_section) != 3 or min(self.mrope_section) < 0:
            raise ValueError(f"qwen.mrope_section must be 3 non-negative ints, got {self.mrope_section}")
        if self.state_tokens < 0:
            raise ValueError(f"qwen.state_tokens must be >= 0, got {self.state_tokens}")


@dataclass(frozen=True)
class ModelConfig:
    """A pi0.5-class Mixture-of-Transformers VLA.

    Expert 0 is the VLM (prefix + language); experts 1.. are action experts (pi0.5 has one).
    All experts share depth, heads and head_dim so their K/V can be attended to jointly.
    """

    name: str = "custom"
    vocab_size: int = 257152
    depth: int = 18
    num_heads: int = 8
    num_kv_heads: int = 1
    head_dim: int = 256
    vlm: ExpertConfig = ExpertConfig(2048, 16384)
    action_experts: tuple[ExpertConfig, ...] = (ExpertConfig(1024, 4096),)
    vision: VisionConfig = VisionConfig()
    num_cameras: int = 3
    max_prompt_tokens: int = 200
    action_horizon: int = 50
    action_dim: int = 32
    state_bins: int = 256
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    eos_token_id: int = 1
    pad_token_id: int = 0
    bos_token_id: int = 2
    family: str = "pi05"
    qwen: QwenVLConfig | None = None  # family qwen3vl only

    def __post_init__(self) -> None:
        for name in ("vocab_size", "depth", "num_heads", "num_kv_heads", "head_dim", "num_cameras",
                     "max_prompt_tokens", "action_horizon", "action_dim", "state_bins"):
            _positive(name, getattr(self, name))
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads {self.num_heads} must be a multiple of num_kv_heads {self.num_kv_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if not self.action_experts:
            raise ValueError("a MoT VLA needs at least one action expert (E >= 2)")
        for tok in ("eos_token_id", "pad_token_id", "bos_token_id"):
            if not 0 <= getattr(self, tok) < self.vocab_size:
                raise ValueError(f"{tok} {getattr(self, tok)} outside vocab of {self.vocab_size}")
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        if (self.family == "qwen3vl") != (self.qwen is not None):
            raise ValueError("family qwen3vl needs the qwen fields, and only it takes them")
        for e in self.action_experts:
            if e.num_layers > self.depth:
                raise ValueError(f"an action expert of {e.num_layers} layers cannot read the last "
                                 f"layers of a {self.depth}-layer backbone")
            if e.kind != "kv-layerwise":
                self._check_hidden_head(e)
                continue
            heads = e.num_heads or self.num_heads
            if heads % self.num_kv_heads:
                raise ValueError(f"expert heads {heads} not a multiple of num_kv_heads "
                                 f"{self.num_kv_heads}")
        if self.qwen is not None:
            q, v = self.qwen, self.vision
            cell = v.patch_size * q.spatial_merge_size
            if v.image_size % cell:
                raise ValueError(f"vision.image_size {v.image_size} must be a multiple of "
                                 f"patch_size x spatial_merge_size = {cell}")
            if sum(q.mrope_section) != self.head_dim // 2:
                raise ValueError(f"qwen.mrope_section {q.mrope_section} must sum to head_dim/2 "
                                 f"= {self.head_dim // 2}")
            if any(not 0 <= i < v.depth for i in q.deepstack_visual_indexes):
                raise ValueError(f"qwen.deepstack_visual_indexes {q.deepstack_visual_indexes} "
                                 f"outside the vision tower's {v.depth} layers")
            if len(q.deepstack_visual_indexes) > self.depth:
                raise ValueError("more DeepStack features than decoder layers")
            for tok in (q.image_token_id, q.vision_start_token_id, q.vision_end_token_id,
                        *q.head_ids, *q.tail_ids):
                if not 0 <= tok < self.vocab_size:
                    raise ValueError(f"qwen token id {tok} outside vocab of {self.vocab_size}")

    def _check_hidden_head(self, e: ExpertConfig) -> None:
        """A head on the prefill's hidden states (engine/head_config.py): the qwen3vl family's
        prefill keeps them; an OFT head's input is the backbone's width and its placeholder a
        token of the vocabulary."""
        if self.family != "qwen3vl":
            raise ValueError(f"a {e.kind} action head reads the Qwen3-VL prefill's hidden "
                             f"states: family qwen3vl only, not {self.family}")
        if e.kind == "regress":
            if e.width != self.vlm.width:
                raise ValueError(f"a regress head reads the backbone's hidden states: its width "
                                 f"must be the VLM's {self.vlm.width}, got {e.width}")
            if e.head.query_token_id >= self.vocab_size:
                raise ValueError(f"regress query_token_id {e.head.query_token_id} outside vocab "
                                 f"of {self.vocab_size}")

    @property
    def num_experts(self) -> int:
        return 1 + len(self.action_experts)

    @property
    def image_tokens(self) -> int:
        """Prefix tokens per camera image: SigLIP patches (pi05); merged patches between
        <|vision_start|> and <|vision_end|> (qwen3vl)."""
        if self.qwen is None:
            return self.vision.tokens_per_image
        return self.image_grid_tokens + 2

    @property
    def image_grid(self) -> tuple[int, int]:
        """(rows, cols) of one image's LM tokens after the patch merger (qwen3vl)."""
        merge = self.qwen.spatial_merge_size if self.qwen is not None else 1
        side = self.vision.image_size // self.vision.patch_size // merge
        return side, side

    @property
    def image_grid_tokens(self) -> int:
        rows, cols = self.image_grid
        return rows * cols

    def prefix_tokens(self, num_images: int, num_prompt: int) -> int:
        """Tokens of an observation prefix: (the chat template's head,) each image, the prompt."""
        head = len(self.qwen.head_ids) if self.qwen is not None else 0
        return head + num_images * self.image_tokens + num_prompt

    def rope_offset(self, num_images: int) -> int:
        """Rotary position minus sequence index for every token after the images (Qwen3-VL's
        rope delta: an image of r x c tokens advances positions by max(r, c), not r * c)."""
        if self.qwen is None:
            return 0
        rows, cols = self.image_grid
        return num_images * (max(rows, cols) - rows * cols)

    @property
    def action_tokens(self) -> int:
        """Tokens one action-expert pass queries (its scratch slots after the prefix): the
        chunk (pi05); state tokens + a time token + the chunk (the DiT)."""
        if self.qwen is None:
            return self.action_horizon
        return self.qwen.state_tokens + 1 + self.action_horizon

    @property
    def max_prefix_tokens(self) -> int:
        return self.prefix_tokens(self.num_cameras, self.max_prompt_tokens)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **overrides: Any) -> "ModelConfig":
        return model_config_from_dict({**self.to_dict(), **overrides})


def model_config_from_dict(d: dict[str, Any]) -> ModelConfig:
    """Build a ModelConfig from plain data (JSON/YAML), nested dicts for experts and vision."""
    d = dict(d)
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = set(d) - known
    if unknown:
        raise ValueError(f"unknown model config fields: {sorted(unknown)}; known: {sorted(known)}")
    if isinstance(d.get("vlm"), dict):
        d["vlm"] = ExpertConfig(**d["vlm"])
    if "action_experts" in d:
        d["action_experts"] = tuple(
            e if isinstance(e, ExpertConfig) else ExpertConfig(**e) for e in d["action_experts"]
        )
    if isinstance(d.get("vision"), dict):
        d["vision"] = VisionConfig(**d["vision"])
    if isinstance(d.get("qwen"), dict):
        d["qwen"] = QwenVLConfig(**{k: tuple(v) if isinstance(v, list) else v
                                    for k, v in d["qwen"].items()})
    return ModelConfig(**d)


PRESETS: dict[str, ModelConfig] = {
    # Tests: a whole frame well under 0.2 s on one CPU core.
    "tiny": ModelConfig(
        name="tiny", vocab_size=512, depth=2, num_heads=4, num_kv_heads=1, head_dim=32,
        vlm=ExpertConfig(128, 256), action_experts=(ExpertConfig(64, 128),),
        vision=VisionConfig(image_size=32, patch_size=8, width=64, depth=1, num_heads=2, mlp_dim=128),
        num_cameras=2, max_prompt_tokens=48, action_horizon=10, action_dim=8,
    ),
    # small and balanced: max_prompt_tokens 128 holds the default instruction with the longest
    # 32-joint state text (Engine.validate_changes checks that worst case at construction).
    # Benchmarks: pi0.5 proportions (MLP 8x the VLM width as Gemma 2B, an expert half as wide
    # with MLP 4x as Gemma 300m, 2 cameras, 50-step horizon), shrunk for a CPU.
    "small": ModelConfig(
        name="small", vocab_size=2048, depth=8, num_heads=8, num_kv_heads=1, head_dim=64,
        vlm=ExpertConfig(512, 4096), action_experts=(ExpertConfig(256, 1024),),
        vision=VisionConfig(image_size=112, patch_size=14, width=256, depth=4, num_heads=4, mlp_dim=1024),
        num_cameras=2, max_prompt_tokens=128, action_horizon=50, action_dim=32,
    ),
    # Benchmarks: stage costs on a CPU in the paper's RTX 4090 proportions (few image tokens,
    # LIBERO-like 10-step horizon, an action expert much narrower than the VLM; MLPs 8x / 4x
    # their widths as Gemma 2B / 300m): decode reads the VLM's weights, denoising runs the
    # small expert.
    "balanced": ModelConfig(
        name="balanced", vocab_size=2048, depth=8, num_heads=8, num_kv_heads=1, head_dim=64,
        vlm=ExpertConfig(512, 4096), action_experts=(ExpertConfig(128, 512),),
        vision=VisionConfig(image_size=56, patch_size=14, width=128, depth=2, num_heads=2, mlp_dim=512),
        num_cameras=1, max_prompt_tokens=128, action_horizon=10, action_dim=32,
    ),
    # Real pi0.5 shapes (PaliGemma 2B + Gemma 300m action expert, SigLIP So400m/14): for GPUs.
    "pi05": ModelConfig(name="pi05"),
    # Xiaomi-Robotics-0 shaped for a CPU (docs/qwen3-vl.md): a Qwen3-VL backbone with q/k norms,
    # GQA (2 query heads per KV head), head dim 128, 3-axis rotary, DeepStack; a DiT expert on
    # the last 2 of 4 layers; chunks of 30 x 32. Ids 2048.. are the chat template's specials.
    "xr0-tiny": ModelConfig(
        name="xr0-tiny", family="qwen3vl", vocab_size=2056, depth=4, num_heads=4, num_kv_heads=2,
        head_dim=128, vlm=ExpertConfig(256, 768),
        action_experts=(ExpertConfig(128, 256, num_layers=2, num_heads=2),),
        vision=VisionConfig(image_size=64, patch_size=16, width=64, depth=2, num_heads=2, mlp_dim=128),
        num_cameras=2, max_prompt_tokens=128, action_horizon=30, action_dim=32,
        rope_theta=5_000_000.0, eos_token_id=2049, pad_token_id=0, bos_token_id=2048,
        qwen=QwenVLConfig(num_position_embeddings=16, deepstack_visual_indexes=(0,),
                          image_token_id=2055, vision_start_token_id=2053, vision_end_token_id=2054,
                          head_ids=(2048, 2050, 2052), tail_ids=(2049, 2052, 2048, 2051, 2052)),
    ),
    # Xiaomi-Robotics-0 sizes: Qwen3-VL-4B (36 layers, 2560 wide, 32 heads / 8 KV heads of 128,
    # ViT 24 x 1024 with DeepStack at 5/11/17) + a 16-layer DiT (1024 wide, 8 KV heads of 128)
    # on the last 16 layers; 2 cameras at 224 (7 x 7 tokens each); chunks of 30 x 32. For GPUs.
    "xr0": ModelConfig(
        name="xr0", family="qwen3vl", vocab_size=151936, depth=36, num_heads=32, num_kv_heads=8,
        head_dim=128, vlm=ExpertConfig(2560, 9728),
        action_experts=(ExpertConfig(1024, 4096, num_layers=16, num_heads=8),),
        vision=VisionConfig(image_size=224, patch_size=16, width=1024, depth=24, num_heads=16,
                            mlp_dim=4096),
        num_cameras=2, max_prompt_tokens=128, action_horizon=30, action_dim=32,
        rope_theta=5_000_000.0, eos_token_id=151645, pad_token_id=151643, bos_token_id=151643,
        qwen=QwenVLConfig(),
    ),
}

# StarVLA's action heads on the Qwen3-VL backbone (engine/head_config.py, docs/starvla.md). The
# engine's frame does not run them yet: frame_unsupported_reason refuses them at construction.
# Tiny heads for the CPU, on the xr0-tiny backbone (+ id 2056, the OFT placeholder, in every
# one of them so E = 2, 3, 4 share one backbone and one prompt); StarVLA's shapes otherwise
# (PI_v3 16 x 7 chunks, 32 future tokens; GR00T 8 x 7 with a state token; OFT 9 x 7).
STARVLA_TINY_PI_V3 = ExpertConfig(
    128, 512, num_layers=4, num_heads=2, kind="hidden-crossattn",
    head=CrossAttnHeadConfig(source="layerwise", horizon=16, action_dim=7, mlp_hidden=128))
STARVLA_TINY_GR00T = ExpertConfig(
    96, 384, num_layers=4, num_heads=2, kind="hidden-crossattn",
    head=CrossAttnHeadConfig(source="last", horizon=8, action_dim=7, state_dim=7,
                             interleave_self_attention=True, output_dim=128, mlp_hidden=128))
STARVLA_TINY_OFT = ExpertConfig(256, 512, num_layers=2, kind="regress",
                                head=RegressHeadConfig(horizon=9, action_dim=7,
                                                       query_token_id=2056))
# Full size, from github starVLA/starVLA's framework defaults (Qwen3-VL-4B backbone = xr0's):
# - QwenPI_v3 (QwenPI_v3DefaultConfig + populate_layerwise_dit_cfg): DiT width 1024
#   (action_dit_hidden_dim), head dim 64 -> 16 heads, one block per backbone layer (36), FF 4 x
#   width (diffusers FeedForward), every block cross-attends (interleave_self_attention False),
#   decoder on the last block (return_pre_output) with hidden 1024, 32 future tokens
#   (num_target_vision_tokens), 1024 learned positions (max_seq_len), chunks of 16 x 7, state in
#   the prompt; its parameters (+ the ones StarVLA builds but never runs) match the 538,678,305
#   + 94,593,024 its docstring lists (test/engine/model/test_starvla_heads.py).
# - GR00T (QwenGR00TDefaultConfig, DiT-B): width 768, 12 heads of 64, 16 layers, odd ones
#   self-attending (interleave_self_attention True), cross-attention at the VLM's 2560, output
#   projection to 1024 (output_dim), state encoder / decoder hidden 1024 (hidden_size), state of
#   7, chunks of 8 x 7.
# - OFT (QwenOFTDefaultConfig + MLP_ActionHeader): MLP-ResNet of 2 blocks at 2 x 2560, chunks of
#   future_action_window_size 8 + 1 = 9 (apply_config_compat) x 7. StarVLA's placeholder is the
#   first token of the magnifier emoji (U+1F50D); with no Qwen tokenizer here we take id 151669,
#   assumed to be the first id past Qwen3's vocabulary in use (the table has 151936 rows).
# - S = 4 Euler steps for both DiTs (num_inference_timesteps): pass --S 4.
STARVLA_PI_V3 = ExpertConfig(
    1024, 4096, num_layers=36, num_heads=16, kind="hidden-crossattn",
    head=CrossAttnHeadConfig(source="layerwise", horizon=16, action_dim=7, mlp_hidden=1024))
STARVLA_GR00T = ExpertConfig(
    768, 3072, num_layers=16, num_heads=12, kind="hidden-crossattn",
    head=CrossAttnHeadConfig(source="last", horizon=8, action_dim=7, state_dim=7,
                             interleave_self_attention=True, output_dim=1024, mlp_hidden=1024))
STARVLA_OFT = ExpertConfig(2560, 5120, num_layers=2, kind="regress",
                           head=RegressHeadConfig(horizon=9, action_dim=7, query_token_id=151669))
_STARVLA_TINY = dict(vocab_size=2057, action_horizon=16, action_dim=7)
PRESETS.update({
    "starvla-tiny": PRESETS["xr0-tiny"].replace(
        name="starvla-tiny", action_experts=(STARVLA_TINY_PI_V3,), **_STARVLA_TINY),
    "starvla-tiny-e3": PRESETS["xr0-tiny"].replace(
        name="starvla-tiny-e3", action_experts=(STARVLA_TINY_PI_V3, STARVLA_TINY_GR00T),
        **_STARVLA_TINY),
    "starvla-tiny-e4": PRESETS["xr0-tiny"].replace(
        name="starvla-tiny-e4",
        action_experts=(STARVLA_TINY_PI_V3, STARVLA_TINY_GR00T, STARVLA_TINY_OFT), **_STARVLA_TINY),
    "starvla": PRESETS["xr0"].replace(name="starvla", action_experts=(STARVLA_PI_V3,),
                                      action_horizon=16, action_dim=7),
})


def frame_unsupported_reason(config: ModelConfig) -> str | None:
    """Why the engine cannot run ``config`` yet (None: it can): action heads on the prefill's
    hidden states are built as modules but not scheduled in the engine's frame."""
    kinds = sorted({e.kind for e in config.action_experts} - {"kv-layerwise"})
    if not kinds:
        return None
    return (f"model {config.name!r}: action heads of kind {', '.join(kinds)} (StarVLA) are built "
            f"as modules (engine/model/starvla_heads.py) but the engine's frame does not run "
            f"them yet (docs/starvla.md); use a preset with kv-layerwise experts")


# the presets an Engine (oxygen-bench, oxygen-demo, the node) can run
RUNNABLE_PRESETS = tuple(n for n, c in PRESETS.items() if frame_unsupported_reason(c) is None)


def load_model_config(preset: str, overrides_file: str | Path | None = None) -> ModelConfig:
    """A preset, optionally overridden field by field from a JSON or YAML file."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    cfg = PRESETS[preset]
    if overrides_file is None:
        return cfg
    path = Path(overrides_file)
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of ModelConfig fields, got {type(data).__name__}")
    base = cfg.to_dict()
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return model_config_from_dict(base)


@dataclass
class EngineConfig:
    """Scheduling knobs. k, N, S, mode and the memory fields may change between frames."""

    mode: str = "oxygen"
    decode_steps_per_frame: int = 4  # k
    max_decode_steps: int = 12  # N
    denoise_steps: int = 10  # S
    max_active_requests: int = 32
    # Language requests waiting for admission; beyond it the lowest-priority, newest one is
    # refused with a reason (live state stays bounded when asks outpace decoding).
    max_waiting_requests: int = 64
    memory_every_n_frames: int = 1  # M; 0 disables periodic memory requests
    memory_prompt: str = "Memory: what happened?\n"
    instruction: str = "pick up the cube"
    block_size: int = 16
    num_blocks: int = 0  # 0: sized from the model and max_active_requests
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float32"
    attention_backend: str = "auto"  # auto (cpp on CPU, triton on CUDA) | cpp | triton | reference
    compile_denoise: bool = False  # torch.compile the action expert's step (slow first frame)
    # Decode steps and the denoise loop through captured CUDA graphs (engine/graphs.py; padded
    # batches, static buffers). Off until measured on a device; on CPU the same code runs as a
    # stand-in.
    cuda_graphs: bool = False
    # standard: nn.Linear weights [out, in] (F.linear); transposed: [in, out] copies (x @ w),
    # faster at one token on some CPU BLAS builds. Same layout in every mode of a process.
    linear_layout: str = "standard"
    # Action-rate target (beyond the paper, which fixes k): when > 0, oxygen mode chooses k per
    # frame in [k_min, decode_steps_per_frame] from the stage costs measured so far, so the
    # frames fit 1 / target_action_hz on average (engine/rate_control.py). 0: off, k is fixed.
    target_action_hz: float = 0.0
    k_min: int = 1  # fewest decode steps a frame runs under a target: language never starves
    # Under a target, True: every frame is predicted to fit 1/target by itself (whole k; frames
    # land up to a decode step under the period, so actions run faster than asked). False: the
    # mean frame fits, a single frame may run over by about a decode step (the carried credit).
    target_strict: bool = False
    image_resize: str = "pad"  # IMAGE_RESIZE: pad (as pi0.5 was trained) | stretch
    # Real-time chunking (engine/rtc.py, docs/rtc.md), applied to frames whose observation
    # carries an ActionPrior (the node's chunk_blend rtc): guided (inference-time guidance) or
    # inpaint (checkpoints trained with training-time RTC); the guided correction is the error
    # itself (identity, no backward pass) or its vector-Jacobian product through the action
    # expert (vjp); max_guidance is beta; execution_horizon: steps of the prior guided (the
    # weights ramp to 0 there), 0 = the whole prior.
    rtc_method: str = "guided"
    rtc_jacobian: str = "identity"
    rtc_max_guidance: float = 10.0
    rtc_execution_horizon: int = 0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not 1 <= self.decode_steps_per_frame <= 1024:
            raise ValueError(
                f"decode_steps_per_frame (k) must be in [1, 1024], got {self.decode_steps_per_frame}"
            )
        if not 1 <= self.max_decode_steps <= 4096:
            raise ValueError(f"max_decode_steps (N) must be in [1, 4096], got {self.max_decode_steps}")
        if not 1 <= self.denoise_steps <= 1000:
            raise ValueError(f"denoise_steps (S) must be in [1, 1000], got {self.denoise_steps}")
        if not 1 <= self.max_active_requests <= 4096:
            raise ValueError(
                f"max_active_requests must be in [1, 4096], got {self.max_active_requests}"
            )
        if not 1 <= self.max_waiting_requests <= 1 << 16:
            raise ValueError(
                f"max_waiting_requests must be in [1, 65536], got {self.max_waiting_requests}")
        if self.memory_every_n_frames < 0:
            raise ValueError(f"memory_every_n_frames must be >= 0, got {self.memory_every_n_frames}")
        if self.block_size not in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            raise ValueError(f"block_size must be a power of two <= 256, got {self.block_size}")
        if self.num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0 (0 = auto), got {self.num_blocks}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"attention_backend must be one of {ATTENTION_BACKENDS}, "
                             f"got {self.attention_backend!r}")
        if self.linear_layout not in LINEAR_LAYOUTS:
            raise ValueError(
                f"linear_layout must be standard or transposed, got {self.linear_layout!r}")
        if not (math.isfinite(self.target_action_hz)
                and 0.0 <= self.target_action_hz <= MAX_TARGET_ACTION_HZ):
            raise ValueError(f"target_action_hz must be 0 (off) or in (0, "
                             f"{MAX_TARGET_ACTION_HZ:g}] Hz, got {self.target_action_hz}")
        if not isinstance(self.target_strict, bool):
            raise ValueError(f"target_strict must be true or false, got {self.target_strict!r}")
        if not 1 <= self.k_min <= 1024:
            raise ValueError(f"k_min must be in [1, 1024], got {self.k_min}")
        if self.target_action_hz and self.k_min > self.decode_steps_per_frame:
            raise ValueError(f"k_min ({self.k_min}) must not exceed decode_steps_per_frame "
                             f"({self.decode_steps_per_frame}), which is k_max under a target")
        if self.image_resize not in IMAGE_RESIZE:
            raise ValueError(f"image_resize must be one of {IMAGE_RESIZE}, got {self.image_resize!r}")
        if self.rtc_method not in RTC_METHODS:
            raise ValueError(f"rtc_method must be one of {RTC_METHODS}, got {self.rtc_method!r}")
        if self.rtc_jacobian not in RTC_JACOBIANS:
            raise ValueError(
                f"rtc_jacobian must be one of {RTC_JACOBIANS}, got {self.rtc_jacobian!r}")
        if isinstance(self.rtc_max_guidance, bool) or not (
                isinstance(self.rtc_max_guidance, (int, float))
                and 0.0 <= self.rtc_max_guidance <= MAX_GUIDANCE):
            raise ValueError(f"rtc_max_guidance must be in [0, {MAX_GUIDANCE:g}], "
                             f"got {self.rtc_max_guidance!r}")
        if not 0 <= self.rtc_execution_horizon <= 4096:
            raise ValueError(f"rtc_execution_horizon must be in [0, 4096] (0 = the whole prior), "
                             f"got {self.rtc_execution_horizon}")
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise ValueError(f"device must be cpu or cuda[:N], got {self.device!r}")

    def replace(self, **changes: Any) -> "EngineConfig":
        return dataclasses.replace(self, **changes)
