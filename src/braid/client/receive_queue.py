"""A consumer's receive queue: one FIFO fed by every per-segment consumer, read from any thread.

Per-segment consumers append decoded messages on the event loop (:meth:`ReceiveQueue.put_many`);
the application takes them either with ``await`` on the loop (:meth:`get` / :meth:`get_many`)
or from its own threads through the blocking facade (:meth:`get_blocking` /
:meth:`get_many_blocking`), without a hop through the loop per message. A ``threading.Lock``
guards the deque; async readers park on loop futures, blocking readers on a condition variable,
and a put wakes whichever kind is waiting.

:meth:`purge` removes a segment's undelivered messages (on a reconnect the broker redelivers
them; on a detach they belong to another consumer). A timeout of ``None`` waits forever, ``0``
polls; a timeout that elapses returns ``None`` (or fewer messages), never raises.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterable

from braid.client.errors import AlreadyClosedError
from braid.client.message import Message


class ReceiveQueue:
    """Messages waiting for the application (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str) -> None:
        self._loop = loop
        self._name = name
        self._items: collections.deque[Message] = collections.deque()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._sync_waiting = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False

    def __len__(self) -> int:
        return len(self._items)

    # -- feeding (event loop) -----------------------------------------------------------------

    def put_many(self, messages: list[Message]) -> None:
        """Append messages in order and wake readers."""
        if not messages:
            return
        with self._lock:
            if self._closed:
                return
            self._items.extend(messages)
            if self._sync_waiting:
                self._cond.notify(len(messages))
        waiters = self._waiters
        wake = len(messages)
        while waiters and wake:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                wake -= 1

    def purge(self, predicate: Callable[[Message], bool]) -> list[Message]:
        """Remove (and return) the queued messages matching ``predicate``."""
        with self._lock:
            removed = [m for m in self._items if predicate(m)]
            if removed:
                kept = [m for m in self._items if not predicate(m)]
                self._items.clear()
                self._items.extend(kept)
            return removed

    def first(self, predicate: Callable[[Message], bool]) -> Message | None:
        """The oldest queued message matching ``predicate`` (left in the queue), or ``None``."""
        with self._lock:
            for message in self._items:
                if predicate(message):
                    return message
            return None

    def close(self) -> None:
        """Wake every reader; later reads raise ``AlreadyClosedError`` once the queue is empty."""
        with self._lock:
            self._closed = True
            self._items.clear()
            self._cond.notify_all()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def _closed_error(self) -> AlreadyClosedError:
        return AlreadyClosedError(f"consumer {self._name} is closed")

    # -- reading on the loop ------------------------------------------------------------------

    def take(self, max_messages: int) -> list[Message]:
        """Pop up to ``max_messages`` without waiting (any thread)."""
        with self._lock:
            items = self._items
            if not items:
                return []
            if max_messages == 1:
                return [items.popleft()]
            count = min(max_messages, len(items))
            return [items.popleft() for _ in range(count)]

    async def get(self, timeout: float | None) -> Message | None:  # noqa: ASYNC109
        """The next message, waiting up to ``timeout`` seconds (``None`` = forever)."""
        got = await self.get_many(1, timeout)
        return got[0] if got else None

    async def get_many(self, max_messages: int, timeout: float | None) -> list[Message]:  # noqa: ASYNC109
        """Up to ``max_messages`` messages: what is queued now, else the first arrivals.

        Waits up to ``timeout`` seconds for at least one; returns ``[]`` if none came.
        """
        deadline = None if timeout is None else self._loop.time() + timeout
        while True:
            got = self.take(max_messages)
            if got:
                return got
            if self._closed:
                raise self._closed_error()
            remaining = None if deadline is None else deadline - self._loop.time()
            if remaining is not None and remaining <= 0:
                return []
            waiter: asyncio.Future[None] = self._loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(remaining):
                    await waiter
            except TimeoutError:
                return self.take(max_messages)
            finally:
                if not waiter.done():
                    waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    # -- reading from application threads -----------------------------------------------------

    def get_blocking(self, timeout: float | None) -> Message | None:
        """The next message, blocking the calling thread up to ``timeout`` seconds."""
        got = self.get_many_blocking(1, timeout)
        return got[0] if got else None

    def get_many_blocking(self, max_messages: int, timeout: float | None) -> list[Message]:
        """Up to ``max_messages`` messages, blocking until at least one or the timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._items:
                if self._closed:
                    raise self._closed_error()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return []
                self._sync_waiting += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._sync_waiting -= 1
            items = self._items
            if max_messages == 1:
                return [items.popleft()]
            count = min(max_messages, len(items))
            return [items.popleft() for _ in range(count)]

    def extend_front(self, messages: Iterable[Message]) -> None:
        """Put messages back at the head (in order), e.g. after a partial take."""
        with self._lock:
            self._items.extendleft(reversed(list(messages)))


__all__ = ["ReceiveQueue"]
