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
from .knobs import Knob, knob_table

# The execution modes (engine/modes.py): the three baselines, then OxyGen; reports list them
# in this order.
MODES = ("isolated", "parallel", "shared", "oxygen")
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
    # "<|im_start|>user\n" before the images; "<|im_end|>\n<|im_start|>assistant\n" after a
    # question (the frame's prefix ends inside the user turn: engine/intake.py)
    head_ids: tuple[int, ...] = (151644, 872, 198)
    tail_ids: tuple[int, ...] = (151645, 198, 151644, 77091, 198)
    tie_word_embeddings: bool = True
    # the text MLP's and the vision tower's activations (transformers' ACT2FN names; config.json's
    # text_config.hidden_act / vision_config.hidden_act)
    hidden_act: str = "silu"
    vision_hidden_act: str = "gelu_pytorch_tanh"
    state_tokens: int = 1  # DiT tokens carrying the proprioceptive state
    # put after the prompt's text, ending the prefix (and a question after them): OFT's placeholders
    # (docs/starvla.md); the StarVLA presets carry them whatever heads run, one prompt for E = 2..4
    action_query_ids: tuple[int, ...] = ()

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
        check_activation("qwen.hidden_act", self.hidden_act)
        check_activation("qwen.vision_hidden_act", self.vision_hidden_act)


def check_activation(name: str, act: str) -> None:
    """ValueError unless ``act`` is one of transformers' parameter-free ACT2FN activations (what
    the Qwen MLPs apply; a parametric one, e.g. prelu, would carry weights no file maps)."""
    if act in ("silu", "gelu_pytorch_tanh"):  # the defaults: the presets import no transformers
        return
    from transformers.activations import ACT2FN

    if not isinstance(act, str) or act not in ACT2FN:
        raise ValueError(f"{name} {act!r} is not an activation transformers knows "
                         f"(ACT2FN: {', '.join(sorted(ACT2FN))})")
    if any(True for _ in ACT2FN[act].parameters()):
        raise ValueError(f"{name} {act!r} has learned parameters: not supported")


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
                        *q.head_ids, *q.tail_ids, *q.action_query_ids):
                if not 0 <= tok < self.vocab_size:
                    raise ValueError(f"qwen token id {tok} outside vocab of {self.vocab_size}")

    def _check_hidden_head(self, e: ExpertConfig) -> None:
        """A head on the prefill's hidden states (engine/head_config.py): the qwen3vl family's
        prefill keeps them; an OFT head's input is the backbone's width and its placeholder a
        token of the vocabulary."""
        if self.family != "qwen3vl":
            raise ValueError(f"a {e.kind} action head reads the Qwen3-VL prefill's hidden "
                             f"states: family qwen3vl only, not {self.family}")
        if e.head.action_dim != self.action_dim:
            raise ValueError(f"a {e.kind} head's action_dim {e.head.action_dim} must be the "
                             f"model's {self.action_dim} (one noise and one joint space)")
        if e.kind == "regress":
            if e.width != self.vlm.width:
                raise ValueError(f"a regress head reads the backbone's hidden states: its width "
                                 f"must be the VLM's {self.vlm.width}, got {e.width}")
            if e.head.query_token_id >= self.vocab_size:
                raise ValueError(f"regress query_token_id {e.head.query_token_id} outside vocab "
                                 f"of {self.vocab_size}")
            queries = self.qwen.action_query_ids if self.qwen is not None else ()
            if list(queries).count(e.head.query_token_id) < e.head.horizon:
                raise ValueError(f"a regress head of horizon {e.head.horizon} reads as many "
                                 f"action-query tokens {e.head.query_token_id}: put them in "
                                 f"qwen.action_query_ids (got {list(queries)})")

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

# StarVLA's action heads on the Qwen3-VL backbone (engine/head_config.py, docs/starvla.md): a
# frame runs one prefill, then each head in turn (FrameOutput.chunks), then language.
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
_STARVLA_TINY = dict(vocab_size=2057, action_horizon=16, action_dim=7, qwen=dataclasses.replace(
    PRESETS["xr0-tiny"].qwen, action_query_ids=(STARVLA_TINY_OFT.head.query_token_id,) * 9))
