"""The auditor: notices lost replicas and marks their ledgers under-replicated (BookKeeper's
``Auditor``). One per storage cluster, elected through the metadata store.

* **Lost bookies.** It follows the cluster's membership through the ``BookieSet``'s listeners
  (writable and read-only bookies are *available*; read-only ones still hold their data). A bookie
  that ledgers name and that is not available is *lost* from the moment it was seen missing; once
  it has been lost for ``lostBookieRecoveryDelay`` seconds, every ledger with a fragment on it is
  marked (``missingReplicas`` = that bookie). A bookie that comes back in time is forgotten. At
  start the auditor treats every bookie that ledgers name but that is not available as lost from
  then on.
* **Periodic check** (every ``auditorPeriodicCheckInterval`` seconds, BookKeeper's
  ``LedgerChecker``): every ledger's copyable fragments are checked - a fragment naming a bookie
  that is not available, or whose bookie does not hold the first and last entry of its share of
  the fragment, marks the ledger.

Time comes from the injected clock; the loop sleeps until the next deadline or a membership
change.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from braid.clock import Clock, TimerHandle
from braid.storage.api import Fragment, LedgerMetadata, NoSuchLedger, StorageError
from braid.storage.autorecovery.replicator import entries_at, replicable_fragments
from braid.storage.autorecovery.underreplication import UnderreplicationManager
from braid.storage.client import BookKeeperClient
from braid.storage.ledger_reads import is_absent

log = logging.getLogger(__name__)


class Auditor:
    """Marks the ledgers of lost bookies, and those the periodic check finds short of copies."""

    def __init__(
        self,
        client: BookKeeperClient,
        manager: UnderreplicationManager,
        clock: Clock,
        *,
        lost_bookie_recovery_delay_s: float,
        periodic_check_interval_s: float,
    ) -> None:
        self._client = client
        self._manager = manager
        self._clock = clock
        self._delay = lost_bookie_recovery_delay_s
        self._interval = periodic_check_interval_s
        self._lost_since: dict[str, float] = {}
        self._seen: set[str] = set()  # bookies ledgers name or the set showed: who can be lost
        self._next_check = clock.monotonic() + periodic_check_interval_s
        self._wake = asyncio.Event()
        self._timer: TimerHandle | None = None
        self.marked_total = 0
        self.checks = 0

    def _available(self) -> set[str]:
        bookies = self._client.bookie_set
        return set(bookies.writable()) | set(bookies.readonly())

    @property
    def lost(self) -> dict[str, float]:
        """Bookies seen missing, and since when (monotonic seconds)."""
        return dict(self._lost_since)

    def membership_changed(self) -> None:
        """The bookie set changed (a ``BookieSet`` listener)."""
        available = self._available()
        self._seen |= available
        for bookie_id in list(self._lost_since):
            if bookie_id in available:
                del self._lost_since[bookie_id]
                log.info("bookie %s is back before its ledgers were marked", bookie_id)
        self._wake.set()

    def bookie_gone(self, bookie_ids: Iterable[str]) -> None:
        """Note bookies that are not available now (their delay starts)."""
        now = self._clock.monotonic()
        available = self._available()
        for bookie_id in bookie_ids:
            if bookie_id not in available:
                self._lost_since.setdefault(bookie_id, now)
        self._wake.set()

    async def run(self) -> None:
        """Audit until cancelled."""
        self.bookie_gone(await self._referenced_bookies())
        while True:
            self._wake.clear()
            now = self._clock.monotonic()
            self.bookie_gone(self._seen - self._available())
            for bookie_id, since in sorted(self._lost_since.items()):
                if now - since >= self._delay:
                    await self.mark_ledgers_of(bookie_id)
                    del self._lost_since[bookie_id]
            if self._interval > 0 and now >= self._next_check:
                self._next_check = now + self._interval
                await self.check_all()
            await self._sleep_until(self._next_deadline())

    def _next_deadline(self) -> float | None:
        deadlines = [since + self._delay for since in self._lost_since.values()]
        if self._interval > 0:
            deadlines.append(self._next_check)
        return min(deadlines) if deadlines else None

    async def _sleep_until(self, deadline: float | None) -> None:
        self._wake.clear()
        if deadline is not None:
            self._timer = self._clock.call_at(deadline, self._wake.set)
        try:
            await self._wake.wait()
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    async def _referenced_bookies(self) -> set[str]:
        names: set[str] = set()
        for ledger_id in await self._client.list_ledgers():
            try:
                names |= (await self._client.get_ledger_metadata(ledger_id)).bookies()
            except NoSuchLedger:
                continue
        self._seen = names | self._available()
        return names

    async def mark_ledgers_of(self, bookie_id: str) -> int:
        """Mark every ledger with a fragment on ``bookie_id``; returns how many."""
        marked = 0
        for ledger_id in await self._client.list_ledgers():
            try:
                md = await self._client.get_ledger_metadata(ledger_id)
            except NoSuchLedger:
                continue
            if bookie_id in md.bookies():
                await self._manager.mark(ledger_id, [bookie_id])
                marked += 1
        self.marked_total += marked
        log.warning("bookie %s is gone: %d ledger(s) marked under-replicated", bookie_id, marked)
        return marked

    async def check_all(self) -> int:
        """The periodic fragment check; returns how many ledgers it marked."""
        self.checks += 1
        available = self._available()
        marked = 0
        for ledger_id in await self._client.list_ledgers():
            try:
                md = await self._client.get_ledger_metadata(ledger_id)
            except NoSuchLedger:
                continue
            self._seen |= md.bookies()
            missing: set[str] = set()
            for fragment in replicable_fragments(md):
                for position, bookie_id in enumerate(fragment.ensemble):
                    gone = bookie_id not in available
                    if gone or not await self._holds_share(md, fragment, position):
                        missing.add(bookie_id)
            if missing:
                await self._manager.mark(ledger_id, missing)
                marked += 1
        self.marked_total += marked
        if marked:
            log.warning("periodic check: %d ledger(s) marked under-replicated", marked)
        return marked

    async def _holds_share(self, md: LedgerMetadata, fragment: Fragment, position: int) -> bool:
        """Whether the bookie at ``position`` holds the first and last entry of its share."""
        share = entries_at(fragment, position, md.write_quorum)
        if not share:
            return True
        client = self._client.client_of(fragment.ensemble[position])
        if client is None:
            return False
        for entry_id in {share[0], share[-1]}:
            try:
                await client.read_entry(md.ledger_id, entry_id)
            except StorageError as exc:
                # Unreachable just now is not evidence of a lost copy; "not here" is.
                return not is_absent(exc)
        return True
