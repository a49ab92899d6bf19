"""Opening a client for a registered storage cluster (PIP-470's ``DynamicBookKeeperClientFactory``
creating a BK client lazily).

:class:`LocalClusterFactory` is the standalone one: a cluster is a metadata store (its
``metadataServiceUri``: an SQLite file, a ZooKeeper chroot, or the broker's own store for the
cluster the broker started with) plus in-process bookies on their own data directory,
``<dataDir>/storage/<name>/bookie-<i>`` (the starting cluster keeps ``<dataDir>/bookie-0``). So
two clusters share neither metadata root nor bookie data, and a whole switch runs on one
machine. :class:`RemoteClusterFactory` is the one of brokers on ``braid bookie`` processes: a
cluster is the bookies registered under its name in its metadata store, shared by every broker.
Opening fails with a typed error (the store cannot be reached, the data directory is in use, no
writable bookie registered in time) and nothing is left open.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Protocol

from braid.clock import Clock
from braid.clusters.registry import uri_identity
from braid.core.storage_switch import BookieClusterInfo
from braid.metadata import open_store
from braid.metadata.api import MetadataStore
from braid.storage.client import BookKeeperClient, ClientSettings
from braid.storage.local import open_local_cluster
from braid.storage.remote import open_remote_cluster


class StorageClusterFactory(Protocol):
    """Opens and releases the client of a registered cluster."""

    async def open(self, info: BookieClusterInfo) -> BookKeeperClient:
        """A client of ``info``'s cluster (its own metadata root and bookies).

        Raises:
            BraidError: the cluster cannot be reached or opened.
        """
        ...

    async def release(self, name: str) -> None:
        """Close what :meth:`open` opened besides the client (its metadata store)."""
        ...


class _ClusterStores:
    """Opens each cluster's metadata store (the broker's own when the URI names it) and closes
    the ones it opened; subclasses open the client over it."""

    def __init__(
        self,
        broker_store: MetadataStore,
        broker_store_url: str,
        clock: Clock | None,
        session_timeout_s: float | None = None,
    ) -> None:
        self._broker_store = broker_store
        self._broker_identity = uri_identity(broker_store_url)
        self._clock = clock
        self._session_timeout_s = session_timeout_s
        self._stores: dict[str, MetadataStore] = {}

    async def _client(self, store: MetadataStore, info: BookieClusterInfo) -> BookKeeperClient:
        raise NotImplementedError

    async def open(self, info: BookieClusterInfo) -> BookKeeperClient:
        owned: MetadataStore | None = None
        if uri_identity(info.metadata_service_uri) == self._broker_identity:
            store = self._broker_store
        elif self._session_timeout_s is None:
            owned = store = await open_store(info.metadata_service_uri, clock=self._clock)
        else:
            owned = store = await open_store(
                info.metadata_service_uri,
                clock=self._clock,
                session_timeout_s=self._session_timeout_s,
            )
        try:
            client = await self._client(store, info)
        except BaseException:
            if owned is not None:
                await owned.close()
            raise
        if owned is not None:
            self._stores[info.name] = owned
        return client

    async def release(self, name: str) -> None:
        store = self._stores.pop(name, None)
        if store is not None:
            await store.close()

    async def close(self) -> None:
        for name in list(self._stores):
            await self.release(name)


class LocalClusterFactory(_ClusterStores):
    """Storage clusters of in-process bookies under one data directory (standalone)."""

    def __init__(
        self,
        data_dir: Path,
        broker_store: MetadataStore,
        broker_store_url: str,
        *,
        home_cluster: str,
        clock: Clock | None = None,
        bookies: int = 1,
    ) -> None:
        """Args:
        data_dir: the standalone's data directory.
        broker_store: the broker's metadata store (a cluster registered with its URL uses it).
        broker_store_url: that store's URL.
        home_cluster: the cluster the broker started with; its bookies stay in ``data_dir``.
        """
        super().__init__(broker_store, broker_store_url, clock)
        self._data_dir = Path(data_dir)
        self._home = home_cluster
        self._bookies = bookies

    def bookie_dir(self, name: str) -> Path:
        """Where the cluster's bookies keep their data."""
        return self._data_dir if name == self._home else self._data_dir / "storage" / name

    async def _client(self, store: MetadataStore, info: BookieClusterInfo) -> BookKeeperClient:
        return await open_local_cluster(
            store, self.bookie_dir(info.name), info.name, clock=self._clock, bookies=self._bookies
        )


class RemoteClusterFactory(_ClusterStores):
    """Storage clusters of ``braid bookie`` processes (``braid broker``, or a standalone with
    ``standaloneBookies=0``): a cluster named ``c`` is the bookies registered as
    ``storageClusterName=c`` in its ``metadataServiceUri`` (a ZooKeeper chroot, or the broker's
    own store), as every broker of the cluster sees them - a ledger one broker writes there,
    another reads."""

    def __init__(
        self,
        broker_store: MetadataStore,
        broker_store_url: str,
        *,
        clock: Clock | None = None,
        settings: ClientSettings | None = None,
        timeout_s: float = 10.0,
        session_timeout_s: float = 30.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(broker_store, broker_store_url, clock, session_timeout_s)
        self._settings = settings
        self._timeout_s = timeout_s
        self._tls = tls  # the broker's bookkeeperTLS* context: every cluster's bookies

    async def _client(self, store: MetadataStore, info: BookieClusterInfo) -> BookKeeperClient:
        return await open_remote_cluster(
            store,
            info.name,
            clock=self._clock,
            settings=self._settings,
            add_timeout_s=self._timeout_s,
            read_timeout_s=self._timeout_s,
            tls=self._tls,
        )


__all__ = ["LocalClusterFactory", "RemoteClusterFactory", "StorageClusterFactory"]