PRESETS.update({
    "starvla-tiny": PRESETS["xr0-tiny"].replace(
        name="starvla-tiny", action_experts=(STARVLA_TINY_PI_V3,), **_STARVLA_TINY),
    "starvla-tiny-e3": PRESETS["xr0-tiny"].replace(
        name="starvla-tiny-e3", action_experts=(STARVLA_TINY_PI_V3, STARVLA_TINY_GR00T),
        **_STARVLA_TINY),
    "starvla-tiny-e4": PRESETS["xr0-tiny"].replace(
        name="starvla-tiny-e4",
        action_experts=(STARVLA_TINY_PI_V3, STARVLA_TINY_GR00T, STARVLA_TINY_OFT), **_STARVLA_TINY),
    "starvla": PRESETS["xr0"].replace(
        name="starvla", action_experts=(STARVLA_PI_V3,), action_horizon=16, action_dim=7,
        qwen=dataclasses.replace(PRESETS["xr0"].qwen,
                                 action_query_ids=(STARVLA_OFT.head.query_token_id,) * 9)),
})


def is_starvla(config: ModelConfig) -> bool:
    """The action experts are StarVLA heads on the prefill's hidden states (docs/starvla.md)."""
    return any(e.kind != "kv-layerwise" for e in config.action_experts)


def frame_unsupported_reason(config: ModelConfig) -> str | None:
    """Why the engine cannot run ``config`` (None: it can). A frame runs either the first
    kv-layerwise expert (pi0.5, the Xiaomi-Robotics-0 DiT) or every StarVLA head in turn."""
    kinds = {e.kind for e in config.action_experts}
    if is_starvla(config) and "kv-layerwise" in kinds:
        return (f"model {config.name!r}: a frame runs kv-layerwise experts or StarVLA heads "
                f"({', '.join(sorted(kinds - {'kv-layerwise'}))}), not both (docs/starvla.md)")
    return None


def head_names(config: ModelConfig) -> tuple[str, ...]:
    """The action chunks a frame gives (FrameOutput.chunks' keys, in order; the first is
    FrameOutput.actions): "action" for the kv-layerwise expert; pi_v3 / gr00t / oft for the
    StarVLA heads (hidden-crossattn layerwise / last, regress), numbered from the second alike."""
    if not is_starvla(config):
        return ("action",)
    names: list[str] = []
    for e in config.action_experts:
        base = "oft" if e.kind == "regress" else \
            ("pi_v3" if e.head.source == "layerwise" else "gr00t")
        n = sum(1 for x in names if x == base or x.startswith(base + "_"))
        names.append(base if n == 0 else f"{base}_{n + 1}")
    return tuple(names)


def noise_rows(config: ModelConfig) -> int:
    """Rows of a frame's noise [rows, action_dim]: the chunk (kv-layerwise), or every DiT
    head's chunk one after the other (StarVLA: each head its own rows, in head order)."""
    if not is_starvla(config):
        return config.action_horizon
    return sum(e.head.horizon for e in config.action_experts if e.kind == "hidden-crossattn")


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


