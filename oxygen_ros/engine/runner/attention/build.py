"""Pre-compile the paged attention op (run by scripts/setup.sh): `python -m oxygen_ros.engine.runner.attention.build`."""
from __future__ import annotations

import sys
import time

from .paged import build_directory, load_cpp_op


def main() -> int:
    start = time.perf_counter()
    ok = load_cpp_op(verbose=False)
    took = time.perf_counter() - start
    print(f"paged attention op: {'ready' if ok else 'FAILED'} in {took:.1f} s ({build_directory()})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
