"""The pool's addressing (engine/runner/paging.py), one definition for runner.py and graphs.py."""
from __future__ import annotations

import pytest
import torch

from oxygen_ros.engine.runner.paging import LRU, device_slots, graph_width, padded_tables, slots


def test_host_and_device_slots_address_the_same_pool_entries():
    bs = 4
    tables = [[7, 2, 9], [3], [5, 1]]
    positions = [0, 3, 4, 11]
    padded = padded_tables(tables)
    for row, table in enumerate(tables):
        want = [slots(table, p, 1, bs)[0] for p in positions if p // bs < len(table)]
        pos = torch.tensor([p for p in positions if p // bs < len(table)])
        got = device_slots(padded[[row] * len(pos)], pos, bs).tolist()
        assert got == want
    assert slots([7, 2, 9], 2, 4, bs) == [30, 31, 8, 9]  # crosses into the second block


def test_padded_tables_shape_and_zero_padding():
    t = padded_tables([[4, 5, 6], [], [9]])
    assert t.dtype == torch.int32 and t.tolist() == [[4, 5, 6], [0, 0, 0], [9, 0, 0]]
    assert padded_tables([[1, 2]], rows=3, width=4).tolist() == [[1, 2, 0, 0], [0] * 4, [0] * 4]
    assert padded_tables([[]]).shape == (1, 1)  # never zero-width
    assert [graph_width(w) for w in (0, 1, 2, 3, 5, 8, 9)] == [1, 1, 2, 4, 8, 8, 16]


def test_lru_makes_once_refreshes_on_use_and_drops_the_least_recent():
    made: list[str] = []
    cache: LRU[str, str] = LRU(2)

    def get(key: str) -> str:
        return cache.get(key, lambda: made.append(key) or key.upper())

    assert get("a") == "A" and get("b") == "B" and get("a") == "A"
    assert made == ["a", "b"]  # a hit makes nothing
    get("c")  # b is the least recently used now
    assert list(cache) == ["a", "c"] and "b" not in cache and len(cache) == 2
    assert cache["a"] == "A" and list(cache) == ["a", "c"]  # a look does not refresh
    get("b")
    assert made == ["a", "b", "c", "b"] and list(cache) == ["c", "b"]
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        LRU(0)
