"""The ledger a managed ledger is writing: its handle and the adds in flight on it.

Adds are *issued* (sent to storage, several at once) and later *confirmed* (durable, and every
earlier add too), strictly in issue order; the counts of both drive rollover and the log's view.
Each add is a :class:`PendingAdd` holding its caller's callback - no task or future per add; the
one future here, :attr:`CurrentLedger.drained`, is made only when someone waits for the ledger to
drain (rollover, termination, close).

:class:`CurrentLedger` is the one owner of these counts and of the adds in flight: it issues an
add (:meth:`~CurrentLedger.issue`), refuses one in its turn (:meth:`~CurrentLedger.refuse`) and
reports finished adds to their callers strictly in order (:meth:`~CurrentLedger.complete_in_order`).
The managed ledger decides *when* to issue (rollover, termination) and translates what storage
reports (ADR 0014: the broker's publish path runs through here once per entry).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from braid.ledger.api import AppendCallback, LedgerInfo, ManagedLedgerError, Position, new_position
from braid.storage.api import StorageReadOnly, WriteHandle

log = logging.getLogger(__name__)


def report(
    callback: AppendCallback[Any], ctx: Any, position: Position | None, error: BaseException | None
) -> None:
    """Call an append's callback; one that raises is logged and the appends after it go on."""
    try:
        callback(position, error, ctx)
    except Exception:  # one broken callback must not stop the appends confirmed after it
        log.exception("append callback failed")


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
    # What the adds from ``first_failure`` on are failed with when they carry no error of their
    # own (``None``: "an earlier entry of this ledger failed").
    failure: BaseException | None = None
    # Issued and not yet reported to their callers, in issue (= entry id) order.
    pending: deque[PendingAdd] = field(default_factory=deque)
    # Resolved when ``pending`` empties; made only while someone waits for that.
    drained: asyncio.Future[None] | None = None

    # The handle's id, read once per confirmed entry: kept here rather than asked of the handle.
    ledger_id: int = field(init=False)

    def __post_init__(self) -> None:
        self.ledger_id = self.handle.ledger_id

    def issue(
        self,
        data: bytes,
        callback: AppendCallback[Any],
        ctx: Any,
        on_added: Callable[[int, BaseException | None, PendingAdd], None],
    ) -> None:
        """Send ``data`` to storage as the next entry; ``on_added(entry_id, error, op)`` (the
        managed ledger's) is called once storage has finished it."""
        op = PendingAdd(self, self.issued_entries, len(data), callback, ctx)
        self.issued_entries += 1
        self.issued_size += len(data)
        self.pending.append(op)
        # Storage assigns entry ids in call order and reports them in that order.
        try:
            self.handle.add_entry_with_callback(data, on_added, op)
        except StorageReadOnly as exc:
            # Refused before anything was sent: no entry id was used and the ledger is intact,
            # so it is not broken; only this append fails (in its turn).
            self.issued_entries -= 1
            self.issued_size -= len(data)
            op.error = exc
            op.done = True
            self.complete_in_order()
        except BaseException as exc:
            on_added(-1, exc, op)

    def refuse(
        self,
        size: int,
        callback: AppendCallback[Any],
        ctx: Any,
        error: BaseException,
    ) -> None:
        """Fail an append that was never issued, after every append before it (call order)."""
        op = PendingAdd(self, self.issued_entries, size, callback, ctx, done=True, error=error)
        self.pending.append(op)
        self.complete_in_order()

    def complete_in_order(self) -> bool:
        """Acknowledge finished adds strictly in order; after a failure, fail all later ones.

        Returns:
            Whether an add was confirmed (the log grew: readers waiting for entries may go on).
            An add that failed, or was refused, confirms none: the first add still pending
            was not done before it.
        """
        advanced = False
        pending = self.pending
        ledger_id = self.ledger_id
        while pending and pending[0].done:
            op = pending.popleft()
            # Adds after the first failure may still have reached storage; their callers are told
            # they failed, which is at-least-once safe (recovery counts them, a retry may
            # duplicate them), and keeps the acknowledged prefix gap-free.
            if op.error is None and op.expected_entry_id < self.first_failure:
                self.confirmed_entries = op.entry_id + 1
                self.confirmed_size += op.size
                advanced = True
                try:  # inlined report(): this loop runs once per entry
                    op.callback(new_position(ledger_id, op.entry_id), None, op.ctx)
                except Exception:  # one broken callback must not stop the appends after it
                    log.exception("append callback failed")
            else:
                report(
                    op.callback,
                    op.ctx,
                    None,
                    op.error
                    or self.failure
                    or ManagedLedgerError("an earlier entry of this ledger failed"),
                )
        if not pending and self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        return advanced

    def fail_unreported(self, error: BaseException) -> None:
        """Fail every add not yet reported, acknowledged by storage or not, with ``error``
        (this writer lost the ledger: no receipt may follow, ADR 0040), in order, as they
        finish."""
        first = self.pending[0].expected_entry_id if self.pending else self.issued_entries
        self.broken = True
        self.first_failure = min(self.first_failure, first)
        if self.failure is None:
            self.failure = error
        self.complete_in_order()

    def info(self) -> LedgerInfo:
        return LedgerInfo(
            ledger_id=self.handle.ledger_id,
            entries=self.confirmed_entries,
            size=self.confirmed_size,
            timestamp_ms=self.created_ms,
            bookie_cluster_name=self.handle.cluster_name,
        )
