"""Ledger handles of :class:`~braid.storage.client.BookKeeperClient`: the writer and the reader.

A handle asks its client only what :class:`HandleClient` lists (bookies, metadata, reads).

The writer stripes entry ``e`` over the write set ``ensemble[(e + i) % E] for i < write_quorum`` and
acknowledges it once ``ack_quorum`` of them have it durably - and only after every lower entry was
acknowledged, so ``last_add_confirmed`` (LAC) only moves forward without gaps. Each add carries the
writer's LAC and running length so recovery can find both on the bookies (BookKeeper's piggyback).
The first failed add breaks the handle: later adds fail too (the ledger will be recovered and closed
by its next owner and a new ledger started). An add that cannot reach an ack quorum of *writable*
bookies (a read-only bookie: its disk is full) is refused before anything is sent, with
``StorageReadOnly``: no entry id is used, the handle stays intact and takes adds again once the
bookies are writable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from braid.storage.api import (
    AddCompletion,
    BookieUnavailable,
    InvalidEntryId,
    LedgerClosed,
    LedgerEntry,
    LedgerFenced,
    LedgerMetadata,
    LedgerState,
    NoSuchEntry,
    StorageError,
    StorageReadOnly,
)
from braid.storage.bookie_client import BookieClient

log = logging.getLogger(__name__)
_Ctx = TypeVar("_Ctx")


class HandleClient(Protocol):
    """What a ledger handle may ask of the client that opened it (``BookKeeperClient``)."""

    def bookies_for(self, md: LedgerMetadata) -> dict[str, BookieClient]:
        """The clients of the ledger's ensemble that the client knows."""
        ...

    async def read_metadata(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        """The ledger's metadata and its version."""
        ...

    async def write_metadata(self, md: LedgerMetadata, version: int) -> bool:
        """CAS ``md`` over ``version``; ``False`` if the version moved."""
        ...

    async def read_range(
        self, md: LedgerMetadata, first: int, last: int, lac: int
    ) -> list[LedgerEntry]:
        """Entries ``first..last`` (<= ``lac``) of the ledger, from its bookies."""
        ...

    async def probe_lac(self, md: LedgerMetadata, known: int) -> int:
        """How far the writer of an open ledger got (for tailing readers)."""
        ...


def write_set(md: LedgerMetadata, entry_id: int) -> list[str]:
    """Bookie ids that store ``entry_id`` of the ledger described by ``md``."""
    size = len(md.ensemble)
    return [md.ensemble[(entry_id + i) % size] for i in range(md.write_quorum)]


def quorum_error(ledger_id: int, errors: Sequence[BaseException]) -> StorageError:
    """The error to raise when a quorum could not be reached."""
    for exc in errors:
        if isinstance(exc, LedgerFenced):
            return exc
    for exc in errors:
        if isinstance(exc, StorageError):
            return exc
    return BookieUnavailable(f"ledger {ledger_id}: not enough bookies answered: {errors!r}")


class _InFlight:
    """One add between send and confirmation."""

    __slots__ = ("acked", "asked", "callback", "ctx", "errors", "ok", "size")

    def __init__(self, callback: AddCompletion[Any], ctx: Any, size: int, asked: int) -> None:
        self.callback = callback
        self.ctx = ctx
        self.size = size
        self.asked = asked  # copies requested (write quorum)
        self.ok = 0
        self.errors: list[StorageError] | None = None  # made on the first failure only
        self.acked = False


def _report(add: _InFlight, entry_id: int, error: BaseException | None) -> None:
    try:
        add.callback(entry_id, error, add.ctx)
    except Exception:  # one broken callback must not stop the adds confirmed after it
        log.exception("add completion callback failed")


def _resolve(entry_id: int, error: BaseException | None, waiter: asyncio.Future[int]) -> None:
    """The completion of an awaited add: resolve its future (unless its caller gave up)."""
    if waiter.done():
        return  # the caller was cancelled; the add itself went on
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(entry_id)


class LedgerWriter:
    """The single writer of a ledger (implements :class:`~braid.storage.api.WriteHandle`)."""

    def __init__(
        self,
        client: HandleClient,
        md: LedgerMetadata,
        version: int,
        *,
        explicit_entry_ids: bool,
    ) -> None:
        self._client = client
        self._md = md
        self._version = version
        #: Made by ``create_ledger_adv``: entries come with their ids (``add_entry_with_id``).
        self._explicit_entry_ids = explicit_entry_ids
        self._bookies: dict[str, BookieClient] = client.bookies_for(md)
        self._next_id = 0
        self._lac = -1
        self._length = 0
        self._pending_length = 0
        self._loop = asyncio.get_running_loop()
        # Every add not yet confirmed or failed, by entry id.
        self._inflight: dict[int, _InFlight] = {}
        # With one bookie every entry has the same write set: skip computing it per add.
        self._fixed_set = list(md.ensemble) if len(md.ensemble) == 1 else None
        self._single: BookieClient | None = (
            self._bookies.get(md.ensemble[0]) if len(md.ensemble) == 1 else None
        )
        self._idle: asyncio.Event | None = None
        self._error: StorageError | None = None
        self._closing = False
        self._closed_md: LedgerMetadata | None = None

    @property
    def ledger_id(self) -> int:
        return self._md.ledger_id

    @property
    def cluster_name(self) -> str:
        return self._md.cluster_name

    @property
    def metadata(self) -> LedgerMetadata:
        """The metadata as of creation (or close)."""
        return self._closed_md or self._md

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def length(self) -> int:
        return self._length

    def _check_writable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closing:
            raise LedgerClosed(f"ledger {self.ledger_id} is closed")

    async def add_entry(self, data: bytes) -> int:
        """Append ``data``; returns its entry id once an ack quorum has it durably."""
        self._check_writable()
        return await self._awaited(self._next_id, data)

    def add_entry_with_callback(
        self, data: bytes, callback: AddCompletion[_Ctx], ctx: _Ctx
    ) -> None:
        """Append ``data``; ``callback(entry_id, None, ctx)`` once an ack quorum has it durably,
        in entry-id order (or ``callback(-1, error, ctx)``). The managed ledger's hot path."""
        if self._error is not None or self._closing:
            self._check_writable()  # raises
        self._add(self._next_id, data, callback, ctx)

    async def add_entry_with_id(self, entry_id: int, data: bytes) -> int:
        """Append with an explicit id (``create_ledger_adv`` ledgers only), in order 0, 1, 2..."""
        self._check_writable()
        if not self._explicit_entry_ids:
            raise InvalidEntryId(
                f"ledger {self.ledger_id}: explicit entry ids need a ledger from create_ledger_adv"
            )
        if entry_id != self._next_id:
            raise InvalidEntryId(
                f"ledger {self.ledger_id}: expected entry id {self._next_id}, got {entry_id}"
            )
        return await self._awaited(entry_id, data)

    async def _awaited(self, entry_id: int, data: bytes) -> int:
        waiter: asyncio.Future[int] = self._loop.create_future()
        self._add(entry_id, data, _resolve, waiter)
        return await waiter

    def _add(self, entry_id: int, data: bytes, callback: AddCompletion[Any], ctx: Any) -> None:
        ids = self._fixed_set or write_set(self._md, entry_id)
        single = self._single
        if single is not None:
            if single.read_only_reason is not None:
                raise StorageReadOnly(
                    f"ledger {self.ledger_id}: bookie {single.bookie_id} is read-only: "
                    f"{single.read_only_reason}"
                )
        else:
            self._check_quorum_writable(ids)
        data = bytes(data)
        self._next_id = entry_id + 1
        self._pending_length += len(data)
        self._inflight[entry_id] = _InFlight(callback, ctx, len(data), len(ids))
        # Callbacks, not a task per add: the bookie answers the writer directly, so a cancelled
        # caller can never leave a hole that stalls later adds.
        if single is not None:  # one bookie (standalone): no write set to walk
            try:
                single.send_add(
                    self._md.ledger_id, entry_id, data, self._vote, self._lac, self._pending_length
                )
            except StorageError as exc:
                self._vote(entry_id, exc)
            return
        for bookie_id in ids:
            bookie = self._bookies.get(bookie_id)
            try:
                if bookie is None:
                    raise BookieUnavailable(f"bookie {bookie_id} is not known to this client")
                bookie.send_add(
                    self._md.ledger_id, entry_id, data, self._vote, self._lac, self._pending_length
                )
            except StorageError as exc:
                self._vote(entry_id, exc)

    def _check_quorum_writable(self, ids: list[str]) -> None:
        """Refuse an add that could not reach an ack quorum of writable bookies."""
        refusals = []
        for bookie_id in ids:
            bookie = self._bookies.get(bookie_id)
            reason = "not known to this client" if bookie is None else bookie.read_only_reason
            if reason is not None:
                refusals.append(f"{bookie_id}: {reason}")
        if len(ids) - len(refusals) < self._md.ack_quorum:
            raise StorageReadOnly(
                f"ledger {self.ledger_id}: fewer than {self._md.ack_quorum} writable bookies "
                f"({'; '.join(refusals)})"
            )

    def _vote(self, entry_id: int, error: StorageError | None) -> None:
        add = self._inflight.get(entry_id)
        if add is None or add.acked:
            return  # already decided (or the handle failed)
        if error is None:
            add.ok += 1
            if add.ok >= self._md.ack_quorum:
                add.acked = True
                if entry_id == self._lac + 1:
                    self._advance()
            return
        if add.errors is None:
            add.errors = []
        add.errors.append(error)
        if len(add.errors) > add.asked - self._md.ack_quorum:
            self._fail(quorum_error(self.ledger_id, add.errors))

    def _advance(self) -> None:
        # Confirm in id order: an entry acked early waits for every lower one.
        inflight = self._inflight
        while True:
            add = inflight.get(self._lac + 1)
            if add is None or not add.acked:
                break
            del inflight[self._lac + 1]
            self._lac += 1
            self._length += add.size
            try:  # inlined _report: this loop runs once per entry
                add.callback(self._lac, None, add.ctx)
            except Exception:  # one broken callback must not stop the adds confirmed after it
                log.exception("add completion callback failed")
        if not inflight and self._idle is not None:
            self._idle.set()

    def _fail(self, exc: StorageError) -> None:
        if self._error is None:
            self._error = exc
        # Nothing above the LAC can be confirmed any more: fail every waiting add, in order.
        failed = list(self._inflight.values())
        self._inflight.clear()
        for add in failed:
            _report(add, -1, self._error)
        if self._idle is not None:
            self._idle.set()

    async def read_entries(self, first: int, last: int) -> list[LedgerEntry]:
        """Read confirmed entries ``first..last``."""
        return await self._client.read_range(self._md, first, last, self._lac)

    async def close(self) -> LedgerMetadata:
        """Wait for adds in flight, then record last entry id and length (CAS). Idempotent.

        Raises:
            LedgerFenced: another client is recovering the ledger.
        """
        if self._closed_md is not None:
            return self._closed_md
        self._closing = True
        if self._inflight:
            # Wait until every add in flight is confirmed or failed (even if its caller left).
            self._idle = asyncio.Event()
            await self._idle.wait()
        while True:
            md, version = await self._client.read_metadata(self.ledger_id)
            if md.state is LedgerState.CLOSED:
                # Recovered and closed by a new owner: its view is the ledger's final state.
                self._closed_md = md
                return md
            if md.state is LedgerState.IN_RECOVERY:
                raise LedgerFenced(f"ledger {self.ledger_id} is being recovered by another client")
            closed = dataclasses.replace(
                md, state=LedgerState.CLOSED, last_entry_id=self._lac, length=self._length
            )
            if await self._client.write_metadata(closed, version):
                self._closed_md = closed
                return closed


class LedgerReader:
    """A reader of a ledger (implements :class:`~braid.storage.api.ReadHandle`)."""

    def __init__(self, client: HandleClient, md: LedgerMetadata, lac: int) -> None:
        self._client = client
        self._md = md
        self._lac = lac
        self._closed = False

    @property
    def ledger_id(self) -> int:
        return self._md.ledger_id

    @property
    def metadata(self) -> LedgerMetadata:
        return self._md

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    async def read_entries(self, first: int, last: int) -> list[LedgerEntry]:
        """Read entries ``first..last`` (at most :attr:`last_add_confirmed`)."""
        if self._closed:
            raise LedgerClosed(f"read handle of ledger {self.ledger_id} is closed")
        return await self._client.read_range(self._md, first, last, self._lac)

    async def refresh_last_add_confirmed(self) -> int:
        """Learn how far the writer got: from the metadata once closed, else from the bookies."""
        if self._md.state is LedgerState.CLOSED:
            return self._lac
        md, _ = await self._client.read_metadata(self.ledger_id)
        self._md = md
        if md.state is LedgerState.CLOSED:
            self._lac = md.last_entry_id
        else:
            self._lac = max(self._lac, await self._client.probe_lac(md, self._lac))
        return self._lac

    async def close(self) -> None:
        self._closed = True


async def read_entry_from_any(
    client: HandleClient, md: LedgerMetadata, entry_id: int
) -> tuple[LedgerEntry, list[str], int]:
    """Read ``entry_id`` from its write set: the entry, the bookies lacking it and the piggybacked
    running length. Raises :class:`NoSuchEntry` if no bookie holds it."""
    entry: LedgerEntry | None = None
    length = 0
    lacking: list[str] = []
    for bookie_id in write_set(md, entry_id):
        bookie = client.bookies_for(md).get(bookie_id)
        if bookie is None:
            lacking.append(bookie_id)
            continue
        try:
            stored = await bookie.read_entry(md.ledger_id, entry_id)
        except StorageError:
            lacking.append(bookie_id)
            continue
        if entry is None:
            entry = LedgerEntry(md.ledger_id, entry_id, stored.data)
            length = stored.length
    if entry is None:
        raise NoSuchEntry(f"ledger {md.ledger_id}: entry {entry_id} is on no bookie")
    return entry, lacking, length
