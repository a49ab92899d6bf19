"""Injected time for every I/O layer (DESIGN.md §3.6).

Timers (grace periods, cooldowns, merge windows, keep-alives, load reports, GC ticks) read a
:class:`Clock` they were given instead of the system clock, so tests advance a :class:`ManualClock`
instead of sleeping. ``braid.core`` never reads a clock at all: its pure functions take ``now_ms``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    """A source of wall-clock and monotonic time, and a way to wait on it."""

    def now_ms(self) -> int:
        """Wall-clock milliseconds since the Unix epoch (for timestamps that are persisted)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (for deadlines and intervals)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait until ``monotonic()`` has advanced by ``seconds``."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that only moves when a test calls :meth:`advance`.

    ``sleep`` parks the caller until the clock has been advanced past its deadline, so code under
    test that waits on timers runs deterministically and instantly.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._mono = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), fut))
        await fut

    def advance(self, seconds: float) -> None:
        """Move both clocks forward and wake every sleeper whose deadline has passed."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._mono += seconds
        self._now_ms += round(seconds * 1000)
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    @property
    def pending_sleepers(self) -> int:
        """How many sleeps are still waiting (lets tests wait until code reached its timer)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())
