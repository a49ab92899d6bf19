"""Braid's metadata store: the contract, its backends and :func:`open_store`.

``open_store(url)`` picks the backend from the URL:

* ``memory://`` - a private in-process tree; ``memory://NAME`` - the process-wide tree ``NAME``
  (every store opened with the same name shares it, like several brokers in one test);
* ``sqlite:///abs/path/file.db`` - the embedded durable store of ``braid standalone``;
* ``zk://host:port[,host:port]/chroot`` - ZooKeeper via kazoo.
"""

from __future__ import annotations

from braid.clock import Clock
from braid.metadata.api import (
    MAX_VALUE_SIZE,
    BadVersion,
    InvalidPath,
    InvalidStoreUrl,
    Listener,
    MetadataError,
    MetadataStore,
    NodeNotEmpty,
    NodeNotFound,
    Notification,
    NotificationType,
    SessionEvent,
    SessionListener,
    SessionLost,
    Stat,
    StoreClosed,
    StoreUnavailable,
    ValueTooLarge,
)
from braid.metadata.election import LeaderElection, LeaderElectionState, read_leader
from braid.metadata.faults import FaultInjectionMetadataStore
from braid.metadata.lock import Lock
from braid.metadata.memory import MemoryBackend, MemoryMetadataStore
from braid.metadata.url import StoreUrl, parse_store_url


async def open_store(
    url: str, *, clock: Clock | None = None, session_timeout_s: float = 10.0
) -> MetadataStore:
    """Open the metadata store named by ``url``.

    Args:
        url: ``memory://[name]``, ``sqlite:///abs/path`` or ``zk://host:port[,...]/chroot``.
        clock: source of ``created_ms``/``modified_ms`` for memory and sqlite (ZooKeeper uses
            its own server times). Defaults to the system clock.
        session_timeout_s: ZooKeeper's session timeout (the server bounds it by its tick time);
            a process that dies keeps its ephemeral nodes this long. SQLite sessions end with
            their process, memory ones with their store.

    Raises:
        InvalidStoreUrl: unknown scheme or malformed URL.
        StoreUnavailable: the backend could not be reached or opened.
    """
    parsed = parse_store_url(url)
    if parsed.scheme == "memory":
        from braid.metadata.memory import open_named_or_private

        return open_named_or_private(parsed.location, clock)
    if parsed.scheme == "sqlite":
        from braid.metadata.sqlite import SqliteMetadataStore

        store: MetadataStore = await SqliteMetadataStore.open(parsed.location, clock=clock)
        return store
    from braid.metadata.zookeeper import ZkMetadataStore

    zk_store: MetadataStore = await ZkMetadataStore.open(
        parsed.location, parsed.chroot, session_timeout=session_timeout_s
    )
    return zk_store


__all__ = [
    "MAX_VALUE_SIZE",
    "BadVersion",
    "FaultInjectionMetadataStore",
    "InvalidPath",
    "InvalidStoreUrl",
    "LeaderElection",
    "LeaderElectionState",
    "Listener",
    "Lock",
    "MemoryBackend",
    "MemoryMetadataStore",
    "MetadataError",
    "MetadataStore",
    "NodeNotEmpty",
    "NodeNotFound",
    "Notification",
    "NotificationType",
    "SessionEvent",
    "SessionListener",
    "SessionLost",
    "Stat",
    "StoreClosed",
    "StoreUnavailable",
    "StoreUrl",
    "ValueTooLarge",
    "open_store",
    "parse_store_url",
    "read_leader",
]
