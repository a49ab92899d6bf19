"""Reading entries from a ledger's replicas: any replica of the write set, with speculative retry.

An entry is read from the bookies of its write set (in the fragment that holds it), healthy ones
first: the next replica is asked when one fails, or - with
``bookkeeperClientSpeculativeReadTimeoutInMillis`` > 0 - when one has not answered after that long
(BookKeeper's ``PendingReadOp`` speculative reads); the first answer wins and the others are
cancelled. A range is read fragment by fragment: where every bookie of the fragment holds every
entry (``write_quorum == ensemble size``) as one range request per fragment, else entry by entry
concurrently. Reads never wait on the writer: they see what the replicas hold.

The ledger client is reached through the narrow :class:`ReplicaAccess` protocol. Timers run on the
injected clock.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from braid.clock import Clock
from braid.storage.api import (
    BookieUnavailable,
    LedgerEntry,
    LedgerFenced,
    LedgerMetadata,
    NoSuchEntry,
    NoSuchLedger,
    StorageError,
)
from braid.storage.bookie import StoredEntry
from braid.storage.bookie_client import BookieClient
from braid.storage.distribution import write_set

_T = TypeVar("_T")


class ReplicaAccess(Protocol):
    """What reading needs from the ledger client."""

    @property
    def clock(self) -> Clock: ...

    @property
    def speculative_read_timeout_s(self) -> float:
        """Ask the next replica after this long without an answer (0: only on failure)."""
        ...

    def client_of(self, bookie_id: str) -> BookieClient | None:
        """The bookie's client, or ``None`` when the cluster cannot name it any more."""
        ...

    def read_order(self, bookie_ids: Sequence[str]) -> list[str]:
        """``bookie_ids`` with the healthy ones first."""
        ...

    def record_failure(self, bookie_id: str) -> None:
        """A request to ``bookie_id`` failed or timed out."""
        ...


def is_absent(exc: BaseException) -> bool:
    """The bookie answered that it does not hold the entry (as opposed to not answering)."""
    return isinstance(exc, NoSuchEntry | NoSuchLedger)


def read_error(ledger_id: int, what: str, errors: Sequence[BaseException]) -> StorageError:
    """The error for a read no replica served: :class:`NoSuchEntry` when every replica said it
    does not hold it, else the first other storage error (a replica that may hold it failed)."""
    for exc in errors:
        if isinstance(exc, LedgerFenced):
            return exc
    others = [e for e in errors if not is_absent(e)]
    if not others:
        return NoSuchEntry(f"ledger {ledger_id}: {what} is on no bookie")
    for exc in others:
        if isinstance(exc, BookieUnavailable):
            return BookieUnavailable(f"ledger {ledger_id}: no replica served {what}: {exc}")
    first = others[0]
    return first if isinstance(first, StorageError) else BookieUnavailable(str(first))


class _Attempt(Exception):
    """Internal: every attempt failed (carries their errors)."""

    def __init__(self, errors: list[BaseException]) -> None:
        super().__init__(errors)
        self.errors = errors


async def first_success(
    attempts: Sequence[Callable[[], Awaitable[_T]]], speculative_s: float, clock: Clock
) -> _T:
    """Run ``attempts`` in order until one succeeds: the next starts when one fails or, with
    ``speculative_s`` > 0, when the newest has not finished after that long.

    Raises:
        _Attempt: every attempt failed with a ``StorageError`` (others propagate).
    """
    errors: list[BaseException] = []
    if speculative_s <= 0:
        for attempt in attempts:
            try:
                return await attempt()
            except StorageError as exc:
                errors.append(exc)
        raise _Attempt(errors)
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Future[Any]] = set()
    started = 0

    def start() -> None:
        nonlocal started
        pending.add(asyncio.ensure_future(attempts[started]()))
        started += 1

    start()
    try:
        while pending:
            waiting = set(pending)
            timer: asyncio.Future[None] | None = None
            handle = None
            if started < len(attempts):
                timer = loop.create_future()
                handle = clock.call_at(
                    clock.monotonic() + speculative_s, functools.partial(_wake, timer)
                )
                waiting.add(timer)
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if handle is not None:
                handle.cancel()
            failed = False
            for task in done:
                if task is timer:
                    continue
                pending.discard(task)
                error = task.exception()
                if error is None:
                    result: _T = task.result()
                    return result
                if not isinstance(error, StorageError):
                    raise error
                errors.append(error)
                failed = True
            if started < len(attempts) and (failed or timer in done):
                start()
        raise _Attempt(errors)
    finally:
        for task in pending:
            task.cancel()


def _wake(timer: asyncio.Future[None]) -> None:
    if not timer.done():
        timer.set_result(None)


