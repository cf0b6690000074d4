"""Write a bag that looks like a recorded run of the node, with known rates and latencies.

Clock (all integer nanoseconds, so every expected number is exact):
- camera (32x32 rgb8, or `camera_hw`; `camera` = png | jpeg: sensor_msgs/CompressedImage on
  /camera/image_raw/compressed) at CAMERA_HZ, joint states and the reference command at JOINT_HZ, stamps
  on a grid from T0, logged 2 ms after their stamp;
- /oxygen/joint_command every COMMAND_PERIOD_NS, stamp = log time;
- per camera frame one inference: action_chunk + frame_stats stamped with the camera stamp and
  logged CHUNK_DELAY_NS later -> observation -> first command latency is LATENCY_MS;
- a memory request every MEMORY_EVERY frames, final MEMORY_FRAMES frames later;
- /diagnostics at 1 Hz, the control status 'stale' during [HOLD_FROM_S, HOLD_TO_S).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from oxygen_ros.bags import messages as M
from oxygen_ros.bags.typestore import (COMPRESSED_IMAGE, DIAGNOSTICS, FLOAT64_ARRAY, FRAME_STATS, IMAGE,
                                       JOINT_STATE, TEXT_MEMORY, TRAJECTORY)
from oxygen_ros.bags.writer import BagWriter

T0 = 1_700_000_000 * 10**9
MS = 10**6
CAMERA_HZ, JOINT_HZ = 10, 50
COMMAND_PERIOD_NS = 20 * MS
CHUNK_DELAY_NS = 30 * MS
LATENCY_MS = 40.0  # chunk logged at stamp + 30 ms; commands on the 20 ms grid -> stamp + 40 ms
TOKENS_PER_FRAME = 4
MEMORY_EVERY, MEMORY_FRAMES = 5, 3
HOLD_FROM_S, HOLD_TO_S = 1.0, 2.0
JOINTS = ["j0", "j1", "j2"]
HORIZON = 5


def state_at(t_s: float) -> np.ndarray:
    return np.array([np.sin(t_s), np.cos(t_s), 0.1 * t_s], dtype=np.float64)


def write_run(path: Path, storage: str = "mcap", seconds: float = 3.0, image_size: int = 32,
              with_outputs: bool = True, camera: str = "raw",
              camera_hw: tuple[int, int] | None = None, command_type: str = "joint_state") -> dict:
    """Write the run; returns the expected evaluation numbers. `command_type`: the node's
    parameter (joint_state, or float64_array: unstamped values, logged at the command's time)."""
    store = None
    n_cam = int(seconds * CAMERA_HZ)
    rng = np.random.default_rng(0)
    with BagWriter(path, storage) as w:
        store = w.store
        msgs: list[tuple[int, str, str, object]] = []
        for i in range(int(seconds * JOINT_HZ)):
            ns = T0 + i * (10**9 // JOINT_HZ)
            msgs.append((ns + 2 * MS, "/joint_states", JOINT_STATE, M.joint_state(store, JOINTS, state_at((ns - T0) * 1e-9), ns)))
            msgs.append((ns + 2 * MS, "/teleop/joint_command", JOINT_STATE,
                         M.joint_state(store, JOINTS, state_at((ns - T0) * 1e-9 + 0.1), ns)))
        for i in range(n_cam):
            ns = T0 + i * (10**9 // CAMERA_HZ)
            img = rng.integers(0, 256, (*(camera_hw or (image_size, image_size)), 3), dtype=np.uint8)
            if camera == "raw":
                msgs.append((ns + 2 * MS, "/camera/image_raw", IMAGE, M.image(store, img, ns)))
            else:
                msgs.append((ns + 2 * MS, "/camera/image_raw/compressed", COMPRESSED_IMAGE,
                             M.compressed_image(store, img, ns, camera)))
        if with_outputs:
            end = T0 + int(seconds * 1e9)
            for ns in range(T0, end, COMMAND_PERIOD_NS):
                if command_type == "float64_array":
                    msgs.append((ns, "/oxygen/joint_command", FLOAT64_ARRAY, M.float64_array(store, state_at(0))))
                else:
                    msgs.append((ns, "/oxygen/joint_command", JOINT_STATE,
                                 M.joint_state(store, JOINTS, state_at(0), ns)))
            for i in range(n_cam):
                ns = T0 + i * (10**9 // CAMERA_HZ)
                log = ns + CHUNK_DELAY_NS
                msgs.append((log, "/oxygen/action_chunk", TRAJECTORY,
                             M.trajectory(store, np.zeros((HORIZON, 3)), JOINTS, ns, 0.02)))
                msgs.append((log, "/oxygen/frame_stats", FRAME_STATS, M.frame_stats(
                    store, ns, frame=i, mode="oxygen", k=4, n=12, s=10, frame_ms=25.0,
                    vision_prefill_ms=10.0, denoise_ms=8.0, decode_ms=5.0, kv_ms=1.0, sched_ms=1.0,
                    batch_size=3, tokens_this_frame=TOKENS_PER_FRAME, kv_blocks_used=10 + i % 3,
                    kv_blocks_total=64)))
                if i % MEMORY_EVERY == 0 and i + MEMORY_FRAMES < n_cam:
                    fin = T0 + (i + MEMORY_FRAMES) * (10**9 // CAMERA_HZ) + CHUNK_DELAY_NS
                    msgs.append((fin, "/oxygen/memory", TEXT_MEMORY, M.text_memory(
                        store, ns, request_id=i, kind="memory", prompt="Memory:", text=f"memory {i}",
                        token_count=12, is_final=True, frames_spanned=MEMORY_FRAMES, source_frame=i,
                        finish_reason="length")))
            for sec in range(int(seconds) + 1):
                ns = T0 + sec * 10**9
                stale = HOLD_FROM_S <= sec < HOLD_TO_S
                msgs.append((ns, "/diagnostics", DIAGNOSTICS, M.diagnostics(store, ns, [
                    ("oxygen: control", 1 if stale else 0,
                     "stale observation: holding the last command" if stale else "commanding",
                     {"stale_ticks": 50 if sec >= HOLD_TO_S else 0, "control_rate_hz": 50.0})])))
        for log, topic, typ, msg in sorted(msgs, key=lambda m: m[0]):
            w.write(topic, typ, msg, log)
    n_mem = len([i for i in range(n_cam) if i % MEMORY_EVERY == 0 and i + MEMORY_FRAMES < n_cam])
    return {
        "command_rate_hz": 1e9 / COMMAND_PERIOD_NS, "command_period_ms": COMMAND_PERIOD_NS / MS,
        "action_chunks": n_cam, "action_rate_hz": float(CAMERA_HZ),
        "tokens_per_s": TOKENS_PER_FRAME * CAMERA_HZ, "latency_ms": LATENCY_MS,
        "memories": n_mem, "memory_frames": MEMORY_FRAMES,
        "memory_s": MEMORY_FRAMES / CAMERA_HZ + CHUNK_DELAY_NS / 1e9,
        "hold_s": HOLD_TO_S - HOLD_FROM_S, "cameras": n_cam,
    }
