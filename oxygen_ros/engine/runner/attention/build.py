"""Pre-compile the paged attention op (run by scripts/setup.sh): `oxygen-dev attention-op`."""
from __future__ import annotations

import argparse
import time

from .paged import build_directory, load_cpp_op


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)  # no arguments: --help only
    start = time.perf_counter()
    ok = load_cpp_op(verbose=False)
    took = time.perf_counter() - start
    print(f"paged attention op: {'ready' if ok else 'FAILED'} in {took:.1f} s ({build_directory()})")
    return 0 if ok else 1
