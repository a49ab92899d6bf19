"""A storage cluster of bookie processes found through their registrations.

:class:`RegisteredBookieSet` is the :class:`~braid.storage.bookie_set.BookieSet` of a cluster whose
bookies are separate processes (``braid bookie``): membership follows the ephemeral
registrations under ``/storage/<cluster>/bookies/{available,readonly}``
(:mod:`braid.storage.bookie_registry`), watched through the metadata store's notifications. A
client (:class:`~braid.storage.bookie_net_client.NetBookieClient`) is made the first time a bookie
is asked for and kept for the set's life: a bookie that re-registers at another address gets its
client pointed there; one that left keeps its client, whose requests fail with
``BookieUnavailable`` once its connection is gone (its ledgers are read from other replicas).

A bookie registered in both lists (for a moment, while it moves) counts as read-only. Racks come
from a rack mapping (``bookkeeperClientRackMappingFile``: ``bookieId=/region/rack`` lines) when
given, else from the bookie's registration (its ``bookieRack``).

:func:`open_remote_cluster` returns a cluster's ``BookKeeperClient`` over such a set: membership
changes reach placement, the writers' ensemble changes and the auditor through the set's
listeners.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from braid.clock import Clock, SystemClock
from braid.core.errors import InvalidInputError
from braid.metadata.api import MetadataError, MetadataStore, Notification
from braid.storage.api import BookieUnavailable, StorageError
from braid.storage.bookie_client import BookieClient
from braid.storage.bookie_net_client import NetBookieClient
from braid.storage.bookie_registry import (
    BookieRegistration,
    InvalidRegistration,
    available_path,
    decode_registration,
    readonly_path,
)
from braid.storage.bookie_set import BookieSet, MembershipListener
from braid.storage.client import BookKeeperClient, ClientSettings
from braid.storage.ledger_metadata import validate_cluster_name

log = logging.getLogger(__name__)


class InvalidRackMapping(StorageError, InvalidInputError):
    """A rack mapping file that cannot be read or has a malformed line."""


def load_rack_mapping(path: Path) -> dict[str, str]:
    """Read ``bookieId=/region/rack`` lines (``#`` comments, blank lines ignored).

    Raises:
        InvalidRackMapping: the file is unreadable, or a line is not ``id=/location``.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRackMapping(f"rack mapping {path}: {exc}") from None
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        bookie, sep, rack = line.partition("=")
        if not sep or not bookie.strip() or not rack.strip().startswith("/"):
            raise InvalidRackMapping(
                f"{path}:{number}: expected bookieId=/region/rack, got {line!r}"
            )
        out[bookie.strip()] = rack.strip()
    return out


class RegisteredBookieSet:
    """The bookies registered in a cluster's metadata root, kept current by watching it."""

    def __init__(
        self,
        store: MetadataStore,
        cluster_name: str,
        *,
        rack_mapping: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        add_timeout_s: float = 10.0,
        read_timeout_s: float = 10.0,
        after_close: Sequence[Callable[[], Awaitable[None]]] = (),
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """Use :meth:`open` (it reads the lists once before returning). ``after_close`` run, in
        order, once :meth:`close` closed the clients (an owner's clean-up); ``tls``: every
        bookie is reached over TLS with this context (:mod:`braid.storage.bookie_tls`)."""
        self._tls = tls
        self._store = store
        self._cluster = validate_cluster_name(cluster_name)
        self._available = available_path(cluster_name)
        self._readonly = readonly_path(cluster_name)
        self._racks = dict(rack_mapping or {})
        self._clock: Clock = clock or SystemClock()
        self._timeouts = (add_timeout_s, read_timeout_s)
        self._regs: dict[str, BookieRegistration] = {}
        self._writable: list[str] = []
        self._read_only: list[str] = []
        self._clients: dict[str, NetBookieClient] = {}
        self._listeners: list[MembershipListener] = []
        self._refresh_task: asyncio.Task[None] | None = None
        self._dirty = False
        self._changed = asyncio.Event()
        self._after_close = list(after_close)
        self._unlisten = store.register_listener(self._on_notification)
        self._closed = False

    @classmethod
    async def open(
        cls, store: MetadataStore, cluster_name: str, **options: object
    ) -> RegisteredBookieSet:
        bookie_set = cls(store, cluster_name, **options)  # type: ignore[arg-type]
        await bookie_set.refresh()
        return bookie_set

    # -- BookieSet -------------------------------------------------------------------------------
    def writable(self) -> Sequence[str]:
        return list(self._writable)

    def readonly(self) -> Sequence[str]:
        return list(self._read_only)

    def client(self, bookie_id: str) -> BookieClient:
        client = self._clients.get(bookie_id)
        if client is not None:
            return client
        reg = self._regs.get(bookie_id)
        if reg is None:
            raise BookieUnavailable(
                f"bookie {bookie_id} is not registered in cluster {self._cluster}"
            )
        client = NetBookieClient(
            bookie_id,
            reg.address,
            clock=self._clock,
            add_timeout_s=self._timeouts[0],
            read_timeout_s=self._timeouts[1],
            ssl_context=self._tls,
        )
        if bookie_id in self._read_only:
            client.set_read_only(reg.read_only_reason or "registered read-only")
        self._clients[bookie_id] = client
        return client

    def rack_of(self, bookie_id: str) -> str | None:
        rack = self._racks.get(bookie_id)
        if rack is not None:
            return rack
        reg = self._regs.get(bookie_id)
        return None if reg is None else reg.rack

    def add_listener(self, listener: MembershipListener) -> None:
        self._listeners.append(listener)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._unlisten()
        if self._refresh_task is not None:
            self._refresh_task.cancel()
        for client in self._clients.values():
            await client.close()
        after, self._after_close = self._after_close, []
        for step in after:
            await step()

    # -- watching --------------------------------------------------------------------------------
    def registration(self, bookie_id: str) -> BookieRegistration | None:
        """The bookie's current registration, or ``None`` when it is not registered."""
        return self._regs.get(bookie_id)

    async def wait_for_writable(self, count: int, timeout_s: float) -> None:
        """Wait until at least ``count`` bookies are writable.

        Raises:
            BookieUnavailable: not enough after ``timeout_s``.
        """
        deadline = self._clock.monotonic() + timeout_s
        while len(self._writable) < count:
            left = deadline - self._clock.monotonic()
            if left <= 0:
                raise BookieUnavailable(
                    f"cluster {self._cluster}: {len(self._writable)} writable bookies registered "
                    f"after {timeout_s:.0f}s, {count} needed (are `braid bookie` processes "
                    "running against this metadata store?)"
                )
            self._changed.clear()
            try:
                async with asyncio.timeout(min(left, 1.0)):
                    await self._changed.wait()
            except TimeoutError:
                await self.refresh()

    def _on_notification(self, event: Notification) -> None:
        path = event.path
        if path.startswith((self._available, self._readonly)) and not self._closed:
            self._dirty = True
            if self._refresh_task is None:
                self._refresh_task = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def _refresh_loop(self) -> None:
        try:
            while self._dirty and not self._closed:
                self._dirty = False
                await self.refresh()
        except MetadataError as exc:  # unreachable or closing: the next notification retries
            if not self._closed:
                log.warning(
                    "cluster %s: cannot read the bookie registrations: %s", self._cluster, exc
                )
        finally:
            self._refresh_task = None

    async def _read_list(self, parent: str) -> dict[str, BookieRegistration]:
        out: dict[str, BookieRegistration] = {}
        for name in await self._store.children(parent):
            got = await self._store.get(f"{parent}/{name}")
            if got is None:
                continue  # gone meanwhile
            try:
                out[name] = decode_registration(got[0])
            except (InvalidRegistration, InvalidInputError) as exc:
                log.warning("cluster %s: ignoring registration %s: %s", self._cluster, name, exc)
        return out

    async def refresh(self) -> None:
        """Read both lists now and apply them."""
        available = await self._read_list(self._available)
        read_only = await self._read_list(self._readonly)
        regs = {**available, **read_only}  # in both (moving): read-only wins
        writable = sorted(b for b in available if b not in read_only)
        ro = sorted(read_only)
        changed = regs != self._regs or writable != self._writable or ro != self._read_only
        self._regs, self._writable, self._read_only = regs, writable, ro
        for bookie_id, client in self._clients.items():
            reg = regs.get(bookie_id)
            if reg is None:
                continue
            client.set_address(reg.address)
            if bookie_id in read_only:
                client.set_read_only(reg.read_only_reason or "registered read-only")
            else:
                client.set_read_only(None)
        if changed:
            log.info("cluster %s bookies: writable %s, read-only %s", self._cluster, writable, ro)
            self._changed.set()
            for listener in list(self._listeners):
                try:
                    listener()
                except Exception:
                    log.exception("bookie set listener failed")


async def open_remote_cluster(
    metadata: MetadataStore,
    cluster_name: str,
    *,
    clock: Clock | None = None,
    min_bookies: int = 1,
    wait_s: float = 30.0,
    rack_mapping: Mapping[str, str] | None = None,
    settings: ClientSettings | None = None,
    add_timeout_s: float = 10.0,
    read_timeout_s: float = 10.0,
    after_close: Sequence[Callable[[], Awaitable[None]]] = (),
    tls: ssl.SSLContext | None = None,
) -> BookKeeperClient:
    """The client of a cluster of bookie processes registered in ``metadata``, once at least
    ``min_bookies`` of them are writable (waiting up to ``wait_s``).

    The client owns its :class:`RegisteredBookieSet`: membership changes reach placement,
    ensemble changes and auto-recovery through the set's listeners. ``after_close`` run, in
    order, after the client and its set closed (an owner's clean-up: the store, in-process
    bookies); ``tls`` is the context every bookie is reached with (``None``: plain TCP).

    Raises:
        BookieUnavailable: fewer than ``min_bookies`` writable bookies registered in time.
    """
    bookies = await RegisteredBookieSet.open(
        metadata,
        cluster_name,
        rack_mapping=rack_mapping,
        clock=clock,
        add_timeout_s=add_timeout_s,
        read_timeout_s=read_timeout_s,
        after_close=after_close,
        tls=tls,
    )
    try:
        await bookies.wait_for_writable(min_bookies, wait_s)
    except BaseException:
        await bookies.close()
        raise
    return BookKeeperClient(metadata, cluster_name, bookies, clock=clock, settings=settings)


def _conforms(bookies: RegisteredBookieSet, client: NetBookieClient) -> None:
    # Never called: makes mypy prove the classes implement the protocols.
    as_set: BookieSet = bookies
    as_client: BookieClient = client
    del as_set, as_client
