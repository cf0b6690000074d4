"""Memory-text checks for the bimanual tasks (the Meta-World ones are in sim/metrics.py)."""
from __future__ import annotations

from ..metrics import MemoryCheck, Scene, check_scene
from .tasks import get_task


def check_memory(text: str, where: tuple[str, str] | Scene, stamp_ns: int = 0) -> MemoryCheck:
    """Does a memory text name the stage the sim showed at its source observation (`where`:
    task, caption, episode), or at least one of the task's stages or its instruction? Completion
    claims are not judged for these tasks yet (claims_done stays False)."""
    return check_scene(text, where, stamp_ns, get_task, False)
