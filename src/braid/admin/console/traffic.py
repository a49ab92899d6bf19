"""The console's traffic snapshots: rates, backlogs and sizes of the topics loaded on this broker.

The broker's hot paths already keep what the console shows: four cumulative counters per topic
(:class:`~braid.broker.rates.TrafficCounters`), each subscription's cursor backlog, the ledger's
size, the producers and consumers attached. :class:`TrafficSampler` reads them every
``interval_s`` (2 s by default) and turns the counters into per-second rates over a short window
(:class:`~braid.broker.rates.RollingRates`), so nothing is added per message.

It samples only while somebody watches: the first :meth:`TrafficSampler.updates` subscriber starts
the loop, the last one leaving stops it, so a broker with no console open pays nothing at all.
Each tick builds one immutable :class:`TrafficSnapshot` shared by every subscriber.

A segment topic's numbers are reported under its segment id and also summed into its scalable
topic (``topic://...``) for the overview; a topic unloaded from the broker drops out of the next
snapshot (and its rate window is forgotten).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from braid.broker.rates import RollingRates, TrafficCounters
from braid.clock import Clock
from braid.core.names import InvalidTopicName, SegmentTopicName, TopicDomain

log = logging.getLogger(__name__)

#: How often the loaded topics are read while a console watches.
DEFAULT_INTERVAL_S = 2.0
#: The window rates are computed over (several samples, so one slow tick does not spike them).
DEFAULT_WINDOW_S = 10.0


class _Cursor(Protocol):
    def backlog(self) -> int: ...


class _Subscription(Protocol):
    @property
    def cursor(self) -> _Cursor: ...
    @property
    def consumers(self) -> list[Any]: ...


class _Ledger(Protocol):
    @property
    def total_size(self) -> int: ...


class LoadedTopic(Protocol):
    """What the sampler reads of a topic the broker has loaded (``braid.broker.topic.Topic``)."""

    closed: bool
    counters: TrafficCounters
    producers: Mapping[Any, Any]
    subscriptions: Mapping[str, _Subscription]

    @property
    def ledger(self) -> _Ledger: ...


@dataclass(frozen=True)
class TopicTraffic:
    """One topic's (or one segment's, or a scalable topic's summed) numbers at a tick."""

    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    bytes_rate_in: float = 0.0
    bytes_rate_out: float = 0.0
    backlog: int = 0
    storage_size: int = 0
    producers: int = 0
    consumers: int = 0
    #: Per subscription: (entries not acknowledged, consumers attached).
    subscriptions: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def plus(self, other: TopicTraffic) -> TopicTraffic:
        """The sum of two (a scalable topic's segments add up)."""
        subs = dict(self.subscriptions)
        for name, (backlog, consumers) in other.subscriptions.items():
            have = subs.get(name, (0, 0))
            subs[name] = (have[0] + backlog, have[1] + consumers)
        return TopicTraffic(
            self.msg_rate_in + other.msg_rate_in,
            self.msg_rate_out + other.msg_rate_out,
            self.bytes_rate_in + other.bytes_rate_in,
            self.bytes_rate_out + other.bytes_rate_out,
            self.backlog + other.backlog,
            self.storage_size + other.storage_size,
            self.producers + other.producers,
            self.consumers + other.consumers,
            subs,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "msgRateIn": round(self.msg_rate_in, 3),
            "msgRateOut": round(self.msg_rate_out, 3),
            "bytesRateIn": round(self.bytes_rate_in, 1),
            "bytesRateOut": round(self.bytes_rate_out, 1),
            "backlog": self.backlog,
            "storageSize": self.storage_size,
            "producers": self.producers,
            "consumers": self.consumers,
            "subscriptions": {
                name: {"backlog": backlog, "consumers": consumers}
                for name, (backlog, consumers) in sorted(self.subscriptions.items())
            },
        }


@dataclass(frozen=True)
class TrafficSnapshot:
    """Every loaded topic's numbers at one tick.

    ``topics`` is keyed by the names the overview lists (``persistent://...`` and, summed over
    their segments, ``topic://...``); ``segments`` by scalable topic, then segment id.
    """

    at_ms: int
    interval_s: float
    topics: Mapping[str, TopicTraffic]
    segments: Mapping[str, Mapping[int, TopicTraffic]]

    def overview_json(self) -> dict[str, Any]:
        return {
            "atMs": self.at_ms,
            "intervalMs": round(self.interval_s * 1000),
            "topics": {name: t.to_json() for name, t in sorted(self.topics.items())},
        }

    def topic_json(self, topic: str) -> dict[str, Any]:
        """The numbers of one scalable topic and of each of its segments loaded here."""
        segments = self.segments.get(topic, {})
        total = self.topics.get(topic, TopicTraffic())
        return {
            "atMs": self.at_ms,
            "intervalMs": round(self.interval_s * 1000),
            "topic": total.to_json(),
            "segments": {str(sid): t.to_json() for sid, t in sorted(segments.items())},
        }


