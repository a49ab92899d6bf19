"""Auto-recovery hosted in a process: the auditor (when elected) and a replication worker.

:class:`AutoRecoveryService` contends for the cluster's auditor election
(``/storage/<cluster>/underreplication/auditor``, :mod:`braid.metadata.election`); while it leads
it runs the :class:`~braid.storage.autorecovery.auditor.Auditor`, fed by the ``BookieSet``'s
membership listeners. It always runs a
:class:`~braid.storage.autorecovery.worker.ReplicationWorker`. A broker starts one with
``autoRecoveryDaemonEnabled=true``; a bookie process can host the same class over its own storage
client. Settings are BookKeeper's keys (``lostBookieRecoveryDelay``,
``auditorPeriodicCheckInterval``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from braid.clock import Clock
from braid.metadata.election import LeaderElection, LeaderElectionState
from braid.storage.autorecovery.auditor import Auditor
from braid.storage.autorecovery.underreplication import (
    UnderreplicationManager,
    auditor_election_path,
)
from braid.storage.autorecovery.worker import ReplicationWorker
from braid.storage.client import BookKeeperClient

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AutoRecoverySettings:
    """BookKeeper's auto-recovery keys (seconds)."""

    lost_bookie_recovery_delay_s: float = 0.0
    periodic_check_interval_s: float = 604_800.0
    worker_retry_interval_s: float = 5.0


class AutoRecoveryService:
    """The auditor (when elected) and a replication worker of one storage cluster."""

    def __init__(
        self,
        client: BookKeeperClient,
        *,
        clock: Clock,
        node_id: str,
        settings: AutoRecoverySettings | None = None,
    ) -> None:
        self._client = client
        self._clock = clock
        self._node_id = node_id
        self._settings = settings or AutoRecoverySettings()
        self.manager = UnderreplicationManager(client.metadata_store, client.cluster_name, clock)
        self.worker = ReplicationWorker(
            client,
            self.manager,
            clock,
            owner=node_id,
            retry_interval_s=self._settings.worker_retry_interval_s,
        )
        self.auditor: Auditor | None = None
        self._election = LeaderElection(
            client.metadata_store,
            auditor_election_path(client.cluster_name),
            node_id.encode(),
            on_state_change=self._on_election,
        )
        self._auditor_task: asyncio.Task[None] | None = None
        self._worker_task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def is_auditor(self) -> bool:
        return self._auditor_task is not None

    async def start(self) -> None:
        """Join the auditor election and start the worker."""
        self._client.bookie_set.add_listener(self._membership_changed)
        self._worker_task = asyncio.get_running_loop().create_task(
            self.worker.run(), name=f"replication-worker-{self._client.cluster_name}"
        )
        await self._election.start()

    def _membership_changed(self) -> None:
        if self.auditor is not None:
            self.auditor.membership_changed()

    def _on_election(self, state: LeaderElectionState) -> None:
        if state is LeaderElectionState.LEADING and not self._closed:
            if self._auditor_task is None:
                self.auditor = Auditor(
                    self._client,
                    self.manager,
                    self._clock,
                    lost_bookie_recovery_delay_s=self._settings.lost_bookie_recovery_delay_s,
                    periodic_check_interval_s=self._settings.periodic_check_interval_s,
                )
                self._auditor_task = asyncio.get_running_loop().create_task(
                    self._audit(self.auditor), name=f"auditor-{self._client.cluster_name}"
                )
                log.info(
                    "%s is the auditor of cluster %s", self._node_id, self._client.cluster_name
                )
        elif self._auditor_task is not None:
            self._auditor_task.cancel()
            self._auditor_task = None
            self.auditor = None

    async def _audit(self, auditor: Auditor) -> None:
        try:
            await auditor.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("auditor of cluster %s failed", self._client.cluster_name)

    async def close(self) -> None:
        """Resign, stop the auditor and the worker. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._election.close()
        for task in (self._auditor_task, self._worker_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._auditor_task = self._worker_task = None
        self.auditor = None
