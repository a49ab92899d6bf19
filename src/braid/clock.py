"""Injected time for every I/O layer (``docs/architecture.md#binding-decisions``).

Timers (grace periods, cooldowns, merge windows, keep-alives, load reports, GC ticks) read a
:class:`Clock` they were given instead of the system clock, so tests advance a :class:`ManualClock`
instead of sleeping. ``braid.core`` never reads a clock at all: its pure functions take ``now_ms``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    """A callback scheduled with :meth:`Clock.call_at`."""

    def cancel(self) -> None:
        """Do not run the callback (no effect once it ran)."""
        ...


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

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` on the running event loop once ``monotonic()`` reaches ``when``
        (at once if it has). The timer primitive of sans-I/O adapters (aioquic's model): they
        re-arm one timer at their state machine's next deadline instead of running a task."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        # The loop's own clock may differ from time.monotonic() (uvloop), so convert to a delay.
        return asyncio.get_running_loop().call_later(max(0.0, when - time.monotonic()), callback)


class ManualClock:
    """A clock that only moves when a test calls :meth:`advance`.

    ``sleep`` parks the caller, and ``call_at`` holds its callback, until the clock has been
    advanced past the deadline, so code under test that waits on timers runs deterministically
    and instantly.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._mono = 0.0
        self._timers: list[tuple[float, int, _ManualTimer]] = []
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

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        timer = self._push(self._mono + seconds, wake)
        try:
            await fut
        finally:
            timer.cancel()  # a cancelled sleep is no longer pending

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        timer: _ManualTimer

        def fire() -> None:
            # Like the loop's own timers, the callback runs in a later loop iteration (never
            # inside the test's advance()), and a cancel until then still stops it.
            loop.call_soon(lambda: None if timer.cancelled else callback())

        timer = self._push(when, fire)
        return timer

    def _push(self, when: float, fire: Callable[[], None]) -> _ManualTimer:
        timer = _ManualTimer(fire)
        if when <= self._mono:
            timer.run()
        else:
            heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    def advance(self, seconds: float) -> None:
        """Move both clocks forward; wake every sleeper and run every timer now due."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._mono += seconds
        self._now_ms += round(seconds * 1000)
        while self._timers and self._timers[0][0] <= self._mono:
            _, _, timer = heapq.heappop(self._timers)
            timer.run()

    @property
    def pending_timers(self) -> int:
        """How many sleeps and ``call_at`` callbacks are still waiting (lets tests wait until
        code reached its timer)."""
        return sum(1 for _, _, t in self._timers if t.pending)


class _ManualTimer:
    """One entry of :class:`ManualClock`'s timer heap."""

    __slots__ = ("_fire", "cancelled", "fired")

    def __init__(self, fire: Callable[[], None]) -> None:
        self._fire = fire
        self.cancelled = False
        self.fired = False

    @property
    def pending(self) -> bool:
        return not (self.cancelled or self.fired)

    def cancel(self) -> None:
        self.cancelled = True
        # Like asyncio's handles: a cancelled timer lets go of its callback (and whatever the
        # callback holds) at once, not when the clock passes its deadline.
        self._fire = _nothing

    def run(self) -> None:
        if self.pending:
            self.fired = True
            fire, self._fire = self._fire, _nothing
            fire()


def _nothing() -> None:
    pass
