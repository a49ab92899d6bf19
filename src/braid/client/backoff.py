"""Exponential backoff with jitter for reconnects, re-lookups and retries.

Every retry loop of the client (connection, producer and consumer re-attach, DAG watch and
controller re-registration, the segment-gone reroute) takes its delays from a :class:`Backoff`:
``initial * multiplier**n`` capped at ``maximum``, each multiplied by a random factor in
``[1 - jitter, 1 + jitter]`` so that many clients of a restarted broker do not reconnect in
lock-step. The random source is injectable, so tests get exact delays.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from braid.client.errors import is_transient

T = TypeVar("T")

#: The jitter of every backoff that is not given its own source: a consumer makes two backoffs
#: per segment it attaches, and seeding a new ``random.Random`` reads the OS entropy source.
_JITTER = random.Random()


def _shared_jitter() -> random.Random:
    return _JITTER


@dataclass
class Backoff:
    """Successive retry delays in seconds; :meth:`reset` after a success."""

    initial: float = 0.1
    maximum: float = 10.0
    multiplier: float = 2.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=_shared_jitter)
    _attempts: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError("backoff needs 0 < initial <= maximum")
        if self.multiplier < 1 or not 0 <= self.jitter < 1:
            raise ValueError("backoff needs multiplier >= 1 and 0 <= jitter < 1")

    @property
    def attempts(self) -> int:
        """How many delays were handed out since the last reset."""
        return self._attempts

    def next_delay(self) -> float:
        """The next delay (grows until ``maximum``), with jitter applied."""
        base = min(self.maximum, self.initial * self.multiplier**self._attempts)
        self._attempts += 1
        if self.jitter:
            base *= self.rng.uniform(1 - self.jitter, 1 + self.jitter)
        return base

    def reset(self) -> None:
        """Start again from ``initial``."""
        self._attempts = 0


async def retry_transient(
    operation: Callable[[], Awaitable[T]], backoff: Backoff, deadline: float
) -> T:
    """Run ``operation`` until it succeeds, retrying transient errors until ``deadline``.

    ``deadline`` is on the running loop's clock. A deterministic error (not-found, busy,
    authorization, ...) is raised at once; a transient one (connection loss, broker not ready)
    is retried with ``backoff`` and raised when the next attempt would pass the deadline.
    """
    loop = asyncio.get_running_loop()
    while True:
        try:
            return await operation()
        except Exception as exc:
            if not is_transient(exc):
                raise
            delay = backoff.next_delay()
            if loop.time() + delay > deadline:
                raise
            await asyncio.sleep(delay)


__all__ = ["Backoff", "retry_transient"]
