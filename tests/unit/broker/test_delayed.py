"""The delayed-delivery tracker on a manual clock: never early, one timer, ticks bound wake-ups."""

from __future__ import annotations

import asyncio

from braid.broker.delayed import DelayedDeliveryTracker
from braid.clock import ManualClock
from braid.ledger.api import Position


async def _turn() -> None:
    # ManualClock runs timer callbacks on a later loop iteration.
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_message_is_held_until_its_time_and_not_a_moment_less() -> None:
    clock = ManualClock()
    woken: list[int] = []
    tracker = DelayedDeliveryTracker(clock, tick_s=1.0, on_due=lambda: woken.append(1))
    now = clock.now_ms()
    assert tracker.hold(Position(1, 0), now + 2_000)
    assert not tracker.hold(Position(1, 1), now)  # due already: deliver at once
    assert Position(1, 0) in tracker and len(tracker) == 1
    clock.advance(1.999)
    await _turn()
    assert woken == [] and tracker.take_due() == []
    clock.advance(0.001)
    await _turn()
    assert woken == [1]
    assert tracker.take_due() == [Position(1, 0)]
    assert len(tracker) == 0 and clock.pending_timers == 0


async def test_due_messages_come_out_in_position_order_and_one_timer_is_armed() -> None:
    clock = ManualClock()
    tracker = DelayedDeliveryTracker(clock, tick_s=0.0, on_due=lambda: None)
    now = clock.now_ms()
    tracker.hold(Position(1, 5), now + 300)
    tracker.hold(Position(1, 2), now + 100)
    tracker.hold(Position(1, 9), now + 200)
    assert clock.pending_timers == 1
    assert tracker.next_delivery_ms() == now + 100
    clock.advance(0.3)
    await _turn()
    assert tracker.take_due() == [Position(1, 2), Position(1, 5), Position(1, 9)]


async def test_the_tick_bounds_how_often_the_timer_fires() -> None:
    clock = ManualClock()
    fired: list[float] = []
    tracker = DelayedDeliveryTracker(
        clock, tick_s=1.0, on_due=lambda: fired.append(clock.monotonic())
    )
    now = clock.now_ms()
    tracker.hold(Position(1, 0), now + 100)
    tracker.hold(Position(1, 1), now + 200)
    clock.advance(0.1)
    await _turn()
    assert tracker.take_due() == [Position(1, 0)]
    # The next message is due at 0.2 s, but the timer waits for the next tick (1.1 s).
    clock.advance(0.5)
    await _turn()
    assert len(fired) == 1
    clock.advance(0.5)
    await _turn()
    assert len(fired) == 2
    assert tracker.take_due() == [Position(1, 1)]


async def test_forgotten_and_cleared_positions_are_not_delivered() -> None:
    clock = ManualClock()
    tracker = DelayedDeliveryTracker(clock, tick_s=0.0, on_due=lambda: None)
    now = clock.now_ms()
    tracker.hold(Position(1, 0), now + 100)
    tracker.hold(Position(1, 1), now + 100)
    tracker.forget([Position(1, 0)])
    clock.advance(1)
    await _turn()
    assert tracker.take_due() == [Position(1, 1)]
    tracker.hold(Position(1, 2), clock.now_ms() + 100)
    tracker.clear()
    assert clock.pending_timers == 0 and tracker.next_delivery_ms() is None
