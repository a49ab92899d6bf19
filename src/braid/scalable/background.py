"""Fire-and-forget tasks of the scalable-topic layer (drain-event rebalances, namespace-watch
republishing): each is referenced until it ends (asyncio keeps only weak references), a failure
is logged once, and the owner cancels whatever is still running when it closes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class BackgroundTasks:
    """The running background tasks of one owner."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` in the background; its failure is logged, not raised."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("scalable-topic background task failed: %r", task.exception())

    def cancel(self) -> None:
        """Cancel every task still running."""
        for task in list(self._tasks):
            task.cancel()


__all__ = ["BackgroundTasks"]
