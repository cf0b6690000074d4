"""oxygen-replay's output bag: the node's output topics for every replayed frame (the chunks,
the joint commands, the texts and frame_stats), written on the recorded clock."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..robot.frame_stats import frame_stats_fields
from . import messages as M
from .replay import ReplayConfig, ReplayResult
from .typestore import FRAME_STATS, JOINT_STATE, TEXT_MEMORY, TRAJECTORY
from .writer import BagWriter


def write_outputs(path: Path, storage: str, res: ReplayResult, cfg: ReplayConfig, node: str,
                  clip: Any = None) -> dict:
    """The node's output topics for every replayed frame; returns counts. `clip`: the joint
    limits' clip of the player (CommandConfig.clip): ~/action_chunk carries what the node's
    does, clipped like ~/joint_command."""
    w = BagWriter(path, storage)
    s = w.store
    dt = cfg.step_s
    clip = clip or (lambda values: values)
    robot = cfg.robot
    names, field = list(robot.command_names), robot.command_field  # as the node publishes them
    rows: list[tuple[int, str, str, Any]] = []
    rate, tps, prev = 0.0, 0.0, None
    texts = {"memory": 0, "answer": 0}
    for fr in res.frames + res.drained:
        out = fr.out
        drained = any(fr is d for d in res.drained)
        for up in out.updates:
            kind = "memory" if up.kind == "memory" else "answer"
            texts[kind] += bool(up.is_final)
            src = res.source_ns.get(up.birth_frame, fr.header_ns)
            rows.append((fr.done_ns, f"{node}/{kind}", TEXT_MEMORY, M.text_memory(
                s, src, request_id=int(up.id), kind=kind, prompt=up.prompt, text=up.text,
                token_count=int(up.num_tokens), is_final=bool(up.is_final),
                frames_spanned=int(up.frames_spanned), source_frame=int(up.birth_frame),
                finish_reason=(up.finish_reason or "") if up.is_final else "")))
        if drained:
            continue
        if prev is not None:  # the node's smoothed rates, on the recorded clock
            d = max((fr.done_ns - prev) * 1e-9, 1e-6)
            rate = 0.8 * rate + 0.2 / d if rate else 1 / d
            tps = 0.8 * tps + 0.2 * out.tokens_this_frame / d
        prev = fr.done_ns
        # the chunk goes out when the engine hands it over, before the frame's language work
        rows.append((fr.ready_ns, f"{node}/action_chunk", TRAJECTORY,
                     M.trajectory(s, clip(fr.chunk), names, fr.header_ns, dt, field=field)))
        for name, values in fr.heads.items():  # the node's ~/action_chunk/<head> topics
            rows.append((fr.ready_ns, f"{node}/action_chunk/{name}", TRAJECTORY,
                         M.trajectory(s, clip(values), names, fr.header_ns, dt, field=field)))
        rows.append((fr.done_ns, f"{node}/frame_stats", FRAME_STATS,
                     M.frame_stats(s, fr.header_ns, **frame_stats_fields(out, rate, tps))))
    for ns, values, _ in res.commands:
        rows.append((ns, f"{node}/joint_command", JOINT_STATE, M.joint_state(s, names, values, ns, field)))
    rows.sort(key=lambda r: r[0])
    try:
        for ns, topic, typ, msg in rows:
            w.write(topic, typ, msg, ns)
    finally:
        w.close()
    return {"memories_final": texts["memory"], "answers_final": texts["answer"],
            "commands": len(res.commands)}
