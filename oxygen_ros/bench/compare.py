"""Compare two runs' outputs (oxygen-demo --dump files) request by request and frame by frame.

Greedy tokens must be identical; a difference is accepted only where the first differing token
was a near-tie (top-1 minus top-2 logit below `tie`) in either run. Action chunks of the same
frame must agree within `atol`. `oxygen-bench compare A.json B.json` (bench/suite/compare.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # the engine only for the type: comparing dump files needs no torch
    from ..engine.core.engine import FrameOutput


def collect_requests(outputs: list[FrameOutput]) -> list[dict]:
    """An oxygen-demo --dump file's "requests": every request's tokens and margins, gathered from
    the frames' updates (the engine keeps no history: a request is gone once its final update was
    returned)."""
    reqs: dict[int, dict] = {}
    for o in outputs:
        for u in o.updates:
            r = reqs.setdefault(u.id, {"id": u.id, "frame": u.birth_frame, "kind": u.kind,
                                       "tokens": [], "margins": [], "finish_reason": None,
                                       "admitted_frame": u.admitted_frame})
            r["tokens"].extend(u.new_tokens)
            r["margins"].extend(u.new_margins)
            if u.is_final:
                r["finish_reason"] = u.finish_reason
    return [reqs[i] for i in sorted(reqs)]


@dataclass
class Comparison:
    requests: int = 0
    identical: int = 0
    near_tie_flips: list[tuple[int, int, float]] = field(default_factory=list)  # (id, pos, margin)
    mismatches: list[str] = field(default_factory=list)
    frames: int = 0
    max_action_diff: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def summary(self) -> str:
        return (f"{self.requests} requests: {self.identical} identical, "
                f"{len(self.near_tie_flips)} near-tie flips, {len(self.mismatches)} mismatches; "
                f"{self.frames} frames, max action difference {self.max_action_diff:.2e}")


def compare_runs(a: dict[str, Any], b: dict[str, Any], tie: float = 1e-4,
                 atol: float = 1e-5) -> Comparison:
    """a, b: {"requests": [{id, tokens, margins}], "frames": [{frame, actions}]}."""
    out = Comparison()
    reqs_b = {r["id"]: r for r in b["requests"]}
    for ra in a["requests"]:
        rb = reqs_b.get(ra["id"])
        out.requests += 1
        if rb is None:
            out.mismatches.append(f"request {ra['id']} missing from the second run")
            continue
        ta, tb = ra["tokens"], rb["tokens"]
        if ta == tb:
            out.identical += 1
            continue
        pos = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
        margin = min(_at(ra["margins"], pos), _at(rb["margins"], pos))
        if pos < min(len(ta), len(tb)) and margin < tie:
            out.near_tie_flips.append((ra["id"], pos, margin))
        else:
            out.mismatches.append(
                f"request {ra['id']}: tokens differ at {pos} (margin {margin:.3g}): {ta} vs {tb}")
    if len(reqs_b) != len(a["requests"]):
        out.mismatches.append(f"request counts differ: {len(a['requests'])} vs {len(reqs_b)}")
    frames_b = {f["frame"]: f for f in b["frames"]}
    for fa in a["frames"]:
        fb = frames_b.get(fa["frame"])
        if fb is None:
            continue  # one run drained for longer; frames beyond the other's are not comparable
        out.frames += 1
        diff = float(np.max(np.abs(np.asarray(fa["actions"]) - np.asarray(fb["actions"]))))
        out.max_action_diff = max(out.max_action_diff, diff)
        if not diff <= atol:
            out.mismatches.append(f"frame {fa['frame']}: actions differ by {diff:.3g} > {atol}")
    return out


def _at(values: list[float], i: int) -> float:
    return values[i] if i < len(values) else float("inf")
