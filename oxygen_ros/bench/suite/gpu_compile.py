"""Ahead-of-time compile check of every Triton kernel the engine can launch, for GPU targets this
machine does not have: no driver, no GPU, only triton's bundled ptxas / ptxas-blackwell.

For each preset's attention shapes (query heads, KV heads, head dim of the VLM and of each action
expert that has its own heads) and each dtype, the launch configurations come from the same
functions the kernel wrappers call (engine/runner/attention/triton_paged.py: `launches`): the per-query
kernel single pass and split-KV, the combine for each split-count padding, the query-tiled
kernel. Each is compiled with triton.compile for `GPUTarget("cuda", arch, 32)`; registers and
local memory per thread (LOCAL + STACK: spills, as these kernels keep no arrays) come from
cuobjdump on the cubin, shared memory from the compiled kernel's metadata (what the launch
asks for). Exit 1 on a compile failure, on spills (in any dtype listed: bf16, fp16, float32), or
shared memory over 99 KB (the per-block limit of the smallest target, sm_120).

    oxygen-bench gpu-compile --arch sm_87,sm_90,sm_110,sm_120 --dtype bfloat16,float16

Pointers are compiled as 16-byte aligned (as torch allocates); integer arguments unspecialised
(the runtime JIT also specialises strides divisible by 16: it knows more, not less). triton's
cache (~/.triton/cache, TRITON_CACHE_DIR) keeps the compiled kernels: a second run reads them.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from oxygen_ros.engine.config import DTYPES as DTYPE_NAMES, PRESETS

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}
_TRITON_TYPE = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
MAX_SHARED = 99 * 1024
DEFAULT_PRESETS = tuple(PRESETS)


def attention_shapes(preset: str) -> list[tuple[int, int, int]]:
    """(Hq, Hkv, D) of every attention call over the pool: the VLM's heads, and an action
    expert's own heads where it has them (they attend to the same K/V)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
    c = PRESETS[preset]
    shapes = [(c.num_heads, c.num_kv_heads, c.head_dim)]
    for expert in c.action_experts:
        heads = getattr(expert, "num_heads", None)
        if heads and (heads, c.num_kv_heads, c.head_dim) not in shapes:
            shapes.append((heads, c.num_kv_heads, c.head_dim))
    return shapes


def _signature(fn, launch, dtype: torch.dtype) -> dict[str, str]:
    """triton types of the kernel's arguments: data pointers in the run's dtype, the split
    partials and softmax statistics float32, tables / rows / lengths int32."""
    data = _TRITON_TYPE[dtype]
    fp32_ptrs = {"m_ptr", "l_ptr", "part_ptr"}
    if launch.kernel == "attend" and dict(launch.constexprs)["SPLIT"]:
        fp32_ptrs.add("out_ptr")
    int_ptrs = {"tables_ptr", "q_row_ptr", "q_len_ptr", "seq_start_ptr"}
    consts = dict(launch.constexprs)
    sig = {}
    for name in fn.arg_names:
        if name in consts:
            sig[name] = "constexpr"
        elif name.endswith("_ptr"):
            sig[name] = "*i32" if name in int_ptrs else "*fp32" if name in fp32_ptrs else f"*{data}"
        else:
            sig[name] = "fp32" if name == "qk_scale" else "i32"
    return sig


@dataclass
class Result:
    arch: str
    dtype: str
    preset: str
    kernel: str
    constexprs: str
    num_warps: int
    registers: int | None = None
    spill_bytes: int | None = None  # local memory per thread
    shared_bytes: int | None = None
    seconds: float = 0.0
    error: str | None = None

    def failed(self) -> str | None:
        if self.error:
            return "compile failed"
        if self.spill_bytes:
            return "spills"
        if (self.shared_bytes or 0) > MAX_SHARED:
            return "shared memory"
        return None


def _cuobjdump() -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def resource_usage(cubin: bytes) -> dict[str, int]:
    """REG, LOCAL, STACK, SHARED of the cubin's one function (cuobjdump --dump-resource-usage)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        text = subprocess.run([_cuobjdump(), "--dump-resource-usage", f.name], check=True,
                              capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    usage = {}
    for line in text.splitlines():
        if "REG:" in line:
            for field in line.split():
                key, _, value = field.partition(":")
                if value.isdigit():
                    usage[key] = int(value)
    return usage


def spill_bytes(usage: dict[str, int]) -> int:
    """Local memory per thread: ptxas reports spilled registers as LOCAL, or as a STACK frame
    (seen for float32 tiles too large for the register file); these kernels keep no arrays."""
    return usage.get("LOCAL", 0) + usage.get("STACK", 0)


def compile_one(arch: int, launch, dtype: torch.dtype) -> tuple[dict[str, int], int]:
    """(cuobjdump usage, metadata shared bytes) of one launch configuration compiled for sm_<arch>."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from oxygen_ros.engine.runner.attention.triton_paged import KERNELS

    fn = KERNELS[launch.kernel]
    sig = _signature(fn, launch, dtype)
    consts = dict(launch.constexprs)
    index = {name: i for i, name in enumerate(fn.arg_names)}
    src = ASTSource(fn, sig, constexprs={(index[k],): v for k, v in consts.items()},
                    attrs={(index[n],): [["tt.divisibility", 16]] for n, t in sig.items()
                           if t.startswith("*")})
    kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                            options=dict(num_warps=launch.num_warps))
    return resource_usage(kernel.asm["cubin"]), int(kernel.metadata.shared)


