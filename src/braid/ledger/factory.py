"""The managed-ledger factory: opens, caches, lists and deletes managed ledgers by name.

One factory per broker. It maps names onto metadata paths under ``root`` (see ``names.py``),
hands out one :class:`ManagedLedgerImpl` per name (concurrent opens of the same name share the
work) and forgets an instance once it is closed, deleted or fenced by another owner.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from braid.clock import Clock, SystemClock
from braid.ledger.api import (
    ManagedLedger,
    ManagedLedgerClosed,
    ManagedLedgerConfig,
    ManagedLedgerNotFound,
)
from braid.ledger.managed_ledger import ManagedLedgerImpl
from braid.ledger.names import decode_segment, ledger_path, validate_ledger_name
from braid.ledger.opening import open_managed_ledger
from braid.ledger.routing import StorageRouting
from braid.metadata.api import InvalidPath, MetadataStore, Notification, NotificationType
from braid.metadata.paths import validate_writable_path

DEFAULT_ROOT = "/managed-ledgers"


class DefaultManagedLedgerFactory:
    """Implements :class:`braid.ledger.api.ManagedLedgerFactory` over a metadata store and the
    storage clusters reachable through ``storage`` (a ``StorageRouter``)."""

    def __init__(
        self,
        metadata: MetadataStore,
        storage: StorageRouting,
        *,
        clock: Clock | None = None,
        root: str = DEFAULT_ROOT,
    ) -> None:
        try:
            self._root = validate_writable_path(root)
        except InvalidPath as exc:
            raise InvalidPath(f"bad managed-ledger root {root!r}: {exc}") from exc
        self._metadata = metadata
        self._storage = storage
        self._clock: Clock = clock or SystemClock()
        self._ledgers: dict[str, ManagedLedgerImpl] = {}
        self._opening: dict[str, asyncio.Task[ManagedLedgerImpl]] = {}
        self._closed = False

    async def open(
        self,
        name: str,
        config: ManagedLedgerConfig | None = None,
        *,
        create_if_missing: bool = True,
    ) -> ManagedLedger:
        """Open (or create) managed ledger ``name``; an already open one is returned as is
        (with ``config`` applied when given).

        Raises:
            InvalidManagedLedgerName: ``name`` cannot be a managed-ledger name.
            ManagedLedgerNotFound: missing and ``create_if_missing`` is false.
            ManagedLedgerClosed: the factory was closed.
        """
        return await self.open_impl(name, config, create_if_missing=create_if_missing)

    async def open_impl(
        self,
        name: str,
        config: ManagedLedgerConfig | None = None,
        *,
        create_if_missing: bool = True,
    ) -> ManagedLedgerImpl:
        """:meth:`open`, typed with the concrete class (tests and tools use its extras)."""
        path = ledger_path(self._root, name)
        if self._closed:
            raise ManagedLedgerClosed("the managed-ledger factory is closed")
        existing = self._ledgers.get(name)
        if existing is not None:
            if config is not None:
                existing.config = config
            return existing
        task = self._opening.get(name)
        if task is None:
            task = asyncio.create_task(
                open_managed_ledger(
                    name=name,
                    path=path,
                    root=self._root,
                    config=config or ManagedLedgerConfig(),
                    metadata=self._metadata,
                    storage=self._storage,
                    clock=self._clock,
                    create_if_missing=create_if_missing,
                    on_gone=self._forget,
                )
            )
            self._opening[name] = task
            task.add_done_callback(lambda _t: self._opening.pop(name, None))
        ml = await asyncio.shield(task)
        if not ml.is_fenced and not self._closed:
            self._ledgers.setdefault(name, ml)
        return ml

    def opened(self, name: str) -> ManagedLedgerImpl | None:
        """The managed ledger ``name`` if this process has it open (owns it), else ``None``."""
        return self._ledgers.get(name)

    def opening(self, name: str) -> bool:
        """This process is opening managed ledger ``name`` now (its cursors are being loaded)."""
        return name in self._opening

    def request_rollover_all(self) -> int:
        """Ask every managed ledger open here to roll its current ledger over now (PIP-470:
        new writes move to the active storage cluster); returns how many were asked."""
        for ml in self._ledgers.values():
            ml.request_rollover()
        return len(self._ledgers)

    @property
    def root(self) -> str:
        """The metadata path the managed ledgers live under."""
        return self._root

    def _forget(self, ml: ManagedLedgerImpl) -> None:
        if self._ledgers.get(ml.name) is ml:
            del self._ledgers[ml.name]

    @property
    def storage(self) -> StorageRouting:
        """The storage clusters this factory's ledgers live on (also what other ledger users of
        the broker, such as the schema registry, write to)."""
        return self._storage

    def register_listener(self, listener: Callable[[str, bool], None]) -> Callable[[], None]:
        """Call ``listener(name, created)`` whenever a managed ledger is created (``True``) or
        deleted (``False``) in the metadata store, by this process or another sharing the store.
        Returns a function that unregisters it."""
        prefix = f"{self._root}/"

        def on_notification(notification: Notification) -> None:
            path = notification.path
            if not path.startswith(prefix) or "/" in path[len(prefix) :]:
                return  # not a managed ledger's node (a cursor, the root itself)
            if notification.type is NotificationType.CREATED:
                listener(decode_segment(path[len(prefix) :]), True)
            elif notification.type is NotificationType.DELETED:
                listener(decode_segment(path[len(prefix) :]), False)

        return self._metadata.register_listener(on_notification)

    async def exists(self, name: str) -> bool:
        """True when managed ledger ``name`` exists in the metadata store."""
        return await self._metadata.exists(ledger_path(self._root, name)) is not None

    async def delete(self, name: str) -> None:
        """Delete managed ledger ``name`` (taking it over first if another instance owns it).

        Raises:
            ManagedLedgerNotFound: it does not exist.
        """
        validate_ledger_name(name)
        ml = await self.open_impl(name, create_if_missing=False)
        await ml.delete()

    async def list(self) -> Sequence[str]:
        """Names of every managed ledger under this factory's root, sorted."""
        return sorted(decode_segment(child) for child in await self._metadata.children(self._root))

    async def close(self) -> None:
        """Close every open managed ledger. Idempotent."""
        self._closed = True
        for task in list(self._opening.values()):
            await asyncio.gather(task, return_exceptions=True)
        for ml in list(self._ledgers.values()):
            await ml.close()
        self._ledgers.clear()


__all__ = ["DEFAULT_ROOT", "DefaultManagedLedgerFactory", "ManagedLedgerNotFound"]
