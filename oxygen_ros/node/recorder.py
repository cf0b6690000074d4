"""Recorder: write serialized messages into a rosbag2 from a bounded queue on its own thread.

Pure (no rclpy, no engine types): the node's subscriptions hand it CDR bytes (`offer`), it never
blocks them. `offer` is a `put_nowait` on a bounded queue; when the queue is full the message is
dropped and counted (`dropped`), so a slow disk can cost recorded messages, never inference or
control time. The writer thread adds a connection the first time it sees a topic and flushes the
bag every `flush_period_s` (MCAP: the pending chunk is closed and written; sqlite3: a commit), so a
killed process or a full disk leaves a bag that `oxygen-eval` reads up to the last flush. A write
error (full disk, permissions) stops recording: it is reported by `status()` (level ERROR, the
error text), the bag is closed as far as possible, and later offers are counted as dropped.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

STORAGES = ("mcap", "sqlite3")  # bags/writer.py maps each to its rosbags plugin (test_recorder)


@dataclass(frozen=True)
class Item:
    topic: str
    msgtype: str
    data: bytes
    log_ns: int


def bag_path(path: str, now: float | None = None) -> Path:
    """`path`, or `path_<YYYYmmdd-HHMMSS>[_n]` when it exists (rosbag2 never overwrites)."""
    p = Path(path).expanduser()
    if not p.exists():
        return p
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    cand, n = p.with_name(f"{p.name}_{stamp}"), 1
    while cand.exists():
        cand, n = p.with_name(f"{p.name}_{stamp}_{n}"), n + 1
    return cand


def _open_bag_writer(path: Path, storage: str) -> Any:
    from oxygen_ros.bags.writer import BagWriter

    return BagWriter(path, storage)


class Recorder:
    def __init__(self, path: str | Path, storage: str = "mcap", queue_size: int = 2000,
                 flush_period_s: float = 1.0,
                 open_writer: Callable[[Path, str], Any] = _open_bag_writer) -> None:
        if storage not in STORAGES:
            raise ValueError(f"record.storage must be one of {STORAGES}, got {storage!r}")
        if queue_size < 1:
            raise ValueError(f"queue size must be >= 1, got {queue_size}")
        if not flush_period_s > 0:
            raise ValueError(f"flush period must be > 0, got {flush_period_s}")
        self.path = Path(path)
        self.storage = storage
        self.flush_period_s = float(flush_period_s)
        self._open_writer = open_writer
        self._q: queue.Queue[Item | None] = queue.Queue(maxsize=queue_size)
        self._thread: threading.Thread | None = None
        self._writer: Any = None
        self.written = 0
        self.bytes_written = 0
        self.dropped = 0
        self._count_lock = threading.Lock()  # dropped is counted by producers and the writer
        self.failed = False
        self.last_error = ""
        self.topics: set[str] = set()

    # -- producer side (subscription callbacks) ---------------------------------------------------
    def offer(self, topic: str, msgtype: str, data: bytes, log_ns: int) -> bool:
        """Queue one message without blocking; False (and counted) when it is dropped."""
        if self.failed or self._thread is None:
            self._drop()
            return False
        try:
            self._q.put_nowait(Item(topic, msgtype, bytes(data), int(log_ns)))
            return True
        except queue.Full:
            self._drop()
            return False

    def _drop(self) -> None:
        with self._count_lock:
            self.dropped += 1

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, timeout: float = 10.0) -> None:
        """Open the bag and start writing; raises what opening raised (OSError, ValueError, ...).
        The bag is opened on the writer thread: sqlite3 objects belong to their thread."""
        if self._thread is not None:
            raise RuntimeError("recorder already started")
        opened = threading.Event()
        error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(opened, error),
                                        name="oxygen-recorder", daemon=True)
        self._thread.start()
        if not opened.wait(timeout):
            error.append(TimeoutError(f"opening {self.path} took more than {timeout} s"))
        if error:
            self._thread.join(1.0)
            self._thread = None
            raise error[0]

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued, close the bag (metadata), stop the thread."""
        th = self._thread
        if th is None:
            return
        deadline = time.monotonic() + timeout
        while th.is_alive() and time.monotonic() < deadline:  # a stalled disk: give up at timeout
            try:
                self._q.put(None, timeout=0.1)  # the sentinel after everything queued
                break
            except queue.Full:
                continue
        th.join(max(deadline - time.monotonic(), 0.0))
        self._thread = None

    @property
    def queued(self) -> int:
        return self._q.qsize()

    def status(self) -> tuple[str, str, dict[str, Any]]:
        values = {"path": str(self.path), "storage": self.storage, "written": self.written,
                  "bytes_written": self.bytes_written, "dropped": self.dropped,
                  "queued": self.queued, "topics": len(self.topics)}
        if self.failed:
            return "ERROR", f"recording stopped: {self.last_error}", {**values, "last_error": self.last_error}
        if self.dropped:
            return "WARN", f"recording; {self.dropped} messages dropped (queue full)", values
        return "OK", "recording", values

    # -- writer thread ----------------------------------------------------------------------------
    def _run(self, opened: threading.Event, error: list[BaseException]) -> None:
        try:
            self._writer = self._open_writer(self.path, self.storage)
        except Exception as exc:  # noqa: BLE001 - handed to start()
            error.append(exc)
            return
        finally:
            opened.set()
        next_flush = time.monotonic() + self.flush_period_s
        while True:
            try:
                item = self._q.get(timeout=self.flush_period_s)
            except queue.Empty:
                item = False  # nothing new: only flush
            if item is None:
                break
            if item and not self.failed:
                self._write(item)
            if not self.failed and time.monotonic() >= next_flush:
                next_flush = time.monotonic() + self.flush_period_s
                self._guard(self._writer.flush)
        self._close()

    def _write(self, item: Item) -> None:
        def write() -> None:
            self._writer.write_raw(item.topic, item.msgtype, item.data, item.log_ns)
        if self._guard(write):
            self.written += 1
            self.bytes_written += len(item.data)
            self.topics.add(item.topic)
        else:
            self._drop()

    def _guard(self, fn: Callable[[], None]) -> bool:
        try:
            fn()
            return True
        except Exception as exc:  # noqa: BLE001 - full disk, permissions, ...: report, never raise
            self.failed = True
            self.last_error = f"{type(exc).__name__}: {exc}"
            self._drain()
            return False

    def _drain(self) -> None:
        """After a failure: empty the queue (counted as dropped) so producers never see it full."""
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                return
            if item is None:
                self._q.put_nowait(None)  # keep the stop request
                return
            self._drop()

    def _close(self) -> None:
        w, self._writer = self._writer, None
        if w is None:
            return
        try:
            w.close()
        except Exception as exc:  # noqa: BLE001 - e.g. the disk is still full: keep what was flushed
            if not self.failed:
                self.failed = True
                self.last_error = f"closing the bag: {type(exc).__name__}: {exc}"
