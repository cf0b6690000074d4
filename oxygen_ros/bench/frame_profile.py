"""One engine frame under torch.profiler: where its time goes, op by op (the profile behind a
missed target), and on CUDA how many kernels it launched (launch-bound or not)."""
from __future__ import annotations

import time
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


def profile_frame(step: Callable[[], object], cuda: bool, rows: int = 25) -> dict:
    """Run `step()` (one frame) under the profiler. Returns the op table (top `rows` by self
    time on the device, else on the CPU), totals and the kernel launch count; {"error": ...}
    when the profiler cannot run here (the benchmark goes on without it). An exception from
    `step()` itself propagates."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        prof = profile(activities=activities)
        prof.start()
    except Exception as exc:  # e.g. no CUPTI: report it and lose nothing else
        return {"error": f"profiler did not start: {type(exc).__name__}: {exc}"}
    try:  # an error of the frame itself propagates: it is the engine's, not the profiler's
        t0 = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - t0) * 1e3
    finally:
        try:
            prof.stop()
        except Exception as exc:
            stop_error = f"profiler did not stop: {type(exc).__name__}: {exc}"
        else:
            stop_error = None
    if stop_error:
        return {"error": stop_error}
    events = prof.key_averages()
    device_ms = None
    if cuda:  # the attribute was self_cuda_time_total in older torch
        device_ms = sum(getattr(e, "self_device_time_total", None)
                        or getattr(e, "self_cuda_time_total", 0.0) for e in events) / 1e3
    return {
        "wall_ms": wall_ms,  # with the profiler's own overhead
        "cpu_self_ms": sum(e.self_cpu_time_total for e in events) / 1e3,
        "device_self_ms": device_ms,
        "kernel_launches": sum(e.count for e in events if e.key in _LAUNCHES) if cuda else None,
        "ops": sum(e.count for e in events if e.key.startswith("aten::")),
        "table": _table(events, cuda, rows),
    }


def _table(events, cuda: bool, rows: int) -> str:
    keys = ("self_device_time_total", "self_cuda_time_total") if cuda else ()
    for key in keys + ("self_cpu_time_total",):
        try:
            return events.table(sort_by=key, row_limit=rows)
        except (AttributeError, KeyError, ValueError):  # a sort key this torch does not know
            continue
    return ""
