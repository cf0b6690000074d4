"""Shared pytest setup.

At import (before any test creates a ROS context):
- ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, so no discovery traffic leaves the machine;
- a ROS_DOMAIN_ID of its own for this test run (derived from the PID, 1..100, never 0), unless
  the caller set one: two runs on one domain at once cross-talk.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Triton loaded after MuJoCo has rendered through OSMesa (llvmpipe: its own LLVM) segfaults at
# import (measured: render one ALOHA frame, then `import triton`); loaded first, both work. A test
# file that records demonstrations and then builds an engine met it when run on its own.
if importlib.util.find_spec("triton") is not None:
    import triton  # noqa: F401

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
if not os.environ.get("ROS_DOMAIN_ID", "").strip():
    os.environ["ROS_DOMAIN_ID"] = str(1 + os.getpid() % 100)


def _rclpy_available() -> bool:
    try:
        return importlib.util.find_spec("rclpy") is not None
    except (ImportError, ValueError):
        return False


def pytest_collection_modifyitems(config, items):
    """Skip tests marked `ros` where rclpy cannot be found at all."""
    if _rclpy_available():
        return
    skip = pytest.mark.skip(reason="rclpy not importable: run scripts/setup.sh and source scripts/env.sh")
    for item in items:
        if "ros" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def ros_env() -> dict[str, str]:
    """Environment for subprocesses of a test: this run's ROS domain, localhost discovery,
    and the source tree first on PYTHONPATH (as scripts/env.sh sets it)."""
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"]
    env["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"]
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO_ROOT) not in parts:
        parts.insert(0, str(REPO_ROOT))
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _ros_context():
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context)
    yield context
    rclpy.try_shutdown(context=context)


@pytest.fixture
def ctx():
    """A ROS context of its own for one test (in-process nodes)."""
    yield from _ros_context()


@pytest.fixture(scope="module")
def module_ctx():
    """A ROS context shared by one test module's tests."""
    yield from _ros_context()


def paligemma_like_tokenizer(rows: int, folder: Path) -> Path:
    """tokenizer.json (+ tokenizer_config.json) shaped as transformers' PaliGemma conversion
    writes it: a vocabulary filling the embedding's ``rows`` and ``<image>`` added as a special
    token at id ``rows``, one past them (PaliGemma: 257152 of 257152 rows)."""
    import json

    from tokenizers import AddedToken

    from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

    tok = build_tiny_tokenizer(rows).tok
    tok.add_special_tokens([AddedToken("<image>", special=True, normalized=False)])
    assert tok.token_to_id("<image>") == rows
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}))
    return folder


@pytest.fixture
def image_token_tokenizer(tmp_path):
    """A folder holding a PaliGemma-like tokenizer.json for the tiny preset's 512 rows."""
    return paligemma_like_tokenizer(512, tmp_path / "paligemma_like")
