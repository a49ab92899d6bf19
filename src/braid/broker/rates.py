"""A topic's traffic counters and the rolling rates computed from them (PIP-483's load source).

The publish and dispatch hot paths only add to four integers of a :class:`TrafficCounters`
(messages and bytes in and out, per topic): no allocation, no clock read. Rates are computed
away from the hot path: whoever needs them (the segment load reporter, at each report tick) feeds
a :class:`RollingRates` the cumulative counters with the time they were read, and the rate is the
counter delta over the time delta across the window kept (``msgRateIn`` etc. over ~60 s, as
Pulsar's ``TopicStats``). Counters never go backwards: consumers and producers come and go, the
topic's totals stay.
"""

from __future__ import annotations

from collections import deque

#: (messages in, bytes in, messages out, bytes out): the order of PIP-483's four rates.
Counts = tuple[int, int, int, int]
Rates = tuple[float, float, float, float]

_ZERO_RATES: Rates = (0.0, 0.0, 0.0, 0.0)


class TrafficCounters:
    """Cumulative messages and bytes in (published) and out (dispatched) of one topic."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in", "messages_out")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.messages_out = 0
        self.bytes_out = 0

    def snapshot(self) -> Counts:
        """The four counters now, in :data:`Counts` order."""
        return (self.messages_in, self.bytes_in, self.messages_out, self.bytes_out)


class RollingRates:
    """Per-second rates over a sliding window of counter samples.

    Each :meth:`sample` records the cumulative counters read at ``now`` (seconds on a monotonic
    clock). Samples older than the window are dropped, except the newest of them, so the rate
    spans the whole window once it has been observed that long (and the time observed so far
    before that). Memory is one tuple per sample: a window of 60 s sampled every 10 s keeps 7.
    """

    def __init__(self, window_s: float) -> None:
        if not window_s > 0:
            raise ValueError(f"a rate window must be positive, got {window_s!r}")
        self._window = window_s
        self._samples: deque[tuple[float, Counts]] = deque()

    @property
    def window_s(self) -> float:
        return self._window

    def sample(self, now: float, counts: Counts) -> None:
        """Record the counters read at ``now`` (a time not before the previous sample's).

        A counter below its previous value (the topic was reloaded with fresh counters) starts
        the window over.
        """
        samples = self._samples
        if samples:
            last_time, last_counts = samples[-1]
            if now < last_time or any(c < p for c, p in zip(counts, last_counts, strict=True)):
                samples.clear()
        samples.append((now, counts))
        horizon = now - self._window
        while len(samples) >= 2 and samples[1][0] <= horizon:
            samples.popleft()

    def rates(self) -> Rates:
        """Messages and bytes per second in and out over the window; zeros until two samples
        at different times exist."""
        samples = self._samples
        if len(samples) < 2:
            return _ZERO_RATES
        (t0, first), (t1, last) = samples[0], samples[-1]
        span = t1 - t0
        if span <= 0:
            return _ZERO_RATES
        return (
            (last[0] - first[0]) / span,
            (last[1] - first[1]) / span,
            (last[2] - first[2]) / span,
            (last[3] - first[3]) / span,
        )

    @property
    def observed_s(self) -> float:
        """Seconds between the oldest and newest sample kept."""
        if len(self._samples) < 2:
            return 0.0
        return self._samples[-1][0] - self._samples[0][0]


__all__ = ["Counts", "Rates", "RollingRates", "TrafficCounters"]
