"""Ledger storage (BookKeeper model): the ledger API, the bookie engine, clients and routing.

* :mod:`braid.storage.api` - the contract (``StorageClient``, handles, metadata, typed errors);
* :mod:`braid.storage.bookie` - one bookie's storage engine (journal, entry files, index);
* :mod:`braid.storage.client` - ``BookKeeperClient`` over ``BookieClient`` s;
* :func:`open_local_cluster` - the standalone cluster of in-process bookies;
* :mod:`braid.storage.bookie_net_client`, :mod:`braid.storage.remote` - bookie processes reached
  over TCP, found through their registrations (``RegisteredBookieSet``, ``open_remote_cluster``);
  :mod:`braid.storage.loopback` - N such bookies inside one process (``--bookies N``);
* :mod:`braid.storage.router` - PIP-470 read routing by cluster name.
"""

from __future__ import annotations

from braid.filelock import DataDirInUse  # a bookie's data directory is locked by another
from braid.storage.api import (
    BookieUnavailable,
    EntryTooLarge,
    InvalidClusterName,
    InvalidEntryId,
    InvalidLedgerId,
    InvalidLedgerMetadata,
    InvalidQuorum,
    LedgerClosed,
    LedgerEntry,
    LedgerExists,
    LedgerFenced,
    LedgerMetadata,
    LedgerState,
    NoSuchEntry,
    NoSuchLedger,
    ReadHandle,
    StorageClient,
    StorageClosed,
    StorageClusterExists,
    StorageError,
    StorageIOError,
    StorageReadOnly,
    UnknownStorageCluster,
    WriteHandle,
)
from braid.storage.bookie.disk import DiskThresholds
from braid.storage.bookie_client import BookieClient, LocalBookieClient
from braid.storage.client import BookKeeperClient
from braid.storage.local import open_local_cluster
from braid.storage.router import StorageRouter

__all__ = [
    "BookKeeperClient",
    "BookieClient",
    "BookieUnavailable",
    "DataDirInUse",
    "DiskThresholds",
    "EntryTooLarge",
    "InvalidClusterName",
    "InvalidEntryId",
    "InvalidLedgerId",
    "InvalidLedgerMetadata",
    "InvalidQuorum",
    "LedgerClosed",
    "LedgerEntry",
    "LedgerExists",
    "LedgerFenced",
    "LedgerMetadata",
    "LedgerState",
    "LocalBookieClient",
    "NoSuchEntry",
    "NoSuchLedger",
    "ReadHandle",
    "StorageClient",
    "StorageClosed",
    "StorageClusterExists",
    "StorageError",
    "StorageIOError",
    "StorageReadOnly",
    "StorageRouter",
    "UnknownStorageCluster",
    "WriteHandle",
    "open_local_cluster",
]
