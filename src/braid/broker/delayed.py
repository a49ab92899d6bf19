"""Delayed delivery: messages published with ``deliver_at`` / ``deliver_after`` are held until their
time (Pulsar's ``InMemoryDelayedDeliveryTracker``, for Shared and Key_Shared subscriptions).

A producer stamps ``MessageMetadata.deliver_at_time`` (wall-clock ms; the official clients never
batch such a message). When a Shared or Key_Shared dispatcher reads an entry whose time has not
come, it hands the position to this tracker instead of a consumer; the tracker arms one timer on
the injected clock (:meth:`braid.clock.Clock.call_at`) for the earliest time, and when it fires
the dispatcher takes the due positions and delivers them like redeliveries.

The tracker lives in memory only. It survives a restart because the positions it holds are
unacknowledged: a new dispatcher reads the cursor again from its mark-delete position, meets the
same entries, and tracks them again - the rebuild is the cursor scan itself, as in Pulsar.

Timing: a message is never delivered before its ``deliver_at_time`` (Braid is always "strict",
Pulsar's ``isDelayedDeliveryDeliverAtTimeStrict=true``); ``delayedDeliveryTickTimeMillis`` bounds
how often the timer fires, so a message may arrive up to one tick late when many are due close
together.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from braid.clock import Clock, TimerHandle
from braid.ledger.api import Position


class DelayedDeliveryTracker:
    """The positions of one subscription waiting for their delivery time."""

    def __init__(self, clock: Clock, *, tick_s: float, on_due: Callable[[], None]) -> None:
        self._clock = clock
        self._tick_s = max(0.0, tick_s)
        self._on_due = on_due
        self._heap: list[tuple[int, Position]] = []
        self._held: set[Position] = set()
        self._timer: TimerHandle | None = None
        self._timer_at: float | None = None
        self._last_fired: float | None = None

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, position: object) -> bool:
        return position in self._held

    def hold(self, position: Position, deliver_at_ms: int) -> bool:
        """Hold ``position`` until ``deliver_at_ms``; ``False`` (not held) when that time has come.

        A position already held stays held (it is not delivered twice).
        """
        if position in self._held:
            return True
        if deliver_at_ms <= self._clock.now_ms():
            return False
        self._held.add(position)
        heapq.heappush(self._heap, (deliver_at_ms, position))
        self._arm()
        return True

    def take_due(self) -> list[Position]:
        """Remove and return every held position whose time has come, in position order."""
        now = self._clock.now_ms()
        due: list[Position] = []
        while self._heap and self._heap[0][0] <= now:
            _, position = heapq.heappop(self._heap)
            if position in self._held:
                self._held.discard(position)
                due.append(position)
        self._arm()
        return sorted(due)

    def forget(self, positions: Iterable[Position]) -> None:
        """Stop holding ``positions`` (acknowledged without being delivered, e.g. by a seek)."""
        self._held.difference_update(positions)

    def clear(self) -> None:
        """Forget everything (the cursor was reset)."""
        self._heap.clear()
        self._held.clear()
        self._cancel()

    def close(self) -> None:
        self._cancel()

    def next_delivery_ms(self) -> int | None:
        """When the earliest held message is due (wall-clock ms), if any."""
        while self._heap and self._heap[0][1] not in self._held:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    # -- the timer -----------------------------------------------------------------------------

    def _arm(self, *, respect_tick: bool = True) -> None:
        due_ms = self.next_delivery_ms()
        if due_ms is None:
            self._cancel()
            return
        now_mono = self._clock.monotonic()
        when = now_mono + max(0.0, (due_ms - self._clock.now_ms()) / 1000.0)
        if respect_tick and self._last_fired is not None:
            # At most one wake-up per tick: later messages ride the next tick.
            when = max(when, self._last_fired + self._tick_s)
        if self._timer is not None and self._timer_at is not None and self._timer_at <= when:
            return
        self._cancel()
        self._timer_at = when
        self._timer = self._clock.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        self._last_fired = self._clock.monotonic()
        due_ms = self.next_delivery_ms()
        if due_ms is not None and due_ms <= self._clock.now_ms():
            self._on_due()
        else:
            # Fired a hair early (the wall clock and the monotonic clock drift apart): try again
            # when the message is really due, not a whole tick later.
            self._arm(respect_tick=False)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = None
