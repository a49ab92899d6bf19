"""Waiting for a watch's first update: the step every watch session of the client shares.

A session registers its handler on a connection, sends its watch command and then waits - at most
the operation timeout - for the future its handler completes with the first update (or fails
with the watch's establishment error). Whatever ends the wait other than that update (the
timeout, a cancellation, the error) gives the registration back, so a connection never keeps the
handler of a session that did not start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from braid.core.errors import DeadlineExceededError


async def await_first_update(
    first: asyncio.Future[None], within: float, unregister: Callable[[], None], what: str
) -> None:
    """Wait for ``first``; on anything else, call ``unregister`` and re-raise.

    Raises:
        DeadlineExceededError: no first update within ``within`` seconds ("no {what} within
            ...").
    """
    try:
        async with asyncio.timeout(within):
            await first
    except TimeoutError:
        unregister()
        raise DeadlineExceededError(f"no {what} within {within:g}s") from None
    except BaseException:
        unregister()
        raise


__all__ = ["await_first_update"]
