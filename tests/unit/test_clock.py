"""The injected clock: ManualClock's sleeps and call_at timers move only when a test advances it;
SystemClock's call_at runs on the event loop at the monotonic deadline."""

from __future__ import annotations

import asyncio
import time

from braid.clock import ManualClock, SystemClock


async def _turns(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_call_at_runs_after_the_deadline_in_a_later_loop_iteration() -> None:
    clock = ManualClock()
    fired: list[float] = []
    clock.call_at(5.0, lambda: fired.append(clock.monotonic()))
    assert clock.pending_timers == 1
    clock.advance(4.9)
    await _turns()
    assert fired == []
    clock.advance(0.1)
    assert fired == [], "the callback ran inside advance()"
    await _turns()
    assert fired == [5.0]
    assert clock.pending_timers == 0


async def test_cancelled_timer_never_runs_even_when_already_due() -> None:
    clock = ManualClock()
    fired: list[str] = []
    early = clock.call_at(1.0, lambda: fired.append("early"))
    due = clock.call_at(2.0, lambda: fired.append("due"))
    early.cancel()
    assert clock.pending_timers == 1
    clock.advance(2.0)
    due.cancel()  # due, its callback queued on the loop, not yet run
    await _turns()
    assert fired == []


async def test_timers_fire_in_deadline_order_and_past_deadlines_fire_at_once() -> None:
    clock = ManualClock()
    clock.advance(10)
    fired: list[str] = []
    clock.call_at(12.0, lambda: fired.append("b"))
    clock.call_at(11.0, lambda: fired.append("a"))
    clock.call_at(3.0, lambda: fired.append("past"))
    await _turns()
    assert fired == ["past"]
    clock.advance(5)
    await _turns()
    assert fired == ["past", "a", "b"]


async def test_a_cancelled_sleep_is_no_longer_pending() -> None:
    clock = ManualClock()
    sleeper = asyncio.ensure_future(clock.sleep(30))
    await _turns()
    assert clock.pending_timers == 1
    sleeper.cancel()
    await asyncio.gather(sleeper, return_exceptions=True)
    assert clock.pending_timers == 0


async def test_system_clock_call_at_fires_at_the_monotonic_deadline() -> None:
    clock = SystemClock()
    done = asyncio.get_running_loop().create_future()
    deadline = clock.monotonic() + 0.05
    clock.call_at(deadline, lambda: done.set_result(clock.monotonic()))
    fired_at = await asyncio.wait_for(done, 10)
    assert fired_at >= deadline - 0.005  # the loop's clock resolution
    assert time.monotonic() >= deadline - 0.005
