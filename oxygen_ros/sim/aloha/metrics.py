"""Memory-text checks for the bimanual tasks (the Meta-World ones are in sim/metrics.py)."""
from __future__ import annotations

from ..metrics import MemoryCheck, Scene, _norm
from .tasks import get_task


def check_memory(text: str, where: tuple[str, str] | Scene, stamp_ns: int = 0) -> MemoryCheck:
    """Does a memory text name the stage the sim showed at its source observation (`where`:
    task, caption, episode), or at least one of the task's stages or its instruction? Completion
    claims are not judged for these tasks yet (claims_done stays False)."""
    scene = where if isinstance(where, Scene) else Scene(*where)
    task, caption = scene.task, scene.caption
    t = get_task(task)
    said = _norm(text)
    named = {_norm(c) for c in t.captions} | {_norm(t.instruction)}
    return MemoryCheck(text, task, caption, said == _norm(caption) or _norm(caption) in said,
                       any(n and (said == n or n in said) for n in named), scene.episode, stamp_ns)
