"""A scalable topic's subscription backlogs on the segments other brokers serve.

A backlog quota on a scalable topic counts the whole DAG (ADR 0045): a subscription's backlog is
its unacknowledged bytes summed over every segment, active and sealed. Once segments are spread
over brokers (ADR 0051) each broker has only its own loaded; :class:`DagBacklogs` supplies the
rest: for each segment of the topic's layout (read from the metadata store) that this broker has
not loaded, each subscription's ``backlogSize`` (Pulsar's estimate, what the quota measures) from
the segment's stats, asked of its owner through the Segments admin API
(:class:`~braid.scalable.segment_routing.RoutedSegmentAdmin`, the internal listener).

**Bounded staleness.** Each segment's answer is kept for ``max_age_s`` (the quota check's
interval): the periodic check and every PRODUCER read the cache, so a producer's creation costs a
remote call at most once per segment and period. An owner that cannot be asked (down, cut off,
the segment moving) leaves its last answer in use, or nothing when there is none: the quota fails
open, as it does when the policies cannot be read, and the next round asks again.

Legacy segments (a migrated partition, ``legacy_topic_name``) are classic topics checked alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Protocol

from braid.core.errors import BraidError
from braid.core.names import SegmentTopicName, TopicName
from braid.scalable.resources import ScalableTopicResources

log = logging.getLogger(__name__)


class SegmentStats(Protocol):
    """The part of :class:`~braid.scalable.segments.SegmentAdmin` this needs."""

    async def stats(self, segment: SegmentTopicName) -> dict[str, object] | None: ...


class DagBacklogs:
    """Subscription backlogs (bytes) of a scalable topic's segments not loaded here."""

    def __init__(
        self,
        resources: ScalableTopicResources,
        segments: SegmentStats,
        now: Callable[[], float],
        *,
        max_age_s: float,
    ) -> None:
        self._resources = resources
        self._segments = segments
        self._now = now
        self.max_age_s = max_age_s
        #: segment name -> (when asked, subscription -> backlog bytes).
        self._cache: dict[str, tuple[float, dict[str, int]]] = {}

    async def elsewhere(self, topic: TopicName, loaded: Collection[str]) -> dict[str, int]:
        """Each subscription's backlog summed over the segments of ``topic`` whose names are
        not in ``loaded`` (the segments this broker serves)."""
        try:
            versioned = await self._resources.get_layout(topic)
        except BraidError as exc:
            log.debug("layout of %s unreadable for its backlog quota: %r", topic, exc)
            return {}
        if versioned is None:
            return {}
        totals: dict[str, int] = {}
        names: set[str] = set()
        for info in versioned.layout.segments.values():
            if info.legacy_topic_name is not None:
                continue
            segment = SegmentTopicName.of(topic, info.hash_range, info.segment_id)
            name = str(segment)
            names.add(name)
            if name in loaded:
                continue
            for subscription, size in (await self._of(name, segment)).items():
                totals[subscription] = totals.get(subscription, 0) + size
        for gone in [n for n in self._cache if _parent(n) == str(topic) and n not in names]:
            del self._cache[gone]  # pruned from the DAG
        return totals

    async def _of(self, name: str, segment: SegmentTopicName) -> dict[str, int]:
        cached = self._cache.get(name)
        if cached is not None and self._now() - cached[0] < self.max_age_s:
            return cached[1]
        try:
            stats = await self._segments.stats(segment)
        except BraidError as exc:
            log.info("backlog of %s not known (its owner did not answer): %r", name, exc)
            return cached[1] if cached is not None else {}
        found = _subscription_backlogs(stats)
        self._cache[name] = (self._now(), found)
        return found


def _parent(segment: str) -> str:
    return str(SegmentTopicName.parse(segment).parent)


def _subscription_backlogs(stats: dict[str, object] | None) -> dict[str, int]:
    subscriptions = (stats or {}).get("subscriptions")
    if not isinstance(subscriptions, dict):
        return {}
    found: dict[str, int] = {}
    for name, sub in subscriptions.items():
        size = sub.get("backlogSize") if isinstance(sub, dict) else None
        if isinstance(size, int) and not isinstance(size, bool):
            found[str(name)] = size
    return found


__all__ = ["DagBacklogs", "SegmentStats"]
