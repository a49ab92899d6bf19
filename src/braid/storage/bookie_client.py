"""How a storage client talks to one bookie, and the in-process implementation.

:class:`BookieClient` is the seam between the ledger client (:mod:`braid.storage.client`) and a
bookie. :class:`LocalBookieClient` calls a :class:`~braid.storage.bookie.Bookie` in the same
process; :class:`~braid.storage.bookie_net_client.NetBookieClient` reaches a bookie process over
TCP (ADR 0033) behind the same protocol, so nothing above it changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from braid.storage.bookie import Bookie, LacInfo, StoredEntry
from braid.storage.bookie.engine import AddCallback


class BookieClient(Protocol):
    """The operations a ledger client needs from one bookie."""

    @property
    def bookie_id(self) -> str: ...

    @property
    def read_only_reason(self) -> str | None:
        """Why the bookie refuses new entries now (its disk is full), or ``None`` while it is
        writable: read on every add, so a writer can refuse before anything is sent."""
        ...

    def disk_status(self) -> Mapping[str, object]:
        """The bookie's disk state for health checks (``state``, ``reason``, usage)."""
        ...

    async def add_entry(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        *,
        last_add_confirmed: int,
        length: int,
        recovery: bool = False,
    ) -> None:
        """Store an entry durably. Raises ``LedgerFenced`` unless ``recovery``."""
        ...

    def send_add(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        callback: AddCallback,
        last_add_confirmed: int,
        length: int,
        recovery: bool = False,
    ) -> None:
        """Start an add; ``callback(entry_id, None)`` is called once on the event loop when the
        entry is durable, or ``callback(entry_id, error)`` with the ``StorageError`` that lost it.

        The request/callback shape a network client has anyway (request id -> completion); the
        ledger writer counts quorums with it instead of a task and a future per add. May raise at
        once for bad input or a fenced ledger.
        """
        ...

    async def read_entry(self, ledger_id: int, entry_id: int) -> StoredEntry:
        """Read one entry. Raises ``NoSuchEntry`` / ``NoSuchLedger``."""
        ...

    async def read_entries(self, ledger_id: int, first: int, last: int) -> list[StoredEntry]:
        """Read a range of entries, all of which this bookie must hold."""
        ...

    async def read_lac(self, ledger_id: int) -> LacInfo:
        """Highest piggybacked LAC and highest stored entry id."""
        ...

    async def fence(self, ledger_id: int) -> LacInfo:
        """Fence the ledger durably; returns its state at the fence."""
        ...

    async def delete_ledger(self, ledger_id: int) -> None:
        """Drop the ledger's entries and reclaim their space."""
        ...

    async def close(self) -> None:
        """Release the connection (a local client closes nothing it does not own)."""
        ...


class LocalBookieClient:
    """A :class:`BookieClient` over an in-process :class:`Bookie`."""

    def __init__(self, bookie: Bookie, *, owns_bookie: bool = False) -> None:
        self._bookie = bookie
        self._owns = owns_bookie
        # The ledger writer's per-entry call goes straight to the bookie: no frame of this
        # client per add (same arguments, same errors as the protocol's ``send_add``).
        self.send_add = bookie.submit_add_callback

    @property
    def bookie_id(self) -> str:
        return self._bookie.bookie_id

    @property
    def bookie(self) -> Bookie:
        """The bookie behind this client (for tests and stats)."""
        return self._bookie

    @property
    def read_only_reason(self) -> str | None:
        return self._bookie.read_only_reason

    def disk_status(self) -> Mapping[str, object]:
        return self._bookie.disk_status()

    async def add_entry(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        *,
        last_add_confirmed: int,
        length: int,
        recovery: bool = False,
    ) -> None:
        await self._bookie.add_entry(
            ledger_id,
            entry_id,
            data,
            last_add_confirmed=last_add_confirmed,
            length=length,
            recovery=recovery,
        )

    async def read_entry(self, ledger_id: int, entry_id: int) -> StoredEntry:
        return await self._bookie.read_entry(ledger_id, entry_id)

    async def read_entries(self, ledger_id: int, first: int, last: int) -> list[StoredEntry]:
        return await self._bookie.read_entries(ledger_id, first, last)

    async def read_lac(self, ledger_id: int) -> LacInfo:
        return await self._bookie.read_lac(ledger_id)

    async def fence(self, ledger_id: int) -> LacInfo:
        return await self._bookie.fence(ledger_id)

    async def delete_ledger(self, ledger_id: int) -> None:
        await self._bookie.delete_ledger(ledger_id)

    async def close(self) -> None:
        if self._owns:
            await self._bookie.close()
