"""Read a bag into memory, keeping whatever is readable.

`read_bag(path)` accepts a rosbag2 folder (MCAP or sqlite3, with metadata.yaml), a bare .mcap file,
or what a crashed or full-disk recording leaves behind (a folder without metadata.yaml, an .mcap
without its summary/footer, a truncated file). rosbags reads the intact cases; when it refuses,
`scan.py` walks the storage file record by record and stops at the first broken one. Every problem
ends up in `BagData.errors` as a sentence naming the file; the messages read before it are kept.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from rosbags.highlevel import AnyReader
from rosbags.typesys import get_types_from_msg
from rosbags.typesys.store import Typestore

from . import scan
from .typestore import typestore as default_typestore

MAX_ERRORS = 20  # per bag: a corrupt bag must not flood the report


@dataclass
class BagData:
    path: str
    topics: dict[str, str] = field(default_factory=dict)  # topic -> msgtype
    messages: dict[str, list[tuple[int, Any]]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    storage: str = ""
    skipped: int = 0  # messages that could not be deserialized

    def topics_of(self, msgtype: str) -> list[str]:
        return sorted(t for t, ty in self.topics.items() if ty == msgtype)

    def find(self, msgtype: str, suffix: str = "", explicit: str | None = None) -> str | None:
        """The topic to use for a role: `explicit` if given, else the one of `msgtype` whose name
        ends with `suffix` (the first in name order), else None."""
        if explicit:
            return explicit if explicit in self.topics else None
        cands = [t for t in self.topics_of(msgtype) if t.endswith(suffix)]
        return cands[0] if cands else None

    def get(self, topic: str | None) -> list[tuple[int, Any]]:
        return self.messages.get(topic, []) if topic else []

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.messages.values())

    def error(self, text: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(text)


def read_bag(path: str | Path, topics: Iterable[str] | None = None,
             types: Iterable[str] | None = None, store: Typestore | None = None) -> BagData:
    """All messages (or those of `topics` / of `types`) of one bag, by topic, in log-time order."""
    data = BagData(str(path))
    for ts, topic, msg in messages(path, data, topics, types, store):
        data.messages[topic].append((ts, msg))
    for msgs in data.messages.values():
        msgs.sort(key=lambda m: m[0])
    return data


def bag_topics(path: str | Path) -> dict[str, str]:
    """{topic: msgtype} of a bag without reading its messages (a broken bag: scanned)."""
    p = Path(path)
    try:
        reader = AnyReader([p], default_typestore=default_typestore())
        reader.open()
    except Exception:  # noqa: BLE001 - fall back to the record scan
        out: dict[str, str] = {}
        for f in scan.storage_files(p) if p.exists() else []:
            try:
                for topic, msgtype, _, _, _ in scan.records(f):
                    out.setdefault(topic, msgtype)
            except scan.ScanStopped:
                pass
        return out
    try:
        return {c.topic: c.msgtype for c in reader.connections}
    finally:
        reader.close()


def messages(path: str | Path, info: BagData, topics: Iterable[str] | None = None,
             types: Iterable[str] | None = None, store: Typestore | None = None
             ) -> Iterator[tuple[int, str, Any]]:
    """Stream (log time ns, topic, message) without holding the bag in memory; `info` collects
    the topics, the storage and every problem. rosbags yields in log-time order; the
    record-by-record fallback in file order (the recording order)."""
    p = Path(path)
    want = set(topics) if topics is not None else None
    kinds = set(types) if types is not None else None
    if not p.exists():
        info.error(f"{p}: no such file or folder")
        return
    store = store or default_typestore()
    try:
        reader = AnyReader([p], default_typestore=store)
        reader.open()
    except Exception as exc:  # noqa: BLE001 - rosbags raises several types; all mean "use the scanner"
        reason = f"{type(exc).__name__}: {exc}"
    else:
        yield from _read_rosbags(p, reader, info, want, kinds)
        return
    files = scan.storage_files(p)
    if not files:
        info.error(f"{p}: not a readable bag ({reason}) and no .mcap or .db3 file found in it")
        return
    info.error(f"{p}: rosbags could not open it ({reason}); read record by record instead")
    for f in files:
        yield from _read_scan(f, info, want, kinds, store)


def _read_rosbags(p: Path, reader: AnyReader, info: BagData, want: set[str] | None,
                  kinds: set[str] | None) -> Iterator[tuple[int, str, Any]]:
    try:
        info.storage = "mcap" if p.suffix == ".mcap" or any(p.glob("*.mcap")) else "sqlite3"
        conns = [c for c in reader.connections if (want is None or c.topic in want)
                 and (kinds is None or c.msgtype in kinds)]
        for c in conns:
            info.topics[c.topic] = c.msgtype
        n = 0
        it = reader.messages(connections=conns) if conns else iter(())
        while True:
            try:
                conn, ts, raw = next(it)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 - a broken chunk: keep what was read
                info.error(f"{p}: stopped reading after {n} messages: {type(exc).__name__}: {exc}")
                break
            n += 1
            msg = _deserialize(info, conn.topic, conn.msgtype, ts, raw, reader.deserialize)
            if msg is not None:
                yield int(ts), conn.topic, msg
    finally:
        reader.close()


def _read_scan(f: Path, info: BagData, want: set[str] | None, kinds: set[str] | None,
               store: Typestore) -> Iterator[tuple[int, str, Any]]:
    info.storage = info.storage or ("mcap" if f.suffix == ".mcap" else "sqlite3")
    stores: dict[str, Typestore] = {}
    n = 0
    try:
        for topic, msgtype, msgdef, ts, raw in scan.records(f):
            if (want is not None and topic not in want) or (kinds is not None and msgtype not in kinds):
                continue
            info.topics.setdefault(topic, msgtype)
            ts_store = store
            if msgdef and msgtype not in store.fielddefs:
                ts_store = stores.get(msgtype) or _extend(store, msgtype, msgdef, stores)
            n += 1
            msg = _deserialize(info, topic, msgtype, ts, raw,
                               lambda r, t, s=ts_store: s.deserialize_cdr(r, t))
            if msg is not None:
                yield int(ts), topic, msg
    except scan.ScanStopped as exc:
        info.error(f"{f}: stopped reading after {n} messages: {exc}")


def _extend(store: Typestore, msgtype: str, msgdef: str, cache: dict[str, Typestore]) -> Typestore:
    """A copy of `store` that also knows a type only defined inside the bag (ros2msg text)."""
    from rosbags.typesys import Stores, get_typestore

    new = get_typestore(Stores.EMPTY)
    new.register(dict(store.fielddefs))
    try:
        new.register(get_types_from_msg(msgdef, msgtype))
    except Exception:  # noqa: BLE001 - unparsable definition: the message stays unreadable
        pass
    cache[msgtype] = new
    return new


def _deserialize(info: BagData, topic: str, msgtype: str, ts: int, raw: bytes, deser) -> Any:
    try:
        return deser(raw, msgtype)
    except Exception as exc:  # noqa: BLE001 - one corrupt message: skip it, say so
        info.skipped += 1
        info.error(f"{info.path}: message on {topic} at {ts} ns not readable: {type(exc).__name__}: {exc}")
        return None
