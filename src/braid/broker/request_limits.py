"""Broker-wide cap on lookups in flight (Pulsar's ``maxConcurrentLookupRequest``).

A lookup - ``LOOKUP``, ``PARTITIONED_METADATA``, and the scalable-topic layer's
``SCALABLE_TOPIC_LOOKUP`` and ``WATCH_SCALABLE_TOPICS`` while they are being established - reads
the metadata store. One client, or many, sending them faster than the store answers would pile up
tasks and memory without bound; above the cap a lookup is refused at once with
``TooManyRequests`` naming the key (the client retries after backing off), and everyone else is
served as before. :class:`LookupLimiter` is pure bookkeeping: :meth:`~LookupLimiter.slot` counts a
lookup in for the duration of a ``with`` block, or raises.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from braid.broker.errors import TooManyRequests

#: Pulsar's default ``maxConcurrentLookupRequest``.
DEFAULT_MAX_CONCURRENT_LOOKUPS = 50_000


class LookupLimiter:
    """Counts lookups in flight against ``maxConcurrentLookupRequest`` (``0`` = no cap)."""

    def __init__(self, max_concurrent: int = DEFAULT_MAX_CONCURRENT_LOOKUPS) -> None:
        if max_concurrent < 0:
            raise ValueError("maxConcurrentLookupRequest must be 0 (none) or positive")
        self.max_concurrent = max_concurrent
        self.in_flight = 0
        #: Lookups refused so far (stats).
        self.refused = 0

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Count one lookup in while the block runs.

        Raises:
            TooManyRequests: the cap is reached (nothing is counted).
        """
        if self.max_concurrent and self.in_flight >= self.max_concurrent:
            self.refused += 1
            raise TooManyRequests(
                f"too many lookups in flight on this broker (maxConcurrentLookupRequest="
                f"{self.max_concurrent}); retry later"
            )
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


__all__ = ["DEFAULT_MAX_CONCURRENT_LOOKUPS", "LookupLimiter"]
