"""A JointState's stamp and positions read straight from its serialized bytes (CDR), for a joint
driver that sends the same frame and names in every message.

Why: taking a 30-joint JointState as a Python message builds 30 name strings and three lists of
floats at every take: ~130 us of a control tick, with the interpreter lock held, which is time
the model thread waits (oxygen-bench control-tick). A driver's frame_id and names are the same
bytes in every message, so once one message has been deserialised whole and its names accepted,
the next message whose bytes up to its positions are the same (padding aside) is read with one
masked comparison and a numpy view of its positions.

Anything else (other names or frame, another encoding, a message too short) reads as None: the
caller deserialises that message whole, as before, and may `learn` it. A layout is learned
only when the positions this reader finds equal the deserialised message's, so a reader that
misparses an encoding never answers for it.

Only plain little-endian CDR (XCDR1, what ROS 2's middlewares send) is read; alignment is
relative to the data after the 4-byte encapsulation header, doubles aligned to 8.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

import numpy as np

_ENCAPSULATION = b"\x00\x01"  # CDR_LE
_BODY = 4  # the encapsulation header's bytes
_U32 = struct.Struct("<I")
_STAMP = struct.Struct("<iI")


def _align(offset: int, n: int) -> int:
    return offset + (-offset) % n


@dataclass(frozen=True)
class _Layout:
    compare_from: int  # raw offset where the compared bytes start (the frame_id's length)
    reference: np.ndarray  # uint8: the learned message's bytes from compare_from to the count
    mask: np.ndarray  # uint8: 0xff where a byte must match, 0 on padding
    positions_at: int  # raw offset of the first position (a double)
    count: int  # positions (= names)
    exact: bytes  # the learned message's bytes from compare_from to the count, padding included


def _parse(raw: bytes) -> _Layout | None:
    """The layout of this serialized JointState up to its positions; None when it is not plain
    little-endian CDR or ends early."""
    if len(raw) < _BODY + 12 or raw[:2] != _ENCAPSULATION:
        return None
    body = _BODY
    pad: list[tuple[int, int]] = []  # raw [start, end) of padding bytes inside the compared part

    def u32(at: int) -> int:
        return _U32.unpack_from(raw, at)[0]

    def aligned(at: int, n: int) -> int:
        to = body + _align(at - body, n)
        if to > at:
            pad.append((at, to))
        return to

    try:
        start = body + 8  # after the stamp (sec, nanosec)
        at = start + 4 + u32(start)  # frame_id: length (with its NUL), bytes
        at = aligned(at, 4)
        names = u32(at)
        at += 4
        for _ in range(names):
            at = aligned(at, 4)
            at += 4 + u32(at)
        at = aligned(at, 4)
        count = u32(at)
        at += 4
    except struct.error:
        return None
    if count != names:
        return None
    positions_at = body + _align(at - body, 8)
    if positions_at + 8 * count > len(raw):
        return None
    reference = np.frombuffer(raw, dtype=np.uint8, count=at - start, offset=start).copy()
    mask = np.full(at - start, 0xFF, dtype=np.uint8)
    for a, b in pad:
        mask[a - start:b - start] = 0
    reference &= mask
    return _Layout(start, reference, mask, positions_at, count, raw[start:at])


class JointStateBytes:
    """Reads (stamp sec, stamp nanosec, positions) from a serialized JointState whose frame and
    names equal the learned message's; None for any other."""

    def __init__(self) -> None:
        self._layout: _Layout | None = None
        self.reads = 0  # messages read here (not deserialised whole): for tests and benchmarks

    def learn(self, raw: bytes, positions: Sequence[float]) -> bool:
        """Remember this message's layout; `positions`: its positions as deserialised whole (the
        layout is kept only when this reader finds the same). Whether it was learned."""
        layout = _parse(raw)
        if layout is None:
            self._layout = None
            return False
        found = np.frombuffer(raw, dtype="<f8", count=layout.count, offset=layout.positions_at)
        same = np.array_equal(found, np.asarray(positions, dtype=np.float64), equal_nan=True)
        self._layout = layout if same else None
        return same

    def forget(self) -> None:
        self._layout = None

    def read(self, raw: bytes) -> tuple[int, int, np.ndarray] | None:
        """(sec, nanosec, positions: float64, read-only, the message's name order) or None."""
        layout = self._layout
        if layout is None or raw[:2] != _ENCAPSULATION:
            return None
        n = layout.reference.size
        if len(raw) < layout.positions_at + 8 * layout.count:
            return None
        # a driver's padding bytes are the same every time: one bytes comparison; the masked
        # one only when they are not
        if raw[layout.compare_from:layout.compare_from + n] != layout.exact:
            head = np.frombuffer(raw, dtype=np.uint8, count=n, offset=layout.compare_from)
            if ((head & layout.mask) != layout.reference).any():
                return None
        sec, nanosec = _STAMP.unpack_from(raw, _BODY)
        self.reads += 1
        return sec, nanosec, np.frombuffer(raw, dtype="<f8", count=layout.count,
                                           offset=layout.positions_at)
