"""The ledger a managed ledger is writing: its handle and the adds in flight on it.

Adds are *issued* (sent to storage, several at once) and later *confirmed* (durable, and every
earlier add too), strictly in issue order; the counts of both drive rollover and the log's view.
Each add is a :class:`PendingAdd` holding its caller's callback - no task or future per add; the
one future here, :attr:`CurrentLedger.drained`, is made only when someone waits for the ledger to
drain (rollover, termination, close).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from braid.ledger.api import AppendCallback, LedgerInfo
from braid.storage.api import WriteHandle


@dataclass(eq=False, slots=True)
class PendingAdd:
    """One append issued to the current ledger, waiting for its acknowledgement (and the
    context storage hands back with the add's completion)."""

    ledger: CurrentLedger
    expected_entry_id: int
    size: int
    callback: AppendCallback[Any]
    ctx: Any
    done: bool = False
    entry_id: int = -1
    error: BaseException | None = None


@dataclass(eq=False, slots=True)
class CurrentLedger:
    """The ledger being written: issued (in flight) and confirmed (durable, in order) counts."""

    handle: WriteHandle
    created_ms: int
    created_mono: float
    issued_entries: int = 0
    issued_size: int = 0
    confirmed_entries: int = 0
    confirmed_size: int = 0
    # Set when an add failed: the ledger's true content is unknown until it is recovered.
    broken: bool = False
    first_failure: int = 2**63
    # Issued and not yet reported to their callers, in issue (= entry id) order.
    pending: deque[PendingAdd] = field(default_factory=deque)
    # Resolved when ``pending`` empties; made only while someone waits for that.
    drained: asyncio.Future[None] | None = None

    # The handle's id, read once per confirmed entry: kept here rather than asked of the handle.
    ledger_id: int = field(init=False)

    def __post_init__(self) -> None:
        self.ledger_id = self.handle.ledger_id

    def info(self) -> LedgerInfo:
        return LedgerInfo(
            ledger_id=self.handle.ledger_id,
            entries=self.confirmed_entries,
            size=self.confirmed_size,
            timestamp_ms=self.created_ms,
            bookie_cluster_name=self.handle.cluster_name,
        )