def run(archs: list[int], dtypes: list[str], presets: list[str], block_size: int) -> list[Result]:
    from oxygen_ros.engine.runner.attention import triton_paged

    if triton_paged.INTERPRETED:
        raise SystemExit("gpu_compile compiles for GPU targets: unset TRITON_INTERPRET")
    results, seen = [], {}
    for arch in archs:
        for dtype_name in dtypes:
            dtype = DTYPES[dtype_name]
            for preset in presets:
                for hq, hkv, d in attention_shapes(preset):
                    for launch in triton_paged.launches(hq, hkv, d, block_size, dtype):
                        r = Result(f"sm_{arch}", dtype_name, preset, launch.kernel,
                                   " ".join(f"{k}={int(v)}" for k, v in launch.constexprs),
                                   launch.num_warps)
                        key = (arch, dtype_name, launch)
                        if key in seen:  # the same configuration for another preset
                            prev = seen[key]
                            r.registers, r.spill_bytes = prev.registers, prev.spill_bytes
                            r.shared_bytes, r.error = prev.shared_bytes, prev.error
                        else:
                            t0 = time.perf_counter()
                            try:
                                usage, shared = compile_one(arch, launch, dtype)
                                r.registers = usage.get("REG")
                                r.spill_bytes = spill_bytes(usage)
                                r.shared_bytes = shared
                            except Exception as exc:  # reported per kernel, the run goes on
                                r.error = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
                            r.seconds = time.perf_counter() - t0
                            seen[key] = r
                        results.append(r)
    return results


def table(results: list[Result]) -> str:
    lines = ["| arch | dtype | preset | kernel | constexprs | warps | regs | spill B | shared B | |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        verdict = r.failed() or "ok"
        cells = [r.arch, r.dtype, r.preset, r.kernel, r.constexprs, str(r.num_warps),
                 str(r.registers), str(r.spill_bytes), str(r.shared_bytes),
                 verdict if not r.error else f"{verdict}: {r.error}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _archs(text: str) -> list[int]:
    out = []
    for a in text.split(","):
        a = a.strip().lower().removeprefix("sm_")
        if not a.isdigit() or not 70 <= int(a) <= 130:
            raise argparse.ArgumentTypeError(f"--arch: expected sm_XY (e.g. sm_90), got {a!r}")
        out.append(int(a))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", type=_archs, default=_archs("sm_87,sm_90,sm_110,sm_120"))
    p.add_argument("--dtype", default="bfloat16,float16",
                   help="comma-separated: bfloat16, float16, float32")
    p.add_argument("--presets", default=",".join(DEFAULT_PRESETS))
    p.add_argument("--block-size", type=int, default=16, help="KV block size (EngineConfig's)")
    p.add_argument("--json", default=None, help="also write the results to this file")
    a = p.parse_args(argv)
    dtypes = [d.strip() for d in a.dtype.split(",") if d.strip()]
    bad = [d for d in dtypes if d not in DTYPES]
    if bad:
        p.error(f"--dtype: unknown {bad}; choose from {sorted(DTYPES)}")
    presets = [x.strip() for x in a.presets.split(",") if x.strip()]
    for preset in presets:
        try:
            attention_shapes(preset)
        except ValueError as exc:
            p.error(str(exc))
    if a.block_size not in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        p.error(f"--block-size must be a power of two <= 256, got {a.block_size}")
    t0 = time.perf_counter()
    results = run(a.arch, dtypes, presets, a.block_size)
    # float32 uses smaller tiles (triton_paged.attend_launch / tiled_launch) and is held to no
    # spills as well when listed
    print(table(results), end="")
    failed = [r for r in results if r.failed()]
    distinct = sum(1 for r in results if r.seconds)
    print(f"\n{len(results)} kernel configurations ({distinct} distinct, the rest shared between "
          f"presets) for {', '.join(f'sm_{x}' for x in a.arch)} in {time.perf_counter() - t0:.1f} s: "
          + (f"{len(failed)} FAILED" if failed else "all compile, no spills"))
    if a.json:
        Path(a.json).write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 1 if failed else 0
