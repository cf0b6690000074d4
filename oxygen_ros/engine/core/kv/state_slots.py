"""StateSlots: bookkeeping for the fixed set of recurrent-state slots (no tensors, no torch).

A family whose cache spec has a RecurrentState (Qwen3.5's Gated DeltaNet layers) keeps one
fixed-size state per sequence instead of per-token K/V. The slots are sized once, with the KV
pool (engine/runner/state_pool.py holds the tensors). Like a block, a slot is refcounted: a fork
shares its parent's slot read-only (a frame's prefix snapshot, shared by the requests born from
it), and the first write of a sharer copies it into a slot of its own (KVManager.append: copy
on write). Allocation takes the lowest free id first, so tests can assert exact ids. There is
no prefix cache of states: a freed slot holds nothing reusable.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class SlotUsage:
    used: int
    free: int
    total: int
    peak: int


class StateSlots:
    def __init__(self, num_slots: int) -> None:
        if num_slots <= 0:
            raise ValueError(f"num_slots must be > 0, got {num_slots}")
        self.num_slots = num_slots
        self._ref = [0] * num_slots
        self._free = list(range(num_slots))  # a valid min-heap
        self._peak = 0

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return self.num_slots - len(self._free)

    @property
    def peak_used(self) -> int:
        return self._peak

    def reset_peak(self) -> None:
        self._peak = self.num_used

    def allocate(self) -> int | None:
        """A slot with refcount 1 (lowest free id), or None when every slot is held."""
        if not self._free:
            return None
        s = heapq.heappop(self._free)
        self._ref[s] = 1
        self._peak = max(self._peak, self.num_used)
        return s

    def incref(self, slot: int) -> None:
        self._check(slot)
        if self._ref[slot] == 0:
            raise ValueError(f"incref of free state slot {slot}")
        self._ref[slot] += 1

    def decref(self, slots: Iterable[int]) -> None:
        for s in slots:
            self._check(s)
            if self._ref[s] <= 0:
                raise ValueError(f"decref of state slot {s} with refcount {self._ref[s]}")
            self._ref[s] -= 1
            if self._ref[s] == 0:
                heapq.heappush(self._free, s)

    def refcount(self, slot: int) -> int:
        self._check(slot)
        return self._ref[slot]

    def free_ids(self) -> list[int]:
        return sorted(self._free)

    def usage(self) -> SlotUsage:
        return SlotUsage(self.num_used, self.num_free, self.num_slots, self._peak)

    def _check(self, slot: int) -> None:
        if not 0 <= slot < self.num_slots:
            raise ValueError(f"state slot {slot} outside pool of {self.num_slots}")
