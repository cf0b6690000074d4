"""/diagnostics at 1 Hz from configure on: `<node>: engine`, `<node>: inputs`, `<node>: control`.

Each part reports its own status over the last seconds (not the worst ever); this module only
collects them. The timer runs on the steady clock: with use_sim_time and no /clock the node
still tells what is happening.
"""
from __future__ import annotations

from typing import Callable

from rclpy.clock import Clock, ClockType

from . import conversions as conv


class Diagnostics:
    def __init__(self, node, publishers, collect: Callable[[], list],
                 warn: Callable[[str, str], None], period_s: float = 1.0) -> None:
        self._node = node
        self._pubs = publishers
        self._collect = collect  # () -> [(name suffix, level, message, values, hardware_id)]
        self._warn = warn
        self._timer = node.create_timer(period_s, self.publish, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def destroy(self) -> None:
        self._node.destroy_timer(self._timer)

    def publish(self) -> None:
        try:
            name = self._node.get_name()
            statuses = [conv.diagnostic_status(f"{name}: {suffix}", level, message, values, hw)
                        for suffix, level, message, values, hw in self._collect()]
            self._pubs.diagnostic_array(statuses, self._node.get_clock().now().to_msg())
        except Exception as exc:  # noqa: BLE001 - e.g. a cleanup racing this timer
            self._warn("diagnostics", f"diagnostics failed: {type(exc).__name__}: {exc}")
