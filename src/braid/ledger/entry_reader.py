"""Reading a managed ledger's entries across its ledgers, each through the right storage cluster.

The current ledger is read through its write handle, and so is a ledger this log closed itself
(:meth:`EntryReader.keep_closed`: its writer knows the closed ledger's fragments and last entry,
so no metadata read is needed - one per segment of a DAG walk, ADR 0068). Every other ledger is
read through a read handle (no recovery) opened once - on the storage cluster stamped on the
ledger, which may not be the active one (PIP-470) - and kept until the ledger is trimmed or the
log is closed; a read through a kept handle that fails is retried once through a handle opened
on fresh metadata (auto-recovery may have moved the ledger's copies since). The managed ledger
owns the ledger list; the reader asks for it (and for the current ledger) at each
step, so a ledger trimmed or rolled over while a read is in flight is seen: a trimmed one is
skipped, any other storage error is raised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from braid.ledger.api import Entry, LedgerInfo, Position
from braid.ledger.current_ledger import CurrentLedger
from braid.ledger.routing import StorageRouting
from braid.storage.api import LedgerEntry, NoSuchLedger, StorageError, WriteHandle

log = logging.getLogger(__name__)


class _Reads(Protocol):
    """What reading a ledger needs of its handle: a read handle, or a closed write handle."""

    async def read_entries(self, first: int, last: int) -> list[LedgerEntry]: ...

    async def close(self) -> object: ...


class EntryReader:
    """Reads entries across a managed ledger's ledgers and owns its read handles.

    Args:
        storage: the clusters the ledgers live on.
        ledgers: the log's ledgers, oldest first (the current one last, with its live counts).
        current: the ledger being written, if any.
    """

    def __init__(
        self,
        storage: StorageRouting,
        ledgers: Callable[[], list[LedgerInfo]],
        current: Callable[[], CurrentLedger | None],
    ) -> None:
        self._storage = storage
        self._view = ledgers
        self._current = current
        self._read_handles: dict[int, asyncio.Future[_Reads]] = {}

    async def read(self, position: Position, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` entries from ``position`` (inclusive), across ledgers; a position
        in a trimmed ledger starts at the first ledger still present."""
        result: list[Entry] = []
        for info in self._view():
            if info.ledger_id < position.ledger_id:
                continue
            start = max(position.entry_id, 0) if info.ledger_id == position.ledger_id else 0
            if start >= info.entries:
                continue
            last = min(info.entries - 1, start + (max_entries - len(result)) - 1)
            try:
                entries = await self._read_ledger(info, start, last)
            except NoSuchLedger:
                if any(li.ledger_id == info.ledger_id for li in self._view()):
                    raise
                continue  # trimmed while we were reading: skip it
            result.extend(Entry(Position(info.ledger_id, e.entry_id), e.data) for e in entries)
            if len(result) >= max_entries:
                break
        return result

    async def _read_ledger(self, info: LedgerInfo, first: int, last: int) -> list[LedgerEntry]:
        cur = self._current()
        if cur is not None and cur.ledger_id == info.ledger_id:
            return list(await cur.handle.read_entries(first, last))
        kept = self._read_handle(info)
        handle = await asyncio.shield(kept)
        try:
            return list(await handle.read_entries(first, last))
        except NoSuchLedger:
            raise
        except StorageError as exc:
            # A kept handle knows the fragments as they were when it was made; auto-recovery may
            # have moved a lost bookie's copies since. Read once more with fresh metadata.
            if self._read_handles.get(info.ledger_id) is kept:
                del self._read_handles[info.ledger_id]
            log.info(
                "ledger %d: read failed (%r); reading again with fresh metadata",
                info.ledger_id,
                exc,
            )
            handle = await asyncio.shield(self._read_handle(info))
            return list(await handle.read_entries(first, last))

    def _read_handle(self, info: LedgerInfo) -> asyncio.Future[_Reads]:
        """The kept handle of ``info``'s ledger, opening one (once) if there is none."""
        task = self._read_handles.get(info.ledger_id)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = asyncio.ensure_future(self._open(info))
            self._read_handles[info.ledger_id] = task
        return task

    async def _open(self, info: LedgerInfo) -> _Reads:
        client = self._storage.client_for(info.bookie_cluster_name)
        return await client.open_ledger(info.ledger_id, recovery=False)

    def keep_closed(self, handle: WriteHandle) -> None:
        """``handle``'s ledger was just closed by this log: read it through ``handle``."""
        done: asyncio.Future[_Reads] = asyncio.get_running_loop().create_future()
        done.set_result(handle)
        self._read_handles[handle.ledger_id] = done

    async def drop(self, ledger_id: int) -> None:
        """Close the read handle of ``ledger_id`` (trimmed), if one was opened."""
        task = self._read_handles.pop(ledger_id, None)
        if task is not None:
            try:
                handle = await task
                await handle.close()
            except Exception as exc:
                log.debug("closing reader of ledger %s: %r", ledger_id, exc)

    async def close(self) -> None:
        """Close every read handle (the log is closing)."""
        for ledger_id in list(self._read_handles):
            await self.drop(ledger_id)


__all__ = ["EntryReader"]
