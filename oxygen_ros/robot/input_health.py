"""Health of one input topic over the last seconds: what arrived, what the publisher sent, what
never arrived, how late its stamps are. Pure (no rclpy); the node's `oxygen: inputs` diagnostic
reads it (node/inputs.py).

- received rate: messages that passed the checks, counted over the CURRENT window (`window_s`):
  when a topic stops, its rate falls to 0 within one window (not the rate of the last images);
- what the publisher sent, from the publication sequence numbers the middleware hands with each
  message (rmw message info, per publisher): a jump of k means k - 1 messages that never
  arrived or were overwritten in the subscription's queue before they were taken (`dropped`).
  This is exact whatever the publisher's timing: a late publisher that catches up in a burst,
  a 1 kHz stream taken newest-only at 200 Hz. Only where the middleware gives no sequence
  numbers are the header stamps used instead (`missing_by_stamps`): their gaps, in whole
  periods of the publisher, are a guess that holds for a regular publisher only. (That guess
  was once the only account: a 500 Hz sender that fell behind and caught up in bursts has
  many gaps far shorter than its period; the period estimate, a low quantile of the gaps, fell
  with them, every ordinary gap then counted as several periods, and the node reported
  "received 499 Hz of 1541.5 Hz published: 68% lost", more the busier the sender got.)
- `transport_lost`: samples the middleware itself reports lost (rmw's message-lost event);
- `lag_s`: the median of (node clock at arrival - header stamp); between topics it is the skew
  that pairing by stamp suffers from (a topic stamped 0.8 s behind the others);
- `peak_hz`: the highest rate the publisher kept over a whole window since the start: a
  stream that falls below half of it has slowed (a driver thread starved, a cable).

`Samples` keeps recent values (the age of a joint state when a command or an inference used it,
a callback's wait in the executor) for their p50 / p99 / max over the window.

Nothing grows with time: at most `capacity` arrivals, LOST_EVENTS lost-reports and PUBLISHERS
publishers are kept (a topic faster than capacity / window_s is measured over the span those
cover).
"""
from __future__ import annotations

import collections
import math
import statistics
from dataclasses import dataclass

LOST_EVENTS = 256
PUBLISHERS = 32  # sequence numbers are kept for this many publishers of a topic
RESTART_BACK = 1000  # a sequence number this far below the last one: the publisher restarted


@dataclass(frozen=True)
class Window:
    """One topic over the last `seconds`."""

    seconds: float  # the span measured: the window, or less at start-up
    received: int  # messages that passed the checks
    received_hz: float
    missing: int  # messages the stamps say were sent and never arrived
    transport_lost: int  # samples the middleware reported lost
    lag_s: float | None  # median (arrival on the node clock - stamp)
    dropped: int = 0  # sent and never taken, from the publication sequence numbers
    sequenced: bool = False  # the middleware gave sequence numbers: `dropped` is exact

    @property
    def lost(self) -> int:
        """Messages sent in the window that were never taken: with sequence numbers those
        (which include what the middleware reports lost); else the larger of the stamps' guess
        and the middleware's reports."""
        if self.sequenced:
            return max(self.dropped, self.transport_lost)
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
        self.dropped_total = 0  # from sequence numbers
        self.sequenced = False
        self.peak_hz = 0.0  # the publisher's highest whole-window rate since the start
        self._seqs: dict[object, int] = {}  # publisher -> newest publication sequence number
        self.last_ok: float | None = None  # monotonic seconds
        self.last_bad: float | None = None
        self.last_error = ""
        self._first: float | None = None
        # (arrival monotonic s, header stamp s or nan when unstamped, lag s or nan, messages
        # dropped just before this one by the sequence numbers)
        self._seen: collections.deque[tuple[float, float, float, int]] = collections.deque(
            maxlen=capacity)
        self._lost: collections.deque[tuple[float, int]] = collections.deque(maxlen=LOST_EVENTS)

    # -- events ---------------------------------------------------------------------------------
    def good(self, now: float, stamp: float | None = None, lag: float | None = None,
             seq: int | None = None, publisher: object = None) -> None:
        """A message passed the checks at monotonic `now`; `stamp` its header stamp (None:
        unstamped), `lag` node clock at arrival - stamp, `seq` its publication sequence number
        from `publisher` (None or 0: the middleware gives none)."""
        self.ok += 1
        self.last_ok = now
        if self._first is None:
            self._first = now
        self._seen.append((now, math.nan if stamp is None else float(stamp),
                           math.nan if lag is None else float(lag), self._dropped_before(seq, publisher)))

    def _dropped_before(self, seq: int | None, publisher: object) -> int:
        """Messages of `publisher` between its previous one taken and this one. A number not
        above the previous counts nothing: a reordered sample, or (far below it) a publisher
        restarted under the same id, whose count starts again."""
        if not seq:
            return 0
        self.sequenced = True
        seq = int(seq)
        last = self._seqs.get(publisher)
        if last is None and len(self._seqs) >= PUBLISHERS:
            self._seqs.pop(next(iter(self._seqs)))  # the publisher first heard longest ago
        if last is not None and last - RESTART_BACK < seq <= last:
            return 0  # reordered
        self._seqs[publisher] = seq
        dropped = seq - last - 1 if last is not None and seq > last else 0
        self.dropped_total += dropped
        return dropped

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
        # the first message of the window was dropped-before from outside it: not counted
        dropped = sum(s[3] for s in recent[1:])
        missing = 0 if self.sequenced else missing_by_stamps([s[1] for s in recent], w)
        out = Window(span, len(recent), rate, missing, lost,
                     statistics.median(lags) if lags else None, dropped, self.sequenced)
        if span >= w:  # a whole window: the publisher's rate so far
            self.peak_hz = max(self.peak_hz, out.published_hz)
        return out


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


class Samples:
    """Recent values with their monotonic times (bounded): p50 / p99 / max over a window."""

    def __init__(self, capacity: int = 4096) -> None:
        self._items: collections.deque[tuple[float, float]] = collections.deque(maxlen=capacity)

    def add(self, now: float, value: float) -> None:
        self._items.append((now, float(value)))

    def window(self, now: float, seconds: float) -> tuple[int, float, float, float] | None:
        """(count, p50, p99, max) of the values of the last `seconds`; None when there are none."""
        vals = sorted(v for t, v in list(self._items) if now - t < seconds)
        if not vals:
            return None
        n = len(vals)
        at = lambda q: vals[min(n - 1, max(0, math.ceil(q * n) - 1))]  # nearest rank
        return n, at(0.5), at(0.99), vals[-1]


class CpuTime:
    """CPU seconds by kind of work (joint states, camera callbacks, control ticks, inference),
    each measured with its thread's CPU clock: totals since the start (diagnostics show them;
    benchmarks difference them over time)."""

    def __init__(self, kinds: tuple[str, ...]) -> None:
        self.totals = {k: 0.0 for k in kinds}

    def add(self, kind: str, seconds: float) -> None:
        self.totals[kind] += seconds