def read_topic(topic: LoadedTopic, rates: RollingRates, now: float) -> TopicTraffic:
    """Sample one topic's counters into ``rates`` and read its gauges."""
    rates.sample(now, topic.counters.snapshot())
    msg_in, bytes_in, msg_out, bytes_out = rates.rates()
    subs: dict[str, tuple[int, int]] = {}
    backlog = consumers = 0
    for name, sub in topic.subscriptions.items():
        entries = sub.cursor.backlog()
        attached = len(sub.consumers)
        subs[name] = (entries, attached)
        backlog += entries
        consumers += attached
    return TopicTraffic(
        msg_in,
        msg_out,
        bytes_in,
        bytes_out,
        backlog,
        topic.ledger.total_size,
        len(topic.producers),
        consumers,
        subs,
    )


class TrafficSampler:
    """Periodic :class:`TrafficSnapshot` of the broker's loaded topics, while anyone watches."""

    def __init__(
        self,
        topics: Mapping[str, Any],
        clock: Clock,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        window_s: float = DEFAULT_WINDOW_S,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"the sampling interval must be positive, got {interval_s!r}")
        self._topics = topics
        self._clock = clock
        self._interval_s = interval_s
        self._window_s = window_s
        self._rates: dict[str, RollingRates] = {}
        self._segment_names: dict[str, tuple[str, int] | None] = {}
        self._subscribers = 0
        self._task: asyncio.Task[None] | None = None
        self._tick = asyncio.Event()
        self._closed = False
        self.snapshot: TrafficSnapshot | None = None

    @property
    def interval_s(self) -> float:
        return self._interval_s

    @property
    def running(self) -> bool:
        """Whether the sampling loop runs (it does only while someone subscribes)."""
        return self._task is not None and not self._task.done()

    def sample(self) -> TrafficSnapshot:
        """Read every loaded topic now (what each tick does)."""
        now = self._clock.monotonic()
        topics: dict[str, TopicTraffic] = {}
        segments: dict[str, dict[int, TopicTraffic]] = {}
        seen = set()
        for name, topic in list(self._topics.items()):
            if getattr(topic, "closed", False):
                continue
            seen.add(name)
            rates = self._rates.get(name)
            if rates is None:
                rates = self._rates[name] = RollingRates(self._window_s)
            traffic = read_topic(topic, rates, now)
            segment = self._segment_of(name)
            if segment is None:
                topics[name] = traffic
                continue
            parent, segment_id = segment
            segments.setdefault(parent, {})[segment_id] = traffic
            topics[parent] = topics[parent].plus(traffic) if parent in topics else traffic
        for gone in set(self._rates) - seen:
            del self._rates[gone]
            self._segment_names.pop(gone, None)
        snapshot = TrafficSnapshot(self._clock.now_ms(), self._interval_s, topics, segments)
        self.snapshot = snapshot
        return snapshot

    def _segment_of(self, name: str) -> tuple[str, int] | None:
        if name in self._segment_names:
            return self._segment_names[name]
        found: tuple[str, int] | None = None
        if name.startswith(TopicDomain.SEGMENT.value + "://"):
            with contextlib.suppress(InvalidTopicName):
                segment = SegmentTopicName.parse(name)
                found = (str(segment.parent), segment.segment_id)
        self._segment_names[name] = found
        return found

    async def updates(self) -> AsyncIterator[TrafficSnapshot]:
        """A snapshot now, then one per tick, until the sampler closes (the caller's loop ends)."""
        self._subscribers += 1
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        try:
            yield self.snapshot if self.snapshot is not None else self.sample()
            while not self._closed:
                tick = self._tick
                await tick.wait()
                if self._closed or self.snapshot is None:
                    return
                yield self.snapshot
        finally:
            self._subscribers -= 1
            if self._subscribers == 0 and self._task is not None:
                self._task.cancel()
                self._task = None

    async def _run(self) -> None:
        while not self._closed:
            await self._clock.sleep(self._interval_s)
            try:
                self.sample()
            except Exception:  # a topic closing mid-read: the next tick reads it again
                log.exception("console traffic sample failed")
                continue
            tick, self._tick = self._tick, asyncio.Event()
            tick.set()

    def close(self) -> None:
        """Stop sampling and end every subscriber's iteration. Idempotent."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._tick.set()


__all__ = [
    "DEFAULT_INTERVAL_S",
    "DEFAULT_WINDOW_S",
    "LoadedTopic",
    "TopicTraffic",
    "TrafficSampler",
    "TrafficSnapshot",
    "read_topic",
]
