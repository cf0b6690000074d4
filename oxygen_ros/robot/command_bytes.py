"""A command's serialized message written from a template: the stamp and the values patched into
bytes that the middleware's serializer made once, instead of a Python message built and
converted at every control tick.

Why: at 200-500 Hz the control thread holds the interpreter lock for every command it builds.
Building a 30-joint JointState (30 name strings checked one by one, a header, an array) and
converting it to C takes ~70 us of a cold tick, ~25 us as bytes (oxygen-bench control-tick);
that is time the model thread waits. The names never change within a configuration, so only the
stamp and the values differ from one command to the next.

The template is a message of the command's own type and names, serialized with a sentinel stamp
and sentinel values (`sentinel_values`: distinct doubles no command holds). `CommandBytes.locate`
finds where their bytes are; it answers None (the caller keeps building messages) unless the
template is plain little-endian CDR and each sentinel occurs exactly once. The caller checks the
writer once before it uses it (node/publishers.py: what it writes for other values and another
stamp must deserialise to that message and have the size the middleware sends it with).
"""
from __future__ import annotations

import struct

import numpy as np

_ENCAPSULATION = b"\x00\x01"  # CDR_LE (XCDR1), what ROS 2's middlewares send
_STAMP = struct.Struct("<iI")
SENTINEL_STAMP = (0x13572468, 0x2468ACE)  # sec, nanosec: 2040-ish, an odd nanosecond count


def sentinel_values(n: int) -> np.ndarray:
    """n distinct doubles whose bytes do not occur by chance in a message of names and zeros."""
    return np.pi * 1e3 + np.arange(n, dtype=np.float64) * np.e


def _only(haystack: bytes, needle: bytes) -> int | None:
    at = haystack.find(needle)
    if at < 0 or haystack.find(needle, at + 1) >= 0:
        return None
    return at


class CommandBytes:
    """Writes (stamp, values) into a copy of the template's bytes."""

    def __init__(self, template: bytes, values_at: int, count: int, stamp_at: int | None) -> None:
        self._template = bytes(template)
        self._values_at = values_at
        self._end = values_at + 8 * count
        self.count = count
        self._stamp_at = stamp_at

    @classmethod
    def locate(cls, template: bytes, count: int, stamped: bool) -> CommandBytes | None:
        """The writer of a template serialized with `sentinel_values(count)` (and, `stamped`,
        SENTINEL_STAMP); None when the template is not little-endian CDR or a sentinel is not
        found exactly once."""
        if count < 1 or template[:2] != _ENCAPSULATION:
            return None
        values_at = _only(template, sentinel_values(count).astype("<f8").tobytes())
        stamp_at = _only(template, _STAMP.pack(*SENTINEL_STAMP)) if stamped else None
        if values_at is None or (stamped and stamp_at is None):
            return None
        return cls(template, values_at, count, stamp_at)

    def write(self, values: np.ndarray, sec: int = 0, nanosec: int = 0) -> bytes:
        """The serialized command; `values`: float64-convertible, `count` of them."""
        v = np.asarray(values, dtype="<f8")
        if v.shape != (self.count,):
            raise ValueError(f"a command of {self.count} values, got shape {v.shape}")
        buf = bytearray(self._template)
        if self._stamp_at is not None:
            _STAMP.pack_into(buf, self._stamp_at, sec, nanosec)
        buf[self._values_at:self._end] = v.tobytes()
        return bytes(buf)
