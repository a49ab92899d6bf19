"""Wait for a condition with a deadline instead of sleeping a fixed time: the suite's one polling
helper, in an async form (:func:`eventually`, for code on the test's event loop) and a blocking one
(:func:`wait_for`, for tests driving the official client or a child process from a thread).

Both check the condition first and then every ``interval`` seconds until ``within`` seconds have
passed, then fail with an ``AssertionError`` naming what was awaited. ``message`` may be a callable,
evaluated at failure time, so the error can show the state the condition was stuck in.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

Message = str | Callable[[], str]


def _timed_out(within: float, message: Message) -> AssertionError:
    text = message() if callable(message) else message
    return AssertionError(f"timed out after {within}s waiting for {text}")


async def eventually(
    condition: Callable[[], bool | Awaitable[bool]],
    *,
    within: float = 10.0,
    interval: float = 0.005,
    message: Message = "condition",
) -> None:
    """Poll ``condition`` (sync or async) on the running loop until it is true."""
    deadline = time.monotonic() + within
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise _timed_out(within, message)
        await asyncio.sleep(interval)


def wait_for(
    condition: Callable[[], bool],
    *,
    within: float = 10.0,
    interval: float = 0.02,
    message: Message = "condition",
) -> None:
    """Poll ``condition`` from a blocking test until it is true (never on an event loop)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise _timed_out(within, message)
        time.sleep(interval)
