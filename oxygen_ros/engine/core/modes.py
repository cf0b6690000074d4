"""Execution modes: four strategies over the same runner, KV pool and scheduler.

Each decides only how one frame's language work is arranged around the action path; the
primitives (prefill, denoise, births, admission, batched decode) are the same for all and reach
a mode only through the FrameOps interface below (engine/core/frame_ops.py implements it). A mode
keeps no state of its own, so `update_config(mode=...)` takes effect on the next frame with
requests in flight: they continue under the new arrangement, and their tokens do not change
(greedy decoding over the same K/V, whatever the batch). Before `run`, the Engine has already
secured and allocated the action path's blocks (relief, then allocation: `action`), and it
releases them after `run` if the mode has not (also when `run` raises).
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Iterable, Protocol

import torch

if TYPE_CHECKING:
    from .frame_ops import ActionPath, Frame
    from .request import Request
    from .scheduler import Admission


class FrameOps(Protocol):
    """Everything a mode may do in a frame. The frame (`Frame`) carries the inputs, the config
    the frame runs under, its counters and the rate decision; the action path (`ActionPath`)
    is already allocated when the mode runs."""

    def prefill(self, frame: "Frame", action: "ActionPath") -> None:
        """The observation prefix into the action path's blocks (stage vision_prefill)."""

    def denoise(self, frame: "Frame", action: "ActionPath") -> dict[str, torch.Tensor]:
        """The action stage over the prefix: this frame's chunk from each action head, by head
        name (the S-step flow-matching loop; StarVLA: each head in turn, whatever its kind)."""

    def release(self, action: "ActionPath") -> None:
        """Free the action path's blocks (idempotent; the engine releases after `run` anyway)."""

    def take_births(self, frame: "Frame", prefix_seq: int | None) -> None:
        """This frame's new requests to the scheduler, forking `prefix_seq` (None: each
        prefills the observation again when admitted)."""

    def admit(self, frame: "Frame", limit: int | None = None, reserve: int | None = None
              ) -> list["Admission"]:
        """Admit what fits (at most `limit`, beside `reserve` free blocks) and prepare their KV."""

    def running(self) -> tuple["Request", ...]:
        """The admitted, unfinished requests in admission order: the decode batch."""

    def decode(self, frame: "Frame", batch: Iterable["Request"], k: int) -> None:
        """Advance `batch` by up to k tokens each in one batched generate."""

    def run_one_by_one(self, frame: "Frame", reserve: int | None = None) -> None:
        """Every running request, then every admissible one, each alone to its end."""

    def choose_k(self, frame: "Frame", batch: int) -> int:
        """The decode steps for a batch of `batch` (the configured k or, under an action-rate
        target, the k that fits); the decision is kept in `frame.rate`."""


class Mode(Protocol):
    name: str

    def run(self, ops: FrameOps, frame: "Frame", action: "ActionPath") -> dict[str, torch.Tensor]:
        """One frame: returns the action chunks (FrameOps.denoise); language updates go to the
        frame's report."""


class Oxygen:
    """One prefill shared by the action path and the requests born this frame; every running
    request advances k tokens per frame in one batch (cross-frame continuous batching)."""

    name = "oxygen"

    def steps(self, ops: FrameOps, frame: "Frame", batch: tuple["Request", ...]) -> int:
        # k, or under an action-rate target the k chosen for this batch
        return ops.choose_k(frame, len(batch))

    def run(self, ops: FrameOps, frame: "Frame", action: "ActionPath") -> dict[str, torch.Tensor]:
        ops.prefill(frame, action)
        chunks = ops.denoise(frame, action)
        ops.take_births(frame, action.prefix_seq)  # they fork this frame's prefix
        ops.release(action)
        ops.admit(frame)
        batch = ops.running()
        ops.decode(frame, batch, self.steps(ops, frame, batch))
        return chunks


class Shared(Oxygen):
    """Oxygen's sharing without cross-frame batching: every running request finishes within the
    frame (the paper's "w/o batching")."""

    name = "shared"

    def steps(self, ops: FrameOps, frame: "Frame", batch: tuple["Request", ...]) -> int:
        return max((r.remaining for r in batch), default=1)


class Isolated:
    """The baseline: action path, then each request on its own (its own prefill of the
    observation, all its tokens at batch 1), one after the other."""

    name = "isolated"

    def run(self, ops: FrameOps, frame: "Frame", action: "ActionPath") -> dict[str, torch.Tensor]:
        ops.prefill(frame, action)
        chunks = ops.denoise(frame, action)
        ops.release(action)
        ops.take_births(frame, None)  # each prefills the observation again
        ops.run_one_by_one(frame)
        return chunks


class Parallel:
    """Isolated execution with the two paths in two threads at once, contending for the cores.
    The action path's blocks are allocated before the language thread starts, and the thread is
    joined whatever the action path does."""

    name = "parallel"

    def run(self, ops: FrameOps, frame: "Frame", action: "ActionPath") -> dict[str, torch.Tensor]:
        ops.take_births(frame, None)
        error: list[BaseException] = []

        def language() -> None:
            try:
                # this frame's action path already holds its blocks and every request finishes
                # within the frame: nothing more to keep free for the next frame
                ops.run_one_by_one(frame, reserve=0)
            except BaseException as exc:  # re-raised in the caller's thread
                error.append(exc)

        worker = threading.Thread(target=language, name="oxygen-language")
        worker.start()
        try:
            ops.prefill(frame, action)
            chunks = ops.denoise(frame, action)
        finally:
            worker.join()
        if error:
            raise error[0]
        return chunks


MODES: dict[str, Mode] = {m.name: m for m in (Oxygen(), Shared(), Isolated(), Parallel())}
