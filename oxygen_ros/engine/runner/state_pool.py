"""The recurrent half of the unified pool: per-sequence state slots (a family's
CacheSpec.recurrent, e.g. Qwen3.5's Gated DeltaNet conv + recurrent states), allocated once
with static shapes beside the K/V blocks. The KV manager (engine/core/kv/state_slots.py) says which
slot a sequence holds; the runner owns these tensors, zeroes a slot before a prefix is
prefilled into it, copies a snapshot into a forked request's own slot, and hands a forward
pass a StateRows: which packed rows continue which slot.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..config.cache_spec import RecurrentState


class StatePool:
    """``num_slots`` slots; per state layer and state tensor one [num_slots, *shape] tensor."""

    def __init__(self, spec: RecurrentState, num_slots: int, device: torch.device) -> None:
        if num_slots < 1:
            raise ValueError(f"a recurrent cache spec needs state slots, got {num_slots}")
        self.spec = spec
        self.num_slots = num_slots
        # tensors[name][i]: state tensor `name` of the i-th state layer, every slot
        self.tensors: dict[str, list[torch.Tensor]] = {
            t.name: [torch.zeros((num_slots, *t.shape), dtype=getattr(torch, t.dtype),
                                 device=device) for _ in spec.layers]
            for t in spec.tensors}

    @property
    def bytes_per_slot(self) -> int:
        return self.spec.bytes_per_sequence()

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for ts in self.tensors.values() for t in ts)

    def zero(self, slot: int) -> None:
        """A sequence starting at position 0 starts from the zero state."""
        for ts in self.tensors.values():
            for t in ts:
                t[slot].zero_()

    def copy(self, src: int, dst: int) -> None:
        """A fork: ``dst`` gets ``src``'s state (the prefix snapshot), ``src`` is unchanged."""
        for ts in self.tensors.values():
            for t in ts:
                t[dst].copy_(t[src])

    def rows(self, lengths: Sequence[int], slots: Sequence[int]) -> "StateRows":
        return StateRows(self, tuple(lengths), tuple(slots))


class StateRows:
    """Packed tokens of several sequences: ``lengths[i]`` consecutive tokens continue the state
    in ``slots[i]``. A model's state layer runs through ``run``: one-token segments in one
    batched recurrent step, longer ones one by one in the chunked form (a sequence's tokens go
    through the same form whatever else is in the batch: modes change scheduling, not
    results). Written back in place. The row layout is worked out once, for every layer."""

    def __init__(self, pool: StatePool, lengths: tuple[int, ...], slots: tuple[int, ...]) -> None:
        if len(lengths) != len(slots) or min(lengths, default=1) < 1:
            raise ValueError(f"one length >= 1 per slot, got {lengths} for {slots}")
        self.pool, self.lengths, self.slots = pool, lengths, slots
        starts = [0]
        for n in lengths[:-1]:
            starts.append(starts[-1] + n)
        self.runs = [(s, n, slot) for s, n, slot in zip(starts, lengths, slots) if n > 1]
        singles = [i for i, n in enumerate(lengths) if n == 1]
        device = pool.tensors["recurrent"][0].device
        self.single_rows = self.single_slots = None
        if singles:
            self.single_rows = torch.as_tensor([starts[i] for i in singles], device=device)
            self.single_slots = torch.as_tensor([slots[i] for i in singles], device=device)

    def run(self, module: torch.nn.Module, layer: int, x: torch.Tensor) -> torch.Tensor:
        """State layer ``layer`` (index among the state layers) of ``module`` (a GatedDeltaNet:
        ``forward(x, conv, state, recurrent, chunk)`` for one sequence, ``step_rows`` for one
        token of many) over the packed rows x [T, W]."""
        conv = self.pool.tensors["conv"][layer]
        rec = self.pool.tensors["recurrent"][layer]
        if not self.runs:  # a decode step: every row one token
            y, new_conv, new_rec = module.step_rows(x, conv[self.single_slots],
                                                    rec[self.single_slots])
            conv.index_copy_(0, self.single_slots, new_conv.to(conv.dtype))
            rec.index_copy_(0, self.single_slots, new_rec.to(rec.dtype))
            return y
        out = torch.empty_like(x)
        if self.single_rows is not None:
            rows, slots = self.single_rows, self.single_slots
            y, new_conv, new_rec = module.step_rows(x[rows], conv[slots], rec[slots])
            out[rows] = y
            conv.index_copy_(0, slots, new_conv.to(conv.dtype))
            rec.index_copy_(0, slots, new_rec.to(rec.dtype))
        for start, n, slot in self.runs:  # views into the pool: written in place
            out[start:start + n] = module(x[start:start + n], conv[slot], rec[slot],
                                          recurrent=False, chunk=64)
        return out
