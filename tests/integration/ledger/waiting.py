"""Polling a condition with a deadline (tests never sleep to wait for something)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def wait_until(condition: Callable[[], bool], deadline_s: float = 10.0) -> None:
    """Yield to the event loop until ``condition()`` holds; fail after ``deadline_s`` seconds."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {deadline_s} s")
        await asyncio.sleep(0.001)
