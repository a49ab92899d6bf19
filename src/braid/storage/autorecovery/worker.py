"""The replication worker: takes under-replicated ledgers one at a time and copies their lost
replicas (BookKeeper's ``ReplicationWorker``). A library class: a broker hosts one
(``autoRecoveryDaemonEnabled``), and so can a bookie process; any number run at once, the
per-ledger lock (ephemeral) keeps them off each other's ledgers.

Each round lists the marks, and for each one whose lock it gets: copies (:mod:`replicator`),
removes the mark if it did not change meanwhile, releases the lock. A ledger whose open last
fragment still names a bad bookie keeps its mark (its writer moves it, or recovery closes it).
A round that finds work runs again at once; otherwise the worker waits for a new mark (a metadata
notification) or ``retry_interval_s`` (injected clock).
"""

from __future__ import annotations

import asyncio
import logging

from braid.clock import Clock, TimerHandle
from braid.metadata.api import MetadataError, Notification
from braid.storage.api import StorageError
from braid.storage.autorecovery.replicator import ReplicationStats, replicate_ledger
from braid.storage.autorecovery.underreplication import UnderreplicationManager
from braid.storage.client import BookKeeperClient

log = logging.getLogger(__name__)


class ReplicationWorker:
    """Copies the lost replicas of marked ledgers (see the module docstring)."""

    def __init__(
        self,
        client: BookKeeperClient,
        manager: UnderreplicationManager,
        clock: Clock,
        *,
        owner: str,
        retry_interval_s: float = 5.0,
        stats: ReplicationStats | None = None,
    ) -> None:
        self._client = client
        self._manager = manager
        self._clock = clock
        self._owner = owner
        self._retry = retry_interval_s
        self.stats = stats or ReplicationStats()
        self._wake = asyncio.Event()
        self.under_replicated = 0  # marks seen by the last round (the /metrics gauge)
        self.rounds = 0

    def _on_notification(self, event: Notification) -> None:
        if event.path.startswith(self._manager.ledgers_path):
            self._wake.set()

    async def run(self) -> None:
        """Work until cancelled."""
        unlisten = self._client.metadata_store.register_listener(self._on_notification)
        try:
            while True:
                self._wake.clear()
                try:
                    progressed = await self.run_once()
                except MetadataError as exc:
                    log.warning("replication worker: metadata store unavailable: %s", exc)
                    progressed = False
                if not progressed:
                    await self._sleep(self._retry)
        finally:
            unlisten()

    async def _sleep(self, seconds: float) -> None:
        timer: TimerHandle = self._clock.call_at(self._clock.monotonic() + seconds, self._wake.set)
        try:
            await self._wake.wait()
        finally:
            timer.cancel()

    async def run_once(self) -> bool:
        """One round over the marks; ``True`` when it removed at least one."""
        self.rounds += 1
        marked = await self._manager.marked()
        self.under_replicated = len(marked)
        done = 0
        for ledger_id in marked:
            if not await self._manager.try_lock(ledger_id, self._owner):
                continue
            try:
                done += await self._replicate(ledger_id)
            finally:
                await self._manager.release(ledger_id)
        if done:
            self.under_replicated = len(await self._manager.marked())
        return done > 0

    async def _replicate(self, ledger_id: int) -> int:
        mark = await self._manager.get(ledger_id)
        if mark is None:
            return 0
        try:
            finished = await replicate_ledger(
                self._client, ledger_id, mark.missing_replicas, self.stats
            )
        except StorageError as exc:
            self.stats.failures += 1
            log.warning("ledger %d: re-replication failed, will retry: %s", ledger_id, exc)
            return 0
        if finished and await self._manager.mark_replicated(mark):
            log.info("ledger %d: replicas restored", ledger_id)
            return 1
        return 0
