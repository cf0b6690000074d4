"""Memory-text checks for the bimanual tasks (the Meta-World ones are in sim/metrics.py)."""
from __future__ import annotations

from ..metrics import MemoryCheck, Scene, check_scene, completion_claim
from .tasks import TASKS, get_task

# a completion claim states a task's success caption ("the cube is handed over", "the peg is
# inserted"): the stage the simulator reports from its own success on
DONE = {name: t.success_caption for name, t in TASKS.items()}


def check_memory(text: str, where: tuple[str, str] | Scene, stamp_ns: int = 0) -> MemoryCheck:
    """Does a memory text name the stage the sim showed at its source observation (`where`:
    task, caption, episode), or at least one of the task's stages or its instruction; and which
    task's success does it claim (judged against the episode's success by
    metrics.claim_is_true, as Meta-World's claims)?"""
    return check_scene(text, where, stamp_ns, get_task, completion_claim(text, DONE))
