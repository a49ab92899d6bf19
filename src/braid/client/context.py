"""What every producer, consumer and session of one client shares.

A :class:`ClientContext` holds the settings, the connection pool, the id generator (producer,
consumer, session and registration ids are unique per client, so they never collide on a shared
connection), the background tasks (tracked, their failures logged once, all cancelled on close),
and :meth:`connection_for` - the one way to reach the broker serving a segment: the broker the
layout advertised, else (none advertised, or it failed the last attempt: :meth:`route_failed`) a
standard lookup of the segment's topic.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Coroutine
from typing import Any

from braid.client.backoff import Backoff
from braid.client.connection import BrokerConnection
from braid.client.errors import AlreadyClosedError
from braid.client.lookup import lookup_broker
from braid.client.pool import ConnectionPool
from braid.client.settings import ClientSettings
from braid.core.topic_layout import SegmentRoute

log = logging.getLogger(__name__)


class ClientContext:
    """Shared state of one client; lives on the client's event loop."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self.pool = ConnectionPool(settings)
        self.loop = asyncio.get_running_loop()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Segment topics whose advertised broker failed: looked up on the next attempt.
        self._stale_routes: set[str] = set()
        self.closed = False

    def next_id(self) -> int:
        """A producer/consumer/session id unique within this client."""
        return next(self._ids)

    def backoff(self) -> Backoff:
        """A fresh backoff with the client's settings."""
        return Backoff(self.settings.backoff_initial, self.settings.backoff_max)

    def deadline(self, timeout: float | None = None) -> float:
        """``now + timeout`` (default: the operation timeout) on the loop clock."""
        return self.loop.time() + (self.settings.operation_timeout if timeout is None else timeout)

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        """Run ``coro`` in the background; an unexpected failure is logged once with ``what``."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._finished(t, what))
        return task

    def _finished(self, task: asyncio.Task[Any], what: str) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and not isinstance(exc, AlreadyClosedError):
            log.error("%s failed", what, exc_info=exc)

    async def connection_for(self, route: SegmentRoute) -> BrokerConnection:
        """The connection to the broker serving the segment behind ``route``.

        Raises:
            ConnectError, NotConnectedError, TimeoutError: transient (retry with backoff).
            NotFoundError, AuthorizationError, ...: the lookup was refused.
        """
        if self.closed:
            raise AlreadyClosedError("the client is closed")
        url = route.broker_url
        if not url or route.topic in self._stale_routes:
            url = await lookup_broker(self.pool, route.topic)
            self._stale_routes.discard(route.topic)
        return await self.pool.get(url)

    def route_failed(self, route: SegmentRoute) -> None:
        """An attach through ``route`` failed transiently: the broker the layout advertised may be
        gone or no longer own the segment (a failover, a moved bundle), so the next
        :meth:`connection_for` looks the segment up instead (its owner answers, or a broker
        redirects there)."""
        if route.broker_url:
            self._stale_routes.add(route.topic)

    async def close(self) -> None:
        """Cancel background work and close every connection."""
        self.closed = True  # set first: attach loops see it when their task is cancelled
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.pool.close()


__all__ = ["ClientContext"]
