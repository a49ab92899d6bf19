"""Operator views of a cluster's bookies: the list, and decommissioning one (BookKeeper's
``decommissionBookie``).

Decommissioning marks every ledger with a fragment on the bookie as under-replicated (missing
that bookie); replication workers then copy its fragments elsewhere. :meth:`BookieAdmin.status`
reports progress: the ledgers that still name the bookie and how many ledgers are marked. Stop the
bookie first (as BookKeeper asks): while it is still registered writable, new ledgers may be
placed on it. The last fragment of an open ledger is moved by its writer, not by the workers: a
decommission completes once such ledgers roll over.
"""

from __future__ import annotations

from dataclasses import dataclass

from braid.storage.api import NoSuchLedger
from braid.storage.autorecovery.underreplication import UnderreplicationManager
from braid.storage.client import BookKeeperClient


@dataclass(frozen=True, slots=True)
class DecommissionStatus:
    """Progress of a decommission."""

    bookie_id: str
    ledgers_remaining: tuple[int, ...]  # ledgers whose metadata still names the bookie
    under_replicated: int  # ledgers marked (any bookie)

    @property
    def done(self) -> bool:
        return not self.ledgers_remaining

    def to_json(self) -> dict[str, object]:
        return {
            "bookieId": self.bookie_id,
            "ledgersRemaining": list(self.ledgers_remaining),
            "underReplicatedLedgers": self.under_replicated,
            "done": self.done,
        }


class BookieAdmin:
    """The bookie list, decommission and its progress, for the admin API."""

    def __init__(self, client: BookKeeperClient, manager: UnderreplicationManager) -> None:
        self._client = client
        self._manager = manager

    def list_bookies(self) -> list[dict[str, object]]:
        """Every available bookie: id, ``writable``/``readonly`` and rack."""
        bookies = self._client.bookie_set
        out: list[dict[str, object]] = []
        for state, ids in (("writable", bookies.writable()), ("readonly", bookies.readonly())):
            out.extend({"bookieId": b, "state": state, "rack": bookies.rack_of(b)} for b in ids)
        return sorted(out, key=lambda b: str(b["bookieId"]))

    async def _ledgers_naming(self, bookie_id: str) -> list[int]:
        found = []
        for ledger_id in await self._client.list_ledgers():
            try:
                md = await self._client.get_ledger_metadata(ledger_id)
            except NoSuchLedger:
                continue
            if bookie_id in md.bookies():
                found.append(ledger_id)
        return found

    async def decommission(self, bookie_id: str) -> DecommissionStatus:
        """Mark every ledger on ``bookie_id`` under-replicated; returns the progress so far."""
        for ledger_id in await self._ledgers_naming(bookie_id):
            await self._manager.mark(ledger_id, [bookie_id])
        return await self.status(bookie_id)

    async def under_replicated(self) -> list[int]:
        """The ledgers marked under-replicated now."""
        return await self._manager.marked()

    async def status(self, bookie_id: str) -> DecommissionStatus:
        """How far the copies off ``bookie_id`` have got."""
        remaining = tuple(await self._ledgers_naming(bookie_id))
        return DecommissionStatus(bookie_id, remaining, len(await self._manager.marked()))
