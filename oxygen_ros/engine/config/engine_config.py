"""The engine's knobs (ENGINE_KNOBS, one Knob per EngineConfig field) and EngineConfig, a plain
dataclass a running engine replaces whole through Engine.update_config (which validates the new
one first). Apart from the model schema (engine/config/model_config.py)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .knobs import Knob, knob_table
from .model_config import DTYPES

# The execution modes (engine/core/modes.py): the three baselines, then OxyGen; reports list them
# in this order.
MODES = ("isolated", "parallel", "shared", "oxygen")
# standard: nn.Linear weights [out, in] (F.linear); transposed: [in, out] copies (x @ w)
LINEAR_LAYOUTS = ("standard", "transposed")
# How a camera image that is not model-size becomes the vision tower's square input
# (engine/runner/images.py): pad = openpi / LeRobot resize-with-pad (aspect kept, -1 bars), what pi0.5
# checkpoints were trained on; stretch = resize to the square, aspect ratio lost.
IMAGE_RESIZE = ("pad", "stretch")
MAX_TARGET_ACTION_HZ = 10_000.0
ATTENTION_BACKENDS = ("auto", "cpp", "triton", "reference")
RTC_METHODS = ("guided", "inpaint")  # engine/model/rtc.py
RTC_JACOBIANS = ("identity", "vjp")
MAX_GUIDANCE = 1000.0


# -- engine knobs -------------------------------------------------------------------------------
# Each EngineConfig field once: default, range, unit, meaning, live or fixed, and its names in
# the node (param) and on the command line (flag). EngineConfig, the node's parameters, the
# tools' flags, config/oxygen.yaml and the docs' parameter table follow from this table
# (engine/config/knobs.py; `oxygen-dev param-files --write` regenerates the files).
ENGINE_KNOBS: tuple[Knob, ...] = (
    Knob("mode", str, "oxygen", "scheduling mode: oxygen (one prefill per frame shared by the "
         "action expert and k batched decode steps) or a baseline: shared, isolated, parallel "
         "(engine/core/modes.py)", choices=MODES, param="mode", flag="--mode"),
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
         "so far, so frames fit 1/target on average (engine/core/rate_control.py); infeasible even at "
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
         "(engine/runner/images.py): pad = resize keeping the aspect ratio with black bars (openpi / "
         "LeRobot resize-with-pad, what pi0.5 was trained on); stretch = resize to the square; "
         "docs/cameras.md",
         choices=IMAGE_RESIZE, param="image_resize", flag="--image-resize"),
    # Real-time chunking (engine/model/rtc.py, docs/rtc.md): applied to frames whose observation
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
    Knob("num_blocks", int, 0, "KV pool blocks (0 = sized when the engine is built from the "
         "model, max_decode_steps, decode_steps_per_frame and max_active_requests, requests born "
         "on one frame sharing its prefix: Engine.auto_num_blocks)", (0, None), live=False,
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
         "graphs (engine/runner/graphs.py; padded batches, static buffers; pi0.5 bf16 on an H200: "
         "frames 2-3x faster, docs/gpu.md); on CPU the same code runs as a stand-in", live=False,
         param="model.cuda_graphs", flag="--cuda-graphs"),
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
