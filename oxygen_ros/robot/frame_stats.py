"""THE FrameOutput -> FrameStats mapping, as plain field values: the node's ~/frame_stats
(node/conversions.py) and oxygen-replay's bags (bags/replay_outputs.py) both fill their message
from this one function, so a replayed bag reports what the robot's did (target_feasible included)."""
from __future__ import annotations

from typing import Any


def frame_stats_fields(out: Any, action_rate_hz: float = 0.0, tokens_per_s: float = 0.0) -> dict[str, Any]:
    """Every FrameStats field but the header, from an engine FrameOutput and the caller's
    smoothed rates (the node's and the replay's own clocks)."""
    t = out.timings_ms
    return {
        "frame": int(out.frame), "mode": str(out.mode),
        "k": int(out.k), "n": int(out.n), "s": int(out.s),
        "frame_ms": float(out.frame_ms),
        "vision_prefill_ms": float(t.get("vision_prefill", 0.0)),
        "denoise_ms": float(t.get("denoise", 0.0)),
        "decode_ms": float(t.get("decode", 0.0)),
        "kv_ms": float(t.get("kv", 0.0)),
        "sched_ms": float(t.get("sched", 0.0)),
        "batch_size": int(out.batch_size),
        "tokens_this_frame": int(out.tokens_this_frame),
        "waiting_requests": int(out.num_waiting),
        "action_rate_hz": float(action_rate_hz),
        "tokens_per_s": float(tokens_per_s),
        "kv_blocks_used": int(out.kv.blocks_used),
        "kv_blocks_total": int(out.kv.blocks_total),
        "kv_bytes_used": int(out.kv.bytes_used),
        "target_action_hz": float(out.target_action_hz),
        "k_chosen": int(out.k_chosen),
        "target_feasible": bool(out.target_feasible),
    }
