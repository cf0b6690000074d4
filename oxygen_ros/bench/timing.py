"""The timing and memory helpers every benchmark uses, public and in one place (the sweep, the
profiles, bench/suite/memory.py and the benchmarks in bench/suite/)."""
from __future__ import annotations

import os
import resource
import statistics
import time
from typing import Callable


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median milliseconds of `repeats` calls of `fn`, after one call not timed (first calls
    allocate and pick kernels)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def rss_bytes() -> int:
    """This process's resident set now (Linux /proc/self/statm, what psutil reads there too)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """Peak resident set of this process so far (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
