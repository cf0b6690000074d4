"""Triton's CPU interpreter for the kernel tests in this folder only.

TRITON_INTERPRET=1 has to be set when triton is first imported (triton.jit picks interpreter or
compiler as it decorates, triton's own library functions included) and again whenever a kernel
is launched (the launch reads it too). So: set while this conftest imports the kernel module,
restored right after, and set again around each test of this folder by an autouse fixture; the
rest of the run never sees it (on a CPU-only machine nothing else uses triton).
"""
from __future__ import annotations

import os

import pytest

_previous = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"
try:
    from oxygen_ros.engine.attention import triton_paged
finally:
    if _previous is None:
        del os.environ["TRITON_INTERPRET"]
    else:
        os.environ["TRITON_INTERPRET"] = _previous

if not triton_paged.INTERPRETED:  # imported earlier in this process without the interpreter
    raise RuntimeError("oxygen_ros.engine.attention.triton_paged was imported before this conftest "
                       "without TRITON_INTERPRET=1; run the Triton tests in their own process")


@pytest.fixture(autouse=True)
def triton_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
