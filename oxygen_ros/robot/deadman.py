"""Deadman: the operator's heartbeat (std_msgs/Bool on deadman.topic), whose release wins. Pure
(no rclpy): the control loop feeds it the messages, their senders and the publisher count."""
from __future__ import annotations

import threading


class Deadman:
    """Operator heartbeat whose release wins. Go only while
    - a `true` arrived within timeout_s, and no `false` from anyone within timeout_s (a release
      holds for at least the timeout, whatever else is published), and
    - at most one publisher is on the topic: `publishers` (set from the ROS graph by the caller)
      and the distinct senders (`press`'s source) heard within timeout_s. A second publisher (a
      forgotten `ros2 topic pub ... true` beside the operator's device) holds until it is gone.
    enabled False (no topic): always go. Times are monotonic seconds of arrival."""

    MAX_SOURCES = 16  # senders remembered (each for timeout_s): a bound, not a limit in practice

    def __init__(self, enabled: bool, timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError(f"deadman timeout_s must be > 0, got {timeout_s}")
        self.enabled = bool(enabled)
        self.timeout_s = float(timeout_s)
        self._lock = threading.Lock()
        self._true: float | None = None  # arrival of the newest true
        self._false: float | None = None  # arrival of the newest false
        self._sources: dict[object, float] = {}  # sender -> newest arrival
        self.publishers = 0  # publishers on the topic (ROS graph; 0 = not known)
        self.publisher_names = ""  # their nodes, when more than one

    def press(self, value: bool, now: float, source: object = None) -> None:
        """A message `value` arrived at `now` from `source` (the publisher's gid; None when the
        middleware does not say)."""
        with self._lock:
            if value:
                self._true = float(now)
            else:
                self._false = float(now)
            if source is not None:
                old = [k for k, t in self._sources.items() if now - t > self.timeout_s]
                for k in old:
                    del self._sources[k]
                if source in self._sources or len(self._sources) < self.MAX_SOURCES:
                    self._sources[source] = float(now)

    def set_publishers(self, count: int, names: str = "") -> None:
        self.publishers, self.publisher_names = int(count), names

    def go(self, now: float) -> tuple[bool, str]:
        """(go, why not); no side effects (read from the control and the inference thread)."""
        if not self.enabled:
            return True, ""
        with self._lock:
            true, false = self._true, self._false
            senders = sum(1 for t in self._sources.values() if now - t <= self.timeout_s)
        timeout = self.timeout_s
        count = max(self.publishers, senders)
        if count > 1:
            names = f" ({self.publisher_names})" if self.publisher_names else ""
            return False, (f"{count} publishers on the topic{names}: one operator device at most "
                           "(a forgotten `ros2 topic pub`?); holding until only one is left")
        if false is not None and (now - false <= timeout or true is None or true <= false):
            return False, "released (false)"
        if true is None:
            return False, "no message yet"
        if now - true > timeout:
            return False, f"no true for {now - true:.2f} s (timeout {timeout:g} s)"
        return True, ""
