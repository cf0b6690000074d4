"""Health of one input topic over the last seconds: what arrived, what the publisher sent, what was
lost on the way, how late its stamps are. Pure (no rclpy); the node's `oxygen: inputs` diagnostic
reads it (node/inputs.py).

- received rate: messages that passed the checks, counted over the CURRENT window (`window_s`):
  when a topic stops, its rate falls to 0 within one window (not the rate of the last images);
- the publisher's rate, from the header stamps: the stamps of consecutive messages are whole
  multiples of the publisher's period, so a gap of k periods means k - 1 messages that never
  arrived (counted as `missing`; a gap longer than the window is a restart, not a loss). A
  perfectly regular loss (every third image) looks like a slower publisher in the stamps: there
  only the middleware's report tells;
- `transport_lost`: samples the middleware itself reports lost (DDS sequence-number gaps: rmw's
  message-lost event), also when too few arrive to see the publisher's period in the stamps;
- `lag_s`: the median of (node clock at arrival - header stamp); between topics it is the skew
  that pairing by stamp suffers from (a topic stamped 0.8 s behind the others).

Nothing grows with time: at most `capacity` arrivals and LOST_EVENTS lost-reports are kept (a
topic faster than capacity / window_s is measured over the span those cover).
"""
from __future__ import annotations

import collections
import math
import statistics
from dataclasses import dataclass

LOST_EVENTS = 256


@dataclass(frozen=True)
class Window:
    """One topic over the last `seconds`."""

    seconds: float  # the span measured: the window, or less at start-up
    received: int  # messages that passed the checks
    received_hz: float
    missing: int  # messages the stamps say were sent and never arrived
    transport_lost: int  # samples the middleware reported lost
    lag_s: float | None  # median (arrival on the node clock - stamp)

    @property
    def lost(self) -> int:
        """Messages sent in the window that never arrived: the larger of the two accounts (a
        sample the middleware lost is also a gap in the stamps)."""
        return max(self.missing, self.transport_lost)

    @property
    def lost_fraction(self) -> float:
        """Of what the publisher sent in the window, the part that never arrived."""
        sent = self.received + self.lost
        return self.lost / sent if sent else 0.0

    @property
    def published_hz(self) -> float:
        """The publisher's rate: what arrived, plus what was lost, per second."""
        return self.received_hz + self.lost / self.seconds if self.seconds > 0 else 0.0


class TopicHealth:
    def __init__(self, topic: str, window_s: float = 2.0, capacity: int = 1024) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        if capacity < 4:
            raise ValueError(f"capacity must be >= 4, got {capacity}")
        self.topic = topic
        self.window_s = float(window_s)
        self.ok = 0  # totals since start (counters, for benchmarks: differences over time)
        self.bad = 0
        self.transport_lost_total = 0
        self.last_ok: float | None = None  # monotonic seconds
        self.last_bad: float | None = None
        self.last_error = ""
        self._first: float | None = None
        # (arrival monotonic s, header stamp s or nan when unstamped, lag s or nan)
        self._seen: collections.deque[tuple[float, float, float]] = collections.deque(maxlen=capacity)
        self._lost: collections.deque[tuple[float, int]] = collections.deque(maxlen=LOST_EVENTS)

    # -- events ---------------------------------------------------------------------------------
    def good(self, now: float, stamp: float | None = None, lag: float | None = None) -> None:
        """A message passed the checks at monotonic `now`; `stamp` its header stamp (None:
        unstamped), `lag` node clock at arrival - stamp."""
        self.ok += 1
        self.last_ok = now
        if self._first is None:
            self._first = now
        self._seen.append((now, math.nan if stamp is None else float(stamp),
                           math.nan if lag is None else float(lag)))

    def refused(self, now: float, reason: str) -> None:
        self.bad += 1
        self.last_bad = now
        self.last_error = reason

    def transport_lost(self, now: float, count: int) -> None:
        """The middleware reported `count` more samples lost on this topic."""
        if count > 0:
            self.transport_lost_total += count
            self._lost.append((now, int(count)))

    # -- the last seconds -----------------------------------------------------------------------
    def window(self, now: float) -> Window:
        w = self.window_s
        seen = list(self._seen)  # an atomic copy (callbacks append meanwhile)
        recent = [s for s in seen if now - s[0] < w]
        # the received rate over the current window; before one window of history (start-up, or a
        # fast topic whose kept arrivals cover less), over the span since the oldest one known
        oldest = seen[0][0] if seen else None
        full = len(seen) == self._seen.maxlen
        start = self._first if not full else oldest
        if start is not None and now - start < w:
            span = now - start
            rate = (len(recent) - 1) / span if len(recent) >= 2 and span > 0 else 0.0
        else:
            span, rate = w, len(recent) / w
        lost = sum(c for t, c in list(self._lost) if now - t < w)
        lags = [s[2] for s in recent if not math.isnan(s[2])]
        return Window(span, len(recent), rate, missing_by_stamps([s[1] for s in recent], w), lost,
                      statistics.median(lags) if lags else None)


def missing_by_stamps(stamps: list[float], max_gap: float, min_gaps: int = 4) -> int:
    """Messages missing between consecutive arrivals, from their header stamps (nan: unstamped,
    not counted). The publisher's period starts as a low quantile of the gaps (robust to a few
    odd stamps, and right while most gaps span several periods), then is refined as the mean gap
    per period counted; each gap of k periods misses k - 1 messages. Fewer than `min_gaps` gaps:
    0 (too few to tell the period)."""
    gaps = [b - a for a, b in zip(stamps, stamps[1:])
            if not (math.isnan(a) or math.isnan(b)) and 0 < b - a <= max_gap]
    if len(gaps) < min_gaps:
        return 0
    period = sorted(gaps)[len(gaps) // 10]
    for _ in range(2):
        period = sum(gaps) / sum(max(1, round(g / period)) for g in gaps)
    return sum(max(1, round(g / period)) for g in gaps) - len(gaps)