# -- engine knobs -------------------------------------------------------------------------------
# Each EngineConfig field once: default, range, unit, meaning, live or fixed, and its names in
# the node (param) and on the command line (flag). EngineConfig, the node's parameters, the
# tools' flags, config/oxygen.yaml and the docs' parameter table follow from this table
# (engine/knobs.py; `python -m oxygen_ros.node.params --write` regenerates the files).
ENGINE_KNOBS: tuple[Knob, ...] = (
    Knob("mode", str, "oxygen", "scheduling mode: oxygen (one prefill per frame shared by the "
         "action expert and k batched decode steps) or a baseline: shared, isolated, parallel "
         "(engine/modes.py)", choices=MODES, param="mode", flag="--mode"),
    Knob("decode_steps_per_frame", int, 4, "batched decode steps per control frame",
         (1, 1024), symbol="k", param="decode_steps_per_frame", param_range=(1, 64), flag="--k"),
    Knob("max_decode_steps", int, 12, "max new tokens per language request (memory, answers)",
         (1, 4096), unit="tokens", symbol="N", param="max_decode_steps", param_range=(1, 512),
         flag="--N"),
    Knob("denoise_steps", int, 10, "flow-matching denoise steps per action chunk", (1, 1000),
         symbol="S", param="denoise_steps", param_range=(1, 100), flag="--S"),
    Knob("max_active_requests", int, 32, "language requests decoding at once (batch cap)",
         (1, 4096), param="max_active_requests", param_range=(1, 256), flag="--max-active"),
    Knob("max_waiting_requests", int, 64, "language requests waiting for admission; beyond it "
         "the lowest-priority, newest one is refused with a reason (live state stays bounded "
         "when asks outpace decoding)", (1, 1 << 16)),
    Knob("memory_every_n_frames", int, 1, "one textual memory request every n frames (tools: 0 = "
         "none; the node: memory.enabled false)", (0, None), symbol="M",
         param="memory.every_n_frames", param_range=(1, 100_000), flag="--memory-every"),
    Knob("memory_prompt", str, "Memory: what happened?\n", "prompt of memory requests",
         nonempty=True, param="memory.prompt", flag="--memory-prompt"),
    Knob("instruction", str, "pick up the cube", "task instruction (the node: also set by "
         "~/instruction)", nonempty=True, param="instruction"),
    Knob("target_action_hz", float, 0.0, "action-rate target (0 = off): oxygen mode then "
         "chooses k per frame in [k_min, decode_steps_per_frame] from the stage costs measured "
         "so far, so frames fit 1/target on average (engine/rate_control.py); infeasible even at "
         "k_min: FrameStats.target_feasible false + engine diagnostic WARN",
         (0.0, MAX_TARGET_ACTION_HZ), unit="Hz", param="target_action_hz",
         param_range=(0.0, 1000.0)),
    Knob("k_min", int, 1, "fewest decode steps per frame under target_action_hz (language "
         "never starves); at most decode_steps_per_frame when a target is set", (1, 1024),
         param="k_min", param_range=(1, 64)),
    Knob("target_strict", bool, False, "under target_action_hz, true: every frame predicted "
         "to fit 1/target by itself (actions run up to a decode step faster than asked); false: "
         "the mean frame fits, one frame may run over by about a decode step (the carried "
         "credit)", param="target_strict"),
    Knob("image_resize", str, "pad", "how a camera image becomes the model's square input "
         "(engine/images.py): pad = resize keeping the aspect ratio with black bars (openpi / "
         "LeRobot resize-with-pad, what pi0.5 was trained on); stretch = resize to the square; "
         "docs/cameras.md",
         choices=IMAGE_RESIZE, param="image_resize", flag="--image-resize"),
    # Real-time chunking (engine/rtc.py, docs/rtc.md): applied to frames whose observation
    # carries an ActionPrior (the node's chunk_blend rtc, oxygen-replay --chunk-blend rtc).
    Knob("rtc_method", str, "guided", "chunk_blend rtc: guided (inference-time guidance) or "
         "inpaint (checkpoints trained with training-time RTC)", choices=RTC_METHODS,
         param="rtc.method", flag="--rtc-method"),
    Knob("rtc_jacobian", str, "identity", "rtc guided: the correction is the weighted error "
         "(identity, no backward pass) or its vector-Jacobian product through the action expert "
         "(vjp, one backward pass per denoise step)", choices=RTC_JACOBIANS,
         param="rtc.jacobian", flag="--rtc-jacobian"),
    Knob("rtc_max_guidance", float, 10.0, "rtc guided: beta, the guidance weight's cap "
         "(0 = unguided)", (0.0, MAX_GUIDANCE), param="rtc.max_guidance",
         flag="--rtc-max-guidance"),
    Knob("rtc_execution_horizon", int, 0, "rtc: steps of the executed leftover the new chunk is "
         "pulled toward (weight 1 before d, a ramp to 0 at this step; 0 = all of it)", (0, 4096),
         unit="steps", param="rtc.execution_horizon", flag="--rtc-execution-horizon"),
    # fixed once the engine is built
    Knob("block_size", int, 16, "KV cache block size", choices=(1, 2, 4, 8, 16, 32, 64, 128, 256),
         unit="tokens", live=False),
    Knob("num_blocks", int, 0, "KV pool blocks (0 = sized from the model, max_decode_steps and "
         "max_active_requests when the engine is built)", (0, None), live=False,
         param="kv.num_blocks", param_range=(0, 10_000_000)),
    Knob("action_head", str, "", "the action head whose chunk is FrameOutput.actions (what the "
         "node commands and sends on ~/action_chunk): one of the model's heads (action for pi0.5 "
         "and Xiaomi-Robotics-0; pi_v3, gr00t, oft for StarVLA presets: docs/starvla.md); empty "
         "= the model's first", live=False, param="model.action_head", flag="--action-head"),
    Knob("seed", int, 0, "seed of the random weights, noise and synthetic inputs", live=False,
         flag="--seed"),
    Knob("device", str, "cpu", "cpu or cuda[:N]", nonempty=True, live=False,
         param="model.device", flag="--device"),
    Knob("dtype", str, "float32", "weight / KV dtype", choices=DTYPES, live=False,
         param="model.dtype", flag="--dtype"),
    Knob("attention_backend", str, "auto", "paged attention kernels: auto (cpp on CPU, triton "
         "on CUDA), cpp, triton or reference", choices=ATTENTION_BACKENDS, live=False,
         flag="--attention-backend"),
    Knob("compile_denoise", bool, False, "torch.compile the action expert's denoising step "
         "(first frame slower)", live=False, flag="--compile"),
    Knob("cuda_graphs", bool, False, "decode steps and the denoise loop through captured CUDA "
         "graphs (engine/graphs.py; padded batches, static buffers); on CPU the same code runs "
         "as a stand-in", live=False),
    Knob("linear_layout", str, "standard", "decoder projections as nn.Linear [out, in] weights "
         "(standard, F.linear) or [in, out] copies for x @ w (transposed; faster at one token on "
         "some CPU BLAS builds); one layout in every mode of a process", choices=LINEAR_LAYOUTS,
         live=False, flag="--linear-layout"),
)
KNOBS: dict[str, Knob] = knob_table(ENGINE_KNOBS)


