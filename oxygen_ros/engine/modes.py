"""Execution modes: four strategies over the same runner, KV pool and scheduler.

Each decides only how one frame's language work is arranged around the action path; the
primitives (prefill, denoise, admission, batched decode) are the Engine's and the same for all.
A mode keeps no state of its own, so `update_config(mode=...)` takes effect on the next frame with
requests in flight: they continue under the new arrangement, and their tokens do not change
(greedy decoding over the same K/V, whatever the batch). Before `run`, the Engine has already
secured and allocated the action path's blocks (relief, then allocation: `action`), and it
releases them after `run` if the mode has not (also when `run` raises).
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

import torch

if TYPE_CHECKING:
    from .engine import ActionPath, Engine, Frame


class Mode(Protocol):
    name: str

    def run(self, engine: "Engine", frame: "Frame", action: "ActionPath") -> torch.Tensor:
        """One frame: returns the action chunk; language updates go to the engine's outbox."""
        ...


class Oxygen:
    """One prefill shared by the action path and the requests born this frame; every running
    request advances k tokens per frame in one batch (cross-frame continuous batching)."""

    name = "oxygen"

    def steps(self, engine: "Engine") -> int:
        # k, or under an action-rate target the k the engine chooses for this batch
        return engine.choose_k(len(engine.scheduler.running))

    def run(self, engine: "Engine", frame: "Frame", action: "ActionPath") -> torch.Tensor:
        engine.prefill(frame, action)
        actions = engine.denoise(frame, action)
        engine.take_births(frame, action.prefix_seq)  # they fork this frame's prefix
        engine.release(action)
        engine.admit(frame)
        engine.decode(frame, engine.scheduler.running, self.steps(engine))
        return actions


class Shared(Oxygen):
    """Oxygen's sharing without cross-frame batching: every running request finishes within the
    frame (the paper's "w/o batching")."""

    name = "shared"

    def steps(self, engine: "Engine") -> int:
        return max((r.remaining for r in engine.scheduler.running), default=1)


class Isolated:
    """The baseline: action path, then each request on its own (its own prefill of the
    observation, all its tokens at batch 1), one after the other."""

    name = "isolated"

    def run(self, engine: "Engine", frame: "Frame", action: "ActionPath") -> torch.Tensor:
        engine.prefill(frame, action)
        actions = engine.denoise(frame, action)
        engine.release(action)
        engine.take_births(frame, None)  # each prefills the observation again
        engine.run_one_by_one(frame)
        return actions


class Parallel:
    """Isolated execution with the two paths in two threads at once, contending for the cores.
    The action path's blocks are allocated before the language thread starts, and the thread is
    joined whatever the action path does."""

    name = "parallel"

    def run(self, engine: "Engine", frame: "Frame", action: "ActionPath") -> torch.Tensor:
        engine.take_births(frame, None)
        error: list[BaseException] = []

        def language() -> None:
            try:
                # this frame's action path already holds its blocks and every request finishes
                # within the frame: nothing more to keep free for the next frame
                engine.run_one_by_one(frame, reserve=0)
            except BaseException as exc:  # re-raised in the caller's thread
                error.append(exc)

        worker = threading.Thread(target=language, name="oxygen-language")
        worker.start()
        try:
            engine.prefill(frame, action)
            actions = engine.denoise(frame, action)
        finally:
            worker.join()
        if error:
            raise error[0]
        return actions


MODES: dict[str, Mode] = {m.name: m for m in (Oxygen(), Shared(), Isolated(), Parallel())}
