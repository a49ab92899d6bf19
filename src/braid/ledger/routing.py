"""What the managed ledger needs from the storage layer's cluster router (PIP-470 read routing).

New ledgers are created on the *active* storage cluster; every existing ledger is read through
the client of the cluster stamped in its ``LedgerInfo.bookieClusterName``. ``braid.storage.router.
StorageRouter`` provides exactly this; the protocol keeps the managed ledger independent of how
the router discovers clusters.
"""

from __future__ import annotations

from typing import Protocol

from braid.storage.api import StorageClient


class StorageRouting(Protocol):
    """The active storage cluster, and a client for any cluster by name."""

    @property
    def active(self) -> StorageClient:
        """The cluster new ledgers are created on."""
        ...

    def client_for(self, cluster_name: str) -> StorageClient:
        """The client of the cluster called ``cluster_name`` (raises if unknown)."""
        ...

    def cluster_names(self) -> list[str]:
        """Every cluster a client is registered for (health checks look at each)."""
        ...
