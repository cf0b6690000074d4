"""The ROS 2 packaging: package.xml, CMakeLists.txt, the generated messages, the install tree.

Needs the colcon build (scripts/setup.sh) and its environment (source scripts/env.sh);
scripts/test.sh does both.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.ros

TEXT_MEMORY_FIELDS = {
    "header": "std_msgs/Header",
    "request_id": "uint64",
    "kind": "string",
    "prompt": "string",
    "text": "string",
    "token_count": "uint32",
    "is_final": "boolean",
    "frames_spanned": "uint32",
    "source_frame": "uint64",
    "finish_reason": "string",
}

FRAME_STATS_FIELDS = {
    "header": "std_msgs/Header",
    "frame": "uint64",
    "mode": "string",
    "k": "uint32",
    "n": "uint32",
    "s": "uint32",
    "frame_ms": "float",
    "vision_prefill_ms": "float",
    "denoise_ms": "float",
    "decode_ms": "float",
    "kv_ms": "float",
    "sched_ms": "float",
    "batch_size": "uint32",
    "tokens_this_frame": "uint32",
    "waiting_requests": "uint32",
    "action_rate_hz": "float",
    "tokens_per_s": "float",
    "kv_blocks_used": "uint32",
    "kv_blocks_total": "uint32",
    "kv_bytes_used": "uint64",
    "target_action_hz": "float",
    "k_chosen": "uint32",
    "target_feasible": "boolean",
}


def _msgs():
    try:
        from oxygen_ros.msg import FrameStats, TextMemory
    except ImportError as exc:
        if "OXYGEN_ROS_ROOT" not in os.environ:
            pytest.skip(f"oxygen_ros.msg not importable ({exc}): run scripts/setup.sh, source scripts/env.sh")
        raise
    return TextMemory, FrameStats


def _msg_file_fields(name: str) -> dict[str, str]:
    fields = {}
    for line in (REPO_ROOT / "msg" / f"{name}.msg").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            typ, field = line.split()[:2]
            fields[field] = typ
    return fields


def test_msg_files_declare_the_contract_fields():
    tm = _msg_file_fields("TextMemory")
    fs = _msg_file_fields("FrameStats")
    assert list(tm) == list(TEXT_MEMORY_FIELDS)
    assert list(fs) == list(FRAME_STATS_FIELDS)
    assert tm["header"] == fs["header"] == "std_msgs/Header"
    assert tm["is_final"] == "bool"
    assert fs["frame_ms"] == "float32"


def test_text_memory_message_fields():
    TextMemory, _ = _msgs()
    assert TextMemory.get_fields_and_field_types() == TEXT_MEMORY_FIELDS
    from builtin_interfaces.msg import Time

    m = TextMemory()
    m.header.stamp = Time(sec=12, nanosec=34)
    m.header.frame_id = "camera"
    m.request_id = 2**63 + 5
    m.kind = "answer"
    m.prompt = "what is on the table?"
    m.text = "a red cup"
    m.token_count = 3
    m.is_final = True
    m.frames_spanned = 7
    m.source_frame = 41
    m.finish_reason = "stop"
    assert (m.header.stamp.sec, m.request_id, m.text, m.is_final) == (12, 2**63 + 5, "a red cup", True)


def test_frame_stats_message_fields():
    _, FrameStats = _msgs()
    assert FrameStats.get_fields_and_field_types() == FRAME_STATS_FIELDS
    m = FrameStats(frame=9, mode="oxygen", k=2, n=4, s=1, frame_ms=21.5, kv_bytes_used=2**40)
    m.vision_prefill_ms = 5.0
    m.denoise_ms = 10.0
    m.decode_ms = 4.0
    m.kv_ms = 0.5
    m.sched_ms = 0.25
    m.batch_size = 3
    m.tokens_this_frame = 3
    m.waiting_requests = 1
    m.action_rate_hz = 50.0
    m.tokens_per_s = 150.0
    m.kv_blocks_used = 10
    m.kv_blocks_total = 100
    assert (m.frame, m.mode, m.kv_bytes_used) == (9, "oxygen", 2**40)
    assert m.frame_ms == pytest.approx(21.5)


def test_messages_serialize_round_trip():
    TextMemory, FrameStats = _msgs()
    from rclpy.serialization import deserialize_message, serialize_message

    m = TextMemory(request_id=7, kind="memory", text="cup moved left", token_count=4, source_frame=3)
    back = deserialize_message(serialize_message(m), TextMemory)
    assert back == m
    f = FrameStats(frame=1, mode="shared", kv_blocks_total=64)
    assert deserialize_message(serialize_message(f), FrameStats) == f


def test_package_xml():
    from catkin_pkg.package import parse_package

    pkg = parse_package(str(REPO_ROOT / "package.xml"))
    assert pkg.name == "oxygen_ros"
    assert pkg.package_format == 3
    assert pkg.version == "0.1.0"
    assert [str(lic) for lic in pkg.licenses] == ["Apache-2.0"]
    assert pkg.get_build_type() == "ament_cmake"
    buildtool = {d.name for d in pkg.buildtool_depends}
    assert {"ament_cmake", "ament_cmake_python", "rosidl_default_generators"} <= buildtool
    exec_deps = {d.name for d in pkg.exec_depends}
    assert {
        "rclpy", "std_msgs", "sensor_msgs", "trajectory_msgs", "visualization_msgs",
        "diagnostic_msgs", "geometry_msgs", "builtin_interfaces", "lifecycle_msgs",
        "cv_bridge", "launch", "launch_ros", "rosidl_default_runtime",
    } <= exec_deps
    assert "ament_cmake_pytest" in {d.name for d in pkg.test_depends}
    assert "rosidl_interface_packages" in {g.name for g in pkg.member_of_groups}


def test_cmakelists_generates_both_messages():
    text = (REPO_ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"rosidl_generate_interfaces\((.*?)\)", text, re.S)
    assert m, "rosidl_generate_interfaces missing"
    args = m.group(1)
    assert '"msg/TextMemory.msg"' in args and '"msg/FrameStats.msg"' in args
    assert re.search(r"DEPENDENCIES\s+std_msgs\s+builtin_interfaces", args)
    # hand-written modules must be installed after the generated ones (our __init__.py wins)
    assert text.index("rosidl_generate_interfaces(") < text.index("install(DIRECTORY oxygen_ros/")
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    assert "ament_python_install_package" not in code


def test_install_tree():
    _msgs()
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        prefix = Path(get_package_prefix("oxygen_ros"))
    except PackageNotFoundError:
        pytest.fail("oxygen_ros not in the ament index: run scripts/setup.sh and source scripts/env.sh")
    node = prefix / "lib" / "oxygen_ros" / "oxygen_node"
    assert node.is_file() and os.access(node, os.X_OK)
    assert node.read_text().startswith("#!/usr/bin/env python3")
    assert "oxygen_ros.cli.node" in node.read_text()
    share = prefix / "share" / "oxygen_ros"
    assert (share / "package.xml").is_file()
    assert (share / "launch").is_dir() and (share / "config").is_dir()
    # our __init__.py (pkgutil extend_path) replaced the generated one in the install tree
    site = next(prefix.glob("lib/python3*/site-packages/oxygen_ros/__init__.py"))
    assert "extend_path" in site.read_text()


def test_msg_import_from_another_directory(ros_env, tmp_path):
    """Source tree and install tree merge (extend_path) from any working directory."""
    _msgs()
    code = (
        "import oxygen_ros, oxygen_ros.engine\n"
        "from oxygen_ros.msg import TextMemory, FrameStats\n"
        "print(oxygen_ros.__version__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=ros_env,
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0.1.0"


def test_conftest_sets_isolated_ros_domain(ros_env):
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"]
    domain = int(ros_env["ROS_DOMAIN_ID"])
    assert 0 <= domain <= 232
    assert ros_env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"]
