"""A mutual-exclusion lock over any :class:`~braid.metadata.api.MetadataStore`.

The lock is an ephemeral node created with ``expected_version=-1``: whoever created it holds it
until :meth:`Lock.release`, or until its session ends (the node then vanishes and a waiter gets
it). ``held`` turns false when the session is lost, since the node is gone with it. The holder may
replace the value others read (:meth:`Lock.update`, a CAS on the node it created).
"""

from __future__ import annotations

import asyncio
import contextlib

from braid.core.errors import IllegalStateError
from braid.metadata.api import (
    BadVersion,
    MetadataStore,
    NodeNotFound,
    Notification,
    NotificationType,
    SessionEvent,
)
from braid.metadata.paths import validate_writable_path


class Lock:
    """An exclusive lock at ``path``; ``value`` tells others who holds it."""

    def __init__(self, store: MetadataStore, path: str, value: bytes = b"") -> None:
        self._store = store
        self._path = validate_writable_path(path)
        self._value = value
        self._version: int | None = None
        self._released = asyncio.Event()
        self._session_lost = False
        self._unsubscribe = [
            store.register_listener(self._on_notification),
            store.register_session_listener(self._on_session),
        ]

    @property
    def held(self) -> bool:
        return self._version is not None and not self._session_lost

    async def try_acquire(self) -> bool:
        """Take the lock if it is free; returns whether this holder now has it."""
        if self.held:
            return True
        try:
            stat = await self._store.put(self._path, self._value, -1, ephemeral=True)
        except BadVersion:
            return False
        self._version = stat.version
        return True

    async def acquire(self) -> None:
        """Wait until the lock is taken by this holder (bound it with ``asyncio.timeout``)."""
        while True:
            self._released.clear()
            if await self.try_acquire():
                return
            # The holder may have gone between our put and now: only wait if it is there.
            if await self._store.exists(self._path) is not None:
                await self._released.wait()

    async def update(self, value: bytes) -> None:
        """Replace the value others read (the holder's details changed), keeping the lock.

        Raises:
            IllegalStateError: the lock is not held.
            BadVersion: the node changed under the holder (its session was lost).
        """
        if not self.held:
            raise IllegalStateError(f"lock {self._path} is not held")
        stat = await self._store.put(self._path, value, self._version)
        self._value = value
        self._version = stat.version

    async def release(self) -> None:
        """Give the lock up (no-op when not held)."""
        version, self._version = self._version, None
        if version is not None and not self._session_lost:
            with contextlib.suppress(NodeNotFound, BadVersion):
                await self._store.delete(self._path, version)

    async def close(self) -> None:
        """Release the lock and stop watching."""
        await self.release()
        for unsubscribe in self._unsubscribe:
            unsubscribe()

    def _on_notification(self, notification: Notification) -> None:
        if notification.path == self._path and notification.type is NotificationType.DELETED:
            self._released.set()

    def _on_session(self, event: SessionEvent) -> None:
        if event is SessionEvent.SESSION_LOST:
            self._session_lost = True
            self._version = None
