"""A small rosbag2 writer over rosbags: connections are added on first use of a topic."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys.store import Typestore

from .typestore import typestore as default_typestore

STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}


def storage_plugin(name: str) -> StoragePlugin:
    if name not in STORAGES:
        raise ValueError(f"storage must be one of {sorted(STORAGES)}, got {name!r}")
    return STORAGES[name]


class BagWriter:
    def __init__(self, path: str | Path, storage: str = "mcap", store: Typestore | None = None) -> None:
        self.store = store or default_typestore()
        self._w = Writer(Path(path), version=Writer.VERSION_LATEST, storage_plugin=storage_plugin(storage))
        self._w.open()
        self._conns: dict[str, Any] = {}
        self.path = Path(path)

    def connection(self, topic: str, msgtype: str) -> Any:
        conn = self._conns.get(topic)
        if conn is None:
            conn = self._w.add_connection(topic, msgtype, typestore=self.store)
            self._conns[topic] = conn
        elif conn.msgtype != msgtype:
            raise ValueError(f"topic {topic} already has type {conn.msgtype}, not {msgtype}")
        return conn

    def write(self, topic: str, msgtype: str, msg: Any, log_ns: int) -> None:
        self.write_raw(topic, msgtype, bytes(self.store.serialize_cdr(msg, msgtype)), log_ns)

    def write_raw(self, topic: str, msgtype: str, data: bytes, log_ns: int) -> None:
        self._w.write(self.connection(topic, msgtype), int(log_ns), data)

    def flush(self) -> None:
        """Make everything written so far readable after a crash (no metadata.yaml needed).

        rosbags has no public flush: MCAP keeps the open chunk in memory until it reaches 1 MiB,
        sqlite3 commits at close. These are the storage objects of rosbags 0.11.9 (pinned in
        requirements.txt; test/node/test_recorder.py reads a bag that was flushed, not closed)."""
        st = self._w.storage
        if st is None:
            return
        conn = getattr(st, "conn", None)
        if conn is not None:  # sqlite3
            conn.commit()
            return
        chunk = getattr(st, "chunk", None)
        if chunk is not None and chunk.msgs:  # mcap: write the open chunk
            st.close_chunk()
        bio = getattr(st, "bio", None)
        if bio is not None:
            bio.flush()

    def close(self) -> None:
        self._w.close()

    def __enter__(self) -> "BagWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
