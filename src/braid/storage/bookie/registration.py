"""A bookie's registration in its storage cluster: an ephemeral node in the writable or the
read-only list (:mod:`braid.storage.bookie_registry`), moved as the disk fills and frees.

:class:`BookieRegistrar` is the one owner of that node. :meth:`~BookieRegistrar.register` creates
it; if a node of the same id exists from another session (a bookie that crashed a moment ago,
whose session has not expired yet, or another live bookie with the same id), it waits for it to
go, up to a deadline, then refuses to start with :class:`BookieAlreadyRegistered` - two bookies
must never answer for one id. :meth:`~BookieRegistrar.set_read_only` moves the registration:
the new node is created before the old one is deleted, so the bookie never looks gone; readers of
the lists treat a bookie in both as read-only. :meth:`~BookieRegistrar.unregister` deletes it (a
clean stop does this first, so writers move off before the port closes).
"""

from __future__ import annotations

import dataclasses
import logging

from braid.clock import Clock, SystemClock
from braid.core.errors import AlreadyExistsError
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound
from braid.storage.api import StorageError
from braid.storage.bookie_registry import (
    BookieRegistration,
    BookieState,
    encode_registration,
    registration_path,
)

log = logging.getLogger(__name__)


class BookieAlreadyRegistered(StorageError, AlreadyExistsError):
    """Another live bookie is registered under this id."""


class BookieRegistrar:
    """Keeps one bookie's ephemeral registration in the right list."""

    def __init__(
        self,
        store: MetadataStore,
        cluster_name: str,
        registration: BookieRegistration,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._cluster = cluster_name
        self._reg = registration
        self._clock: Clock = clock or SystemClock()
        self._registered = False

    @property
    def registration(self) -> BookieRegistration:
        return self._reg

    def _path(self, state: BookieState) -> str:
        return registration_path(self._cluster, self._reg.bookie_id, state)

    async def register(self, *, wait_s: float = 30.0, poll_s: float = 0.5) -> None:
        """Create the registration node, waiting up to ``wait_s`` for a stale one to expire.

        Raises:
            BookieAlreadyRegistered: a node of this id from another session is still there.
        """
        deadline = self._clock.monotonic() + wait_s
        for state in BookieState:
            while True:
                stat = await self._store.exists(self._path(state))
                if stat is None or stat.owner == self._store.session_id:
                    break
                if self._clock.monotonic() >= deadline:
                    raise BookieAlreadyRegistered(
                        f"bookie {self._reg.bookie_id} is already registered by another session "
                        f"({self._path(state)}): another bookie runs with this id, or a crashed "
                        "one's session has not expired yet"
                    )
                log.info(
                    "bookie %s: waiting for a stale registration to expire", self._reg.bookie_id
                )
                await self._clock.sleep(poll_s)
        await self._put(self._reg)
        self._registered = True
        log.info(
            "bookie %s registered (%s) at %s:%d",
            self._reg.bookie_id,
            self._reg.state.value,
            self._reg.host,
            self._reg.port,
        )

    async def _put(self, reg: BookieRegistration) -> None:
        path = self._path(reg.state)
        try:
            await self._store.put(path, encode_registration(reg), -1, ephemeral=True)
        except BadVersion:
            # Ours from this session (a retried move): overwrite it.
            await self._store.put(path, encode_registration(reg), None, ephemeral=True)

    async def set_read_only(self, reason: str | None) -> None:
        """Move the registration to the read-only list (``reason`` given) or back."""
        state = BookieState.WRITABLE if reason is None else BookieState.READ_ONLY
        if state is self._reg.state and reason == self._reg.read_only_reason:
            return
        old = self._reg
        self._reg = dataclasses.replace(old, state=state, read_only_reason=reason)
        if not self._registered:
            return
        await self._put(self._reg)
        if old.state is not state:
            try:
                await self._store.delete(self._path(old.state))
            except NodeNotFound:
                pass
            log.warning(
                "bookie %s moved to the %s list%s",
                old.bookie_id,
                state.value,
                f": {reason}" if reason else "",
            )

    async def unregister(self) -> None:
        """Delete the registration (idempotent)."""
        if not self._registered:
            return
        self._registered = False
        try:
            await self._store.delete(self._path(self._reg.state))
        except NodeNotFound:
            pass
