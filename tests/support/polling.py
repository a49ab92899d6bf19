"""Wait for a condition with a deadline instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def eventually(
    condition: Callable[[], bool | Awaitable[bool]],
    *,
    within: float = 10.0,
    interval: float = 0.005,
    message: str = "condition",
) -> None:
    """Poll ``condition`` until it is true; fail with ``message`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {message}")
        await asyncio.sleep(interval)
