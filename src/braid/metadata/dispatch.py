"""Ordered, asynchronous delivery of notifications and session events to listeners.

Every backend posts changes here (from the event loop or from its own worker thread) in the order
they happened; one delivery task per store calls the listeners in that order, outside any backend
lock. Sync and async listeners are both supported; a listener that raises is logged once and the
others still run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from braid.metadata.api import Listener, Notification, SessionEvent, SessionListener

log = logging.getLogger(__name__)

_STOP = object()


class ListenerDispatcher:
    """Holds a store's listeners and delivers posted items to them in post order."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._listeners: list[Listener] = []
        self._session_listeners: list[SessionListener] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[object] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._guard = threading.Lock()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Attach to ``loop``, the loop listeners run on (the first bind wins)."""
        with self._guard:
            if self._loop is None:
                self._loop = loop

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._remove(self._listeners, listener)

    def add_session_listener(self, listener: SessionListener) -> Callable[[], None]:
        self._session_listeners.append(listener)
        return lambda: self._remove(self._session_listeners, listener)

    @staticmethod
    def _remove(items: list[Any], item: object) -> None:
        try:
            items.remove(item)
        except ValueError:
            pass  # unregistering twice is harmless

    @property
    def has_listeners(self) -> bool:
        return bool(self._listeners or self._session_listeners)

    def post(self, item: Notification | SessionEvent) -> None:
        """Queue ``item`` for delivery; safe to call from any thread."""
        loop = self._loop
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # nobody could have registered a listener that runs yet
            self.bind(loop)
            loop = self._loop
            assert loop is not None
        if loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._enqueue(item)
        else:
            try:
                loop.call_soon_threadsafe(self._enqueue, item)
            except RuntimeError:
                pass  # the loop closed meanwhile; nobody is left to tell

    def _enqueue(self, item: object) -> None:
        if self._closed:
            return
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._task = asyncio.get_running_loop().create_task(
                self._run(self._queue), name=f"metadata-listeners-{self._owner}"
            )
        self._queue.put_nowait(item)

    async def _run(self, queue: asyncio.Queue[object]) -> None:
        while True:
            item = await queue.get()
            if item is _STOP:
                return
            if isinstance(item, Notification):
                for listener in list(self._listeners):
                    await self._call(listener, item)
            else:
                for session_listener in list(self._session_listeners):
                    await self._call(session_listener, item)

    async def _call(self, listener: Callable[[Any], Any], item: object) -> None:
        try:
            result = listener(item)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("metadata listener %r failed on %s; ignored", listener, item)

    async def close(self, *, drain: bool = True) -> None:
        """Stop delivering. With ``drain``, items already queued are delivered first."""
        if self._closed:
            return
        task = self._task
        if task is not None and self._queue is not None:
            if task is asyncio.current_task():
                # Closed from inside a listener: let the delivery task finish by itself.
                self._queue.put_nowait(_STOP)
            elif drain and not task.done():
                self._queue.put_nowait(_STOP)
                try:
                    async with asyncio.timeout(5.0):
                        await asyncio.shield(task)
                except (TimeoutError, asyncio.CancelledError):
                    task.cancel()
            else:
                task.cancel()
        self._closed = True
        self._listeners.clear()
        self._session_listeners.clear()
