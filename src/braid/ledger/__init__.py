"""Braid's managed ledger: named logs of storage ledgers with durable cursors (ADR 0012).

The contract is :mod:`braid.ledger.api`; :class:`DefaultManagedLedgerFactory` implements it over a
metadata store and the storage clusters of a ``StorageRouter``.
"""

from braid.ledger.api import (
    EARLIEST,
    LATEST,
    CursorNotFound,
    Entry,
    InvalidCursorName,
    InvalidManagedLedgerName,
    InvalidPosition,
    LedgerIdNotIncreasing,
    LedgerInfo,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerClosed,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFactory,
    ManagedLedgerFenced,
    ManagedLedgerMetadataError,
    ManagedLedgerNotFound,
    ManagedLedgerTerminated,
    Position,
)
from braid.ledger.factory import DefaultManagedLedgerFactory
from braid.ledger.range_set import PositionRangeSet

__all__ = [
    "EARLIEST",
    "LATEST",
    "CursorNotFound",
    "DefaultManagedLedgerFactory",
    "Entry",
    "InvalidCursorName",
    "InvalidManagedLedgerName",
    "InvalidPosition",
    "LedgerIdNotIncreasing",
    "LedgerInfo",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerClosed",
    "ManagedLedgerConfig",
    "ManagedLedgerError",
    "ManagedLedgerFactory",
    "ManagedLedgerFenced",
    "ManagedLedgerMetadataError",
    "ManagedLedgerNotFound",
    "ManagedLedgerTerminated",
    "Position",
    "PositionRangeSet",
]