def _attempt_entry(
    access: ReplicaAccess, bookie_id: str, ledger_id: int, entry_id: int
) -> Callable[[], Awaitable[StoredEntry]]:
    async def attempt() -> StoredEntry:
        client = access.client_of(bookie_id)
        if client is None:
            raise BookieUnavailable(f"bookie {bookie_id} is not part of the cluster any more")
        try:
            return await client.read_entry(ledger_id, entry_id)
        except StorageError as exc:
            if not is_absent(exc):
                access.record_failure(bookie_id)
            raise

    return attempt


async def read_entry(access: ReplicaAccess, md: LedgerMetadata, entry_id: int) -> StoredEntry:
    """Read one entry from any replica of its write set.

    Raises:
        NoSuchEntry: every replica answered that it does not hold it.
        BookieUnavailable: no replica answered and some could hold it.
    """
    order = access.read_order(write_set(md, entry_id))
    attempts = [_attempt_entry(access, b, md.ledger_id, entry_id) for b in order]
    try:
        return await first_success(attempts, access.speculative_read_timeout_s, access.clock)
    except _Attempt as failed:
        raise read_error(md.ledger_id, f"entry {entry_id}", failed.errors) from None


async def _read_fragment_range(
    access: ReplicaAccess, md: LedgerMetadata, ensemble: Sequence[str], first: int, last: int
) -> list[StoredEntry]:
    """Entries ``first..last`` of a fragment every bookie of which holds every entry."""

    def attempt_on(bookie_id: str) -> Callable[[], Awaitable[list[StoredEntry]]]:
        async def attempt() -> list[StoredEntry]:
            client = access.client_of(bookie_id)
            if client is None:
                raise BookieUnavailable(f"bookie {bookie_id} is not part of the cluster any more")
            try:
                return await client.read_entries(md.ledger_id, first, last)
            except StorageError as exc:
                if not is_absent(exc):
                    access.record_failure(bookie_id)
                raise

        return attempt

    attempts = [attempt_on(b) for b in access.read_order(ensemble)]
    try:
        return await first_success(attempts, access.speculative_read_timeout_s, access.clock)
    except _Attempt as failed:
        raise read_error(md.ledger_id, f"entries {first}..{last}", failed.errors) from None


@dataclass(frozen=True, slots=True)
class _Chunk:
    first: int
    last: int
    ensemble: tuple[str, ...]


def _chunks(md: LedgerMetadata, first: int, last: int) -> list[_Chunk]:
    starts = list(md.ensembles)
    out = []
    for i, start in enumerate(starts):
        end = starts[i + 1] - 1 if i + 1 < len(starts) else last
        lo, hi = max(first, start), min(last, end)
        if lo <= hi:
            out.append(_Chunk(lo, hi, md.ensembles[start]))
    return out


async def read_range(
    access: ReplicaAccess, md: LedgerMetadata, first: int, last: int
) -> list[LedgerEntry]:
    """Read entries ``first..last`` (the caller checked them against the LAC), across fragments.

    Raises:
        NoSuchEntry, BookieUnavailable: as :func:`read_entry`.
    """
    out: list[LedgerEntry] = []
    lid = md.ledger_id
    for chunk in _chunks(md, first, last):
        if md.write_quorum == len(chunk.ensemble):
            stored = await _read_fragment_range(access, md, chunk.ensemble, chunk.first, chunk.last)
        else:
            stored = list(
                await asyncio.gather(
                    *(read_entry(access, md, e) for e in range(chunk.first, chunk.last + 1))
                )
            )
        out.extend(LedgerEntry(lid, s.entry_id, s.data) for s in stored)
    return out


@dataclass(frozen=True, slots=True)
class EntryProbe:
    """What every replica of an entry's write set said about it (recovery and LAC probing)."""

    entry: StoredEntry | None
    holders: tuple[str, ...]
    absent: tuple[str, ...]  # answered that they do not hold it
    unknown: tuple[str, ...]  # did not answer


async def probe_entry(
    access: ReplicaAccess, md: LedgerMetadata, entry_id: int, bookie_ids: Sequence[str]
) -> EntryProbe:
    """Ask each of ``bookie_ids`` for ``entry_id`` at once and sort their answers."""

    async def ask(bookie_id: str) -> StoredEntry | BaseException:
        client = access.client_of(bookie_id)
        if client is None:
            return BookieUnavailable(f"bookie {bookie_id} is gone")
        try:
            return await client.read_entry(md.ledger_id, entry_id)
        except StorageError as exc:
            return exc

    answers = await asyncio.gather(*(ask(b) for b in bookie_ids))
    entry: StoredEntry | None = None
    holders, absent, unknown = [], [], []
    for bookie_id, answer in zip(bookie_ids, answers, strict=True):
        if isinstance(answer, StoredEntry):
            holders.append(bookie_id)
            entry = entry or answer
        elif is_absent(answer):
            absent.append(bookie_id)
        else:
            unknown.append(bookie_id)
    return EntryProbe(entry, tuple(holders), tuple(absent), tuple(unknown))
