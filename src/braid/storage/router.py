"""PIP-470 read routing: several storage clients by cluster name, one of them active.

New ledgers are created on :attr:`StorageRouter.active`; a ledger is read through
:meth:`StorageRouter.client_for` its stamp (``LedgerMetadata.cluster_name`` /
``LedgerInfo.bookie_cluster_name``), so ledgers written before a switch stay readable on the cluster
that holds them. Orchestrating a switch is the job of the layer above (``braid.clusters``).

Dual read (PIP-470): the first switch records :class:`DualRead` - the cluster everything was on
before (``initialClusterName``), the first ledger id the new cluster allocates
(``switchLedgerIdBoundary``) and when (``switchTimestampMillis``); later switches only refresh the
time. Routing itself needs none of it (the stamp decides); it is what status reports and the
dual-read window are measured from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from braid.storage.api import StorageClient, StorageClusterExists, UnknownStorageCluster


@dataclass(frozen=True, slots=True)
class DualRead:
    """What the first switch recorded (PIP-470's ``enableDualRead``)."""

    initial_cluster_name: str
    switch_ledger_id_boundary: int
    switch_timestamp_millis: int


class StorageRouter:
    """Holds several :class:`StorageClient` s by cluster name and knows the active one."""

    def __init__(self, clients: Iterable[StorageClient] = (), active: str | None = None) -> None:
        """Register ``clients``; ``active`` defaults to the first one.

        Raises:
            StorageClusterExists: two clients for one cluster name.
            UnknownStorageCluster: ``active`` names no given client.
        """
        self._clients: dict[str, StorageClient] = {}
        self._active: str | None = None
        self._dual_read: DualRead | None = None
        for client in clients:
            self.register(client)
        if active is not None:
            self.set_active(active)

    def register(self, client: StorageClient) -> None:
        """Add a client; the first one registered becomes active.

        Raises:
            StorageClusterExists: a client for that cluster name is already registered.
        """
        name = client.cluster_name
        if name in self._clients:
            raise StorageClusterExists(f"storage cluster {name!r} is already registered")
        self._clients[name] = client
        if self._active is None:
            self._active = name

    def set_active(self, cluster_name: str) -> None:
        """Make ``cluster_name`` the cluster new ledgers are created on.

        Raises:
            UnknownStorageCluster: no client is registered under that name.
        """
        self.client_for(cluster_name)
        self._active = cluster_name

    @property
    def active_name(self) -> str:
        """Name of the active cluster. Raises :class:`UnknownStorageCluster` if none."""
        if self._active is None:
            raise UnknownStorageCluster("no storage cluster is registered")
        return self._active

    @property
    def active(self) -> StorageClient:
        """The client new ledgers are created with."""
        return self._clients[self.active_name]

    def client_for(self, cluster_name: str) -> StorageClient:
        """The client of the cluster a ledger is stamped with.

        Raises:
            UnknownStorageCluster: no client is registered under that name.
        """
        client = self._clients.get(cluster_name)
        if client is None:
            raise UnknownStorageCluster(f"no storage client for cluster {cluster_name!r}")
        return client

    def has(self, cluster_name: str) -> bool:
        """Whether a client is registered under ``cluster_name``."""
        return cluster_name in self._clients

    async def remove(self, cluster_name: str) -> None:
        """Close and forget a cluster's client (``close-client``); ledgers stamped with it can
        no longer be read.

        Raises:
            UnknownStorageCluster: no client is registered under that name.
            StorageClusterExists: it is the active cluster (a client that is in use).
        """
        client = self.client_for(cluster_name)
        if cluster_name == self._active:
            raise StorageClusterExists(f"storage cluster {cluster_name!r} is the active one")
        del self._clients[cluster_name]
        await client.close()

    @property
    def dual_read(self) -> DualRead | None:
        """What the first switch recorded; ``None`` before any switch."""
        return self._dual_read

    def record_switch(self, previous: str, boundary_ledger_id: int, now_ms: int) -> DualRead:
        """Record a switch away from ``previous``: the first one enables dual read, later ones
        refresh only the timestamp (PIP-470's ``recordSwitchEpoch``)."""
        if self._dual_read is None:
            self._dual_read = DualRead(previous, boundary_ledger_id, now_ms)
        else:
            self._dual_read = dataclasses.replace(self._dual_read, switch_timestamp_millis=now_ms)
        return self._dual_read

    def restore_dual_read(self, dual_read: DualRead) -> None:
        """Set the dual-read record a previous process persisted (restart)."""
        self._dual_read = dual_read

    def cluster_names(self) -> list[str]:
        """Names of the registered clusters, sorted."""
        return sorted(self._clients)

    async def close(self) -> None:
        """Close every registered client."""
        for client in self._clients.values():
            await client.close()
