"""Where a scalable topic's segments are served: the broker URLs consumers and watchers are told.

A segment topic is owned like any topic (its namespace bundle's owner); the scalable layer names
that broker in two places so clients reach a segment without a standard lookup first:

* the DAG a watcher receives (``ScalableTopicDAG.segment_brokers``, its active segments);
* the assignment a Stream or grouped-Checkpoint consumer receives
  (``ScalableAssignedSegment.broker_url``, ADR 0073): on a walk through a long DAG nearly every
  segment a consumer attaches is sealed, so the DAG names none of them, and a lookup per attach
  was one round trip of every hand-over.

:class:`SegmentBrokers` answers both the same way: the segment admin's ``broker_url`` (the answer
a lookup of the segment gives: its owner, or the broker that will take its bundle) and that
broker's ``pulsar+ssl://`` URL from the broker registry. An answer is advice: a client whose
attach through it fails looks the segment up (the owner may have moved since).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from braid.scalable.segments import SegmentAdmin, SegmentTopic

#: The ``pulsar+ssl://`` URL of the broker with a given ``pulsar://`` URL, if it has one.
TlsUrlOf = Callable[[str], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class SegmentBroker:
    """The broker serving a segment: its ``pulsar://`` URL and, if it has one, its TLS URL."""

    url: str
    url_tls: str | None = None


class SegmentBrokers:
    """Finds the brokers serving segments (see the module docstring)."""

    def __init__(self, segments: SegmentAdmin, tls_url_of: TlsUrlOf | None = None) -> None:
        self._segments = segments
        self._tls_url_of = tls_url_of

    async def tls_url(self, url: str) -> str | None:
        """The ``pulsar+ssl://`` URL of the broker at ``url`` (the broker registry's)."""
        return None if self._tls_url_of is None else await self._tls_url_of(url)

    async def of(self, segments: Mapping[int, SegmentTopic]) -> dict[int, SegmentBroker]:
        """The broker of each segment id in ``segments`` (id -> its topic), looked up together.

        Raises:
            BraidError: a lookup failed (the caller decides whether that matters).
        """
        ids = list(segments)
        urls = await asyncio.gather(*(self._segments.broker_url(segments[sid]) for sid in ids))
        tls_of = {url: await self.tls_url(url) for url in set(urls)}
        return {sid: SegmentBroker(url, tls_of[url]) for sid, url in zip(ids, urls, strict=True)}


__all__ = ["SegmentBroker", "SegmentBrokers", "TlsUrlOf"]
