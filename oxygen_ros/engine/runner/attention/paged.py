"""Paged attention over the unified KV pool: a C++ CPU op and a Triton kernel (triton_paged.py,
CUDA) that read blocks in place, and a gather-based reference (copies; used to check both and on
devices without either)."""
from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)

_SOURCE = Path(__file__).parent / "csrc" / "paged_attention.cpp"
_lock = threading.Lock()
_loaded: bool | None = None
# torch's build holds a lock file while it compiles and waits, without end, while one exists: a
# build killed mid-way (Ctrl-C during setup) left one and every later start hung. A compile
# takes 30-60 s here; a lock this old belongs to no build that is still running.
STALE_LOCK_S = 600.0


def build_directory() -> Path:
    """Where the compiled op is cached (one compile per machine, ~30-60 s on 2 cores)."""
    env = os.environ.get("OXYGEN_EXTENSIONS_DIR")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "oxygen_ros" / f"torch-{torch.__version__}"


def clear_stale_lock(build: Path, max_age_s: float = STALE_LOCK_S) -> bool:
    """Remove `build`'s lock file when it is older than `max_age_s` (a killed build's; see
    STALE_LOCK_S), with a warning; True if it did. A younger lock is another process's build:
    torch waits for it."""
    lock = build / "lock"
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return False
    if age <= max_age_s:
        return False
    log.warning("removing a stale build lock %s (%.0f s old: a build that was killed)", lock, age)
    lock.unlink(missing_ok=True)
    return True


def load_cpp_op(verbose: bool = False) -> bool:
    """Compile (first time) and load the C++ op; False, with a logged reason, if that fails."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        try:
            # lazy: the C++ toolchain, only to build the CPU op
            from torch.utils import cpp_extension

            # The source's hash in the name and one build folder per name: checkouts with
            # different sources sharing the cache (worktrees, an upgrade) and the two flag sets
            # never overwrite each other's objects (ninja names the object after the source).
            digest = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:10]
            # The op is compiled on the machine that runs it, so -march=native is safe and
            # gives the dot products the host's vector width; fall back if a compiler lacks it.
            for arch in (["-march=native"], []):
                name = f"oxygen_paged_attention_{digest}" + ("_native" if arch else "")
                build = build_directory() / name
                build.mkdir(parents=True, exist_ok=True)
                clear_stale_lock(build)
                try:
                    cpp_extension.load(
                        name=name,
                        sources=[str(_SOURCE)],
                        extra_cflags=["-O3", "-fopenmp", "-fopenmp-simd", *arch],
                        extra_ldflags=["-fopenmp"],
                        build_directory=str(build),
                        is_python_module=False,
                        verbose=verbose,
                    )
                    break
                except Exception as exc:
                    if not arch:
                        raise
                    log.warning("building with -march=native failed (%s); retrying without", exc)
            _loaded = hasattr(torch.ops.oxygen, "paged_attention")
            if _loaded:
                _register_fake()
        except Exception as exc:  # a missing compiler must not take the engine down
            log.warning("paged attention C++ op unavailable (%s); using the reference path", exc)
            _loaded = False
        return _loaded


def _register_fake() -> None:
    """Shape function so torch.compile can trace through the op without running it."""
    try:
        torch.library.register_fake("oxygen::paged_attention")(
            lambda q, k_cache, v_cache, block_tables, q_row, q_len, scale: torch.empty_like(q))
    except RuntimeError:  # already registered in this process
        pass


def paged_attention_cpp(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                        block_tables: torch.Tensor, q_row: torch.Tensor, q_len: torch.Tensor,
                        scale: float) -> torch.Tensor:
    return torch.ops.oxygen.paged_attention(q, k_cache, v_cache, block_tables, q_row, q_len, scale)


def paged_attention_reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                              block_tables: torch.Tensor, q_row: torch.Tensor, q_len: torch.Tensor,
                              scale: float) -> torch.Tensor:
    """Same contract as the op, by gathering each query's blocks into a contiguous copy."""
    nb, bs, hkv, d = k_cache.shape
    tables = block_tables.long()[q_row.long()]  # [T, MB]
    max_len = tables.shape[1] * bs
    k = k_cache[tables].reshape(q.shape[0], max_len, hkv, d).transpose(1, 2)
    v = v_cache[tables].reshape(q.shape[0], max_len, hkv, d).transpose(1, 2)
    visible = torch.arange(max_len, device=q.device)[None, :] < q_len.long()[:, None]
    out = F.scaled_dot_product_attention(
        q[:, :, None, :].float(), k.float(), v.float(), attn_mask=visible[:, None, None, :],
        scale=scale, enable_gqa=True,
    )
    return out[:, :, 0, :].to(q.dtype)


def _triton_available(device: torch.device) -> str | None:
    """None when the Triton kernel can serve `device`, else the reason it cannot."""
    try:
        from . import triton_paged  # lazy: triton, absent or broken on some machines
    except Exception as exc:  # triton missing or broken: say so, never a traceback at a frame
        return f"triton is not importable ({exc}); pip install the version pinned in requirements.txt"
    if device.type == "cpu" and not triton_paged.INTERPRETED:
        return ("the Triton kernel runs on the CPU only in Triton's interpreter: set TRITON_INTERPRET=1 "
                "before the engine is imported (slow; for tests)")
    return None


def select_backend(name: str, device: torch.device | str) -> str:
    """auto: 'cpp' on CPU when the op loads (else 'reference'); 'triton' on CUDA when triton imports
    (else 'reference', with a warning). An explicit backend that cannot serve the device raises."""
    device = torch.device(device)
    is_cpu = device.type == "cpu"
    if name == "reference":
        return "reference"
    if name == "cpp":
        if not is_cpu:
            raise ValueError("attention_backend 'cpp' is a CPU op; use 'triton', 'reference' or 'auto' on CUDA")
        if not load_cpp_op():
            raise ValueError("attention_backend 'cpp' requested but the C++ op failed to build")
        return "cpp"
    if name == "triton":
        reason = _triton_available(device)
        if reason is not None:
            raise ValueError(f"attention_backend 'triton' unavailable: {reason}")
        return "triton"
    if is_cpu:
        return "cpp" if load_cpp_op() else "reference"
    reason = _triton_available(device)
    if reason is None:
        return "triton"
    log.warning("attention on %s falls back to the gathering reference: %s", device, reason)
    return "reference"


def paged_attention(backend: str, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    block_tables: torch.Tensor, q_row: torch.Tensor, q_len: torch.Tensor,
                    scale: float, seq_start: torch.Tensor | None = None) -> torch.Tensor:
    """seq_start (int32 [S+1]): the queries [seq_start[s], seq_start[s+1]) share one q_row
    (denoise action tokens, packed prompt suffixes): the Triton backend then runs its
    query-tiled kernel; the others need no such hint."""
    if backend == "triton":
        # lazy: triton, absent or broken on some machines
        from .triton_paged import paged_attention_triton

        return paged_attention_triton(q, k_cache, v_cache, block_tables, q_row, q_len, scale,
                                      seq_start=seq_start)
    fn = paged_attention_cpp if backend == "cpp" else paged_attention_reference
    return fn(q, k_cache, v_cache, block_tables, q_row, q_len, scale)