def _default(field: str) -> Any:
    return KNOBS[field].default


@dataclass
class EngineConfig:
    """Scheduling knobs; each field's default, range and meaning is its Knob in ENGINE_KNOBS.
    The live ones (k, N, S, mode, memory, target, rtc ...) may change between frames."""

    mode: str = _default("mode")
    decode_steps_per_frame: int = _default("decode_steps_per_frame")  # k
    max_decode_steps: int = _default("max_decode_steps")  # N
    denoise_steps: int = _default("denoise_steps")  # S
    max_active_requests: int = _default("max_active_requests")
    max_waiting_requests: int = _default("max_waiting_requests")
    memory_every_n_frames: int = _default("memory_every_n_frames")  # M
    memory_prompt: str = _default("memory_prompt")
    instruction: str = _default("instruction")
    block_size: int = _default("block_size")
    num_blocks: int = _default("num_blocks")
    action_head: str = _default("action_head")
    seed: int = _default("seed")
    device: str = _default("device")
    dtype: str = _default("dtype")
    attention_backend: str = _default("attention_backend")
    compile_denoise: bool = _default("compile_denoise")
    cuda_graphs: bool = _default("cuda_graphs")
    linear_layout: str = _default("linear_layout")
    target_action_hz: float = _default("target_action_hz")
    k_min: int = _default("k_min")
    target_strict: bool = _default("target_strict")
    image_resize: str = _default("image_resize")
    rtc_method: str = _default("rtc_method")
    rtc_jacobian: str = _default("rtc_jacobian")
    rtc_max_guidance: float = _default("rtc_max_guidance")
    rtc_execution_horizon: int = _default("rtc_execution_horizon")

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for knob in ENGINE_KNOBS:
            reason = knob.reason(getattr(self, knob.field))
            if reason:
                raise ValueError(reason)
        # what one knob's range cannot say
        if self.target_action_hz and self.k_min > self.decode_steps_per_frame:
            raise ValueError(f"k_min ({self.k_min}) must not exceed decode_steps_per_frame "
                             f"({self.decode_steps_per_frame}), which is k_max under a target")
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise ValueError(f"device must be cpu or cuda[:N], got {self.device!r}")

    def replace(self, **changes: Any) -> "EngineConfig":
        return dataclasses.replace(self, **changes)
