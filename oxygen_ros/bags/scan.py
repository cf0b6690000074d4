"""Record-by-record reading of bag storage files that rosbags refuses (truncated, unfinished).

MCAP (https://mcap.dev/spec): after the 8-byte magic, records are `opcode u8, length u64, body`.
We follow Schema (0x03), Channel (0x04), Message (0x05) and Chunk (0x06, whose body holds more
records, optionally zstd/lz4 compressed) and stop at the Footer, the summary, or the first record
that does not fit in the file. sqlite3 (.db3): the `topics` and `messages` tables, read with the
standard library, in timestamp order; a broken page stops the read.
"""
from __future__ import annotations

import io
import sqlite3
import struct
from pathlib import Path
from typing import Iterator

MAGIC = b"\x89MCAP0\r\n"
Record = tuple[str, str, str, int, bytes]  # topic, msgtype, msgdef, log time ns, CDR bytes


class ScanStopped(Exception):
    """Reading stopped early; the message says where and why."""


def storage_files(p: Path) -> list[Path]:
    if p.is_file():
        return [p] if p.suffix in (".mcap", ".db3") else []
    return sorted(p.glob("*.mcap")) + sorted(p.glob("*.db3"))


def records(f: Path) -> Iterator[Record]:
    if f.suffix == ".mcap":
        yield from _mcap(f)
    else:
        yield from _sqlite(f)


# -- MCAP -----------------------------------------------------------------------------------
def _mcap(f: Path) -> Iterator[Record]:
    with f.open("rb") as bio:
        if bio.read(8) != MAGIC:
            raise ScanStopped("not an MCAP file (bad magic)")
        schemas: dict[int, tuple[str, str]] = {}
        channels: dict[int, tuple[str, str, str]] = {}
        size = f.stat().st_size
        while True:
            head = bio.read(9)
            if len(head) == 0:
                raise ScanStopped("file ends without an MCAP footer (unfinished recording)")
            if len(head) < 9:
                raise ScanStopped(f"truncated record header at byte {bio.tell() - len(head)}")
            op, length = head[0], struct.unpack("<Q", head[1:])[0]
            if bio.tell() + length > size:
                raise ScanStopped(f"record 0x{op:02x} at byte {bio.tell() - 9} is cut off "
                                  f"({length} bytes announced, {size - bio.tell()} left)")
            body = bio.read(length)
            if op in (0x02, 0x0F):  # footer, data end: all messages were before it
                return
            if op == 0x06:
                yield from _records(_chunk(body), schemas, channels)
            else:
                yield from _records(_one(op, body), schemas, channels)


def _one(op: int, body: bytes) -> Iterator[tuple[int, bytes]]:
    yield op, body


def _chunk(body: bytes) -> Iterator[tuple[int, bytes]]:
    _, _, raw_size, _ = struct.unpack_from("<QQQI", body, 0)
    off = 28
    (n,) = struct.unpack_from("<I", body, off)
    compression = body[off + 4: off + 4 + n].decode()
    off += 4 + n
    (clen,) = struct.unpack_from("<Q", body, off)
    payload = body[off + 8: off + 8 + clen]
    data = _decompress(payload, compression, raw_size)
    bio = io.BytesIO(data)
    while True:
        head = bio.read(9)
        if len(head) < 9:
            return
        op, length = head[0], struct.unpack("<Q", head[1:])[0]
        yield op, bio.read(length)


def _decompress(payload: bytes, compression: str, raw_size: int) -> bytes:
    if not compression:
        return payload
    if compression == "zstd":
        try:
            from compression import zstd  # type: ignore[import-not-found]  # Python >= 3.14
        except ImportError:
            from backports import zstd  # type: ignore[import-not-found,no-redef]
        return zstd.decompress(payload)
    if compression == "lz4":
        import lz4.frame

        return lz4.frame.decompress(payload)
    raise ScanStopped(f"unknown chunk compression {compression!r}")


def _string(body: bytes, off: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<I", body, off)
    return body[off + 4: off + 4 + n].decode(), off + 4 + n


def _records(items: Iterator[tuple[int, bytes]], schemas: dict, channels: dict) -> Iterator[Record]:
    for op, body in items:
        try:
            if op == 0x03:
                (sid,) = struct.unpack_from("<H", body, 0)
                name, off = _string(body, 2)
                _, off = _string(body, off)  # encoding
                (n,) = struct.unpack_from("<I", body, off)
                schemas[sid] = (name, body[off + 4: off + 4 + n].decode())
            elif op == 0x04:
                cid, sid = struct.unpack_from("<HH", body, 0)
                topic, _ = _string(body, 4)
                name, text = schemas.get(sid, ("", ""))
                channels[cid] = (topic, name, text)
            elif op == 0x05:
                cid, _, log_time, _ = struct.unpack_from("<HIQQ", body, 0)
                if cid in channels:
                    topic, name, text = channels[cid]
                    yield topic, name, text, log_time, body[22:]
        except (struct.error, UnicodeDecodeError) as exc:
            raise ScanStopped(f"malformed record 0x{op:02x}: {exc}") from None


# -- sqlite3 --------------------------------------------------------------------------------
def _sqlite(f: Path) -> Iterator[Record]:
    try:
        con = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ScanStopped(f"sqlite: {exc}") from None
    try:
        topics = {tid: (name, typ) for tid, name, typ in
                  con.execute("SELECT id, name, type FROM topics")}
        for tid, ts, raw in con.execute("SELECT topic_id, timestamp, data FROM messages ORDER BY timestamp"):
            if tid in topics:
                name, typ = topics[tid]
                yield name, typ, "", int(ts), bytes(raw)
    except sqlite3.Error as exc:
        raise ScanStopped(f"sqlite: {exc}") from None
    finally:
        con.close()
