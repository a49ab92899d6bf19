"""Transactions in Braid's client (``docs/client.md#transactions``).

A transaction groups sends and acknowledgments that take effect together on commit, or not at
all on abort or timeout. It works on classic topics and across the segments of a scalable topic
alike, because a transaction's *partitions* are the segment topics it actually wrote to: the
first transactional send to a segment adds that segment (ADD_PARTITION_TO_TXN) and, after a
split or merge, the first send to a successor adds the successor as one more partition. An
acknowledgment adds the segment's subscription (ADD_SUBSCRIPTION_TO_TXN) the same way.

* :class:`TransactionLifecycle` - the state machine, sans-I/O with time passed in: which state
  the transaction is in, which operations that state allows, and the typed error for each refusal
  (:class:`~braid.client.errors.TransactionEndedError`,
  :class:`~braid.client.errors.TransactionTimedOutError`,
  :class:`~braid.client.errors.TransactionErroredError`);
* :class:`AsyncTransaction` - one transaction of an :class:`~braid.client.AsyncClient`: it
  registers partitions and subscriptions once each (concurrent first uses share one request),
  counts the sends and acknowledgments in flight, and ``commit`` waits until every one of them
  is answered before it sends END_TXN, as the Java client does. An operation that failed puts the
  transaction in ``ERROR``: it can then only be aborted.

Invariants: a transaction's state only moves forward (OPEN -> COMMITTING/ABORTING -> COMMITTED/
ABORTED; OPEN -> ERROR/TIMED_OUT); every state change happens on the client's event loop; the
coordinator, not the client, is the authority on the outcome (a timed-out transaction is aborted
by its coordinator whether the client noticed or not).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from braid.client.context import ClientContext
from braid.client.errors import (
    InvalidConfigurationError,
    TransactionConflictError,
    TransactionEndedError,
    TransactionErroredError,
    TransactionStateError,
    TransactionTimedOutError,
)
from braid.client.transaction_coordinator import CoordinatorClient

log = logging.getLogger(__name__)

#: A transaction's timeout when none is given (Pulsar clients' default).
DEFAULT_TIMEOUT = 60.0


class TransactionState(enum.Enum):
    """Where a transaction stands, as the client sees it (Pulsar's ``TransactionState``)."""

    OPEN = "open"
    COMMITTING = "committing"
    ABORTING = "aborting"
    COMMITTED = "committed"
    ABORTED = "aborted"
    #: A send or acknowledgment inside it failed: abort it.
    ERROR = "error"
    #: Its timeout passed while it was open: its coordinator aborts it.
    TIMED_OUT = "timed_out"


_ENDED = frozenset(
    {
        TransactionState.COMMITTING,
        TransactionState.ABORTING,
        TransactionState.COMMITTED,
        TransactionState.ABORTED,
    }
)


class TransactionLifecycle:
    """The state machine of one transaction (sans-I/O: ``now`` is passed in, in seconds on the
    same clock as ``opened_at``)."""

    def __init__(self, name: str, opened_at: float, timeout: float) -> None:
        self.name = name
        self.deadline = opened_at + timeout
        self._state = TransactionState.OPEN
        #: Sends and acknowledgments started and not answered yet.
        self.in_flight = 0
        #: The first operation failure (the ``__cause__`` of a refused commit).
        self.failure: BaseException | None = None

    def state(self, now: float) -> TransactionState:
        if self._state is TransactionState.OPEN and now >= self.deadline:
            self._state = TransactionState.TIMED_OUT
        return self._state

    def _refusal(self, state: TransactionState, doing: str) -> TransactionStateError:
        text = f"cannot {doing} transaction {self.name}: it is {state.value}"
        if state is TransactionState.TIMED_OUT:
            return TransactionTimedOutError(text + " (its coordinator aborts it)")
        if state is TransactionState.ERROR:
            error = TransactionErroredError(
                f"{text}: an operation inside it failed ({self.failure}); abort it"
            )
            error.__cause__ = self.failure
            return error
        return TransactionEndedError(text)

    def check_open(self, now: float, doing: str) -> None:
        """Refuse a send or acknowledgment unless the transaction is OPEN."""
        state = self.state(now)
        if state is not TransactionState.OPEN:
            raise self._refusal(state, doing)

    def op_started(self) -> None:
        self.in_flight += 1

    def op_finished(self, error: BaseException | None) -> None:
        """An operation was answered; a failure puts an open (or committing) one in ERROR."""
        self.in_flight -= 1
        if error is not None and self.failure is None:
            self.failure = error
            if self._state in (TransactionState.OPEN, TransactionState.TIMED_OUT):
                self._state = TransactionState.ERROR

    def begin_commit(self, now: float) -> None:
        state = self.state(now)
        if state is not TransactionState.OPEN:
            raise self._refusal(state, "commit")
        self._state = TransactionState.COMMITTING

    def begin_abort(self, now: float) -> None:
        state = self.state(now)
        if state in _ENDED or state is TransactionState.TIMED_OUT:
            raise self._refusal(state, "abort")
        self._state = TransactionState.ABORTING

    def committable(self, now: float) -> None:
        """After the in-flight operations were answered: refuse the commit if one failed."""
        if self.failure is not None:
            self._state = TransactionState.ERROR
            raise self._refusal(TransactionState.ERROR, "commit")
        if now >= self.deadline:
            self._state = TransactionState.TIMED_OUT
            raise self._refusal(TransactionState.TIMED_OUT, "commit")

    def ended(self, committed: bool) -> None:
        self._state = TransactionState.COMMITTED if committed else TransactionState.ABORTED

    def end_failed(self, error: BaseException, now: float) -> BaseException:
        """END_TXN failed with ``error``: the error to raise; the transaction is left in ERROR
        (it may be aborted), or TIMED_OUT when its coordinator no longer knows it (or refuses
        its status) past the deadline - that is the timeout's abort."""
        if isinstance(error, TransactionConflictError) and now >= self.deadline:
            self._state = TransactionState.TIMED_OUT
            timed_out = TransactionTimedOutError(
                f"transaction {self.name} timed out: its coordinator aborted it ({error})"
            )
            timed_out.__cause__ = error
            return timed_out
        self._state = TransactionState.ERROR
        self.failure = self.failure or error
        return error


class AsyncTransaction:
    """One transaction (create with ``AsyncClient.new_transaction``); see the module doc."""

    def __init__(
        self,
        ctx: ClientContext,
        coordinators: CoordinatorClient,
        txn_id: tuple[int, int],
        timeout: float,
        opened_at: float,
    ) -> None:
        self._ctx = ctx
        self._coordinators = coordinators
        self.txn_id = txn_id
        self.lifecycle = TransactionLifecycle(f"({txn_id[0]},{txn_id[1]})", opened_at, timeout)
        self._partitions: dict[str, asyncio.Future[None]] = {}
        self._subscriptions: dict[tuple[str, str], asyncio.Future[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._on_commit: list[Callable[[], None]] = []
        self._on_abort: list[Callable[[], None]] = []

    @property
    def most_bits(self) -> int:
        return self.txn_id[0]

    @property
    def least_bits(self) -> int:
        return self.txn_id[1]

    @property
    def state(self) -> TransactionState:
        """The transaction's state now (``TIMED_OUT`` once its timeout passed while open)."""
        return self.lifecycle.state(self._ctx.loop.time())

    @property
    def partitions(self) -> frozenset[str]:
        """The (segment) topics this transaction produced to, as registered with its
        coordinator."""
        return frozenset(t for t, f in self._partitions.items() if f.done() and not f.exception())

    def __repr__(self) -> str:
        return f"<Transaction {self.lifecycle.name} {self.state.value}>"

    # -- operations inside the transaction (on the loop) --------------------------------------

    def check_open(self, doing: str) -> None:
        """Raise the typed error unless sends and acknowledgments are allowed now."""
        self.lifecycle.check_open(self._ctx.loop.time(), doing)

    def op_started(self) -> None:
        """A send or acknowledgment in this transaction began (commit waits for it)."""
        self.lifecycle.op_started()
        self._idle.clear()

    def op_finished(self, error: BaseException | None) -> None:
        """It was answered (``error``: it failed, and the transaction can no longer commit)."""
        if error is not None:
            log.info("transaction %s: an operation failed: %s", self.lifecycle.name, error)
        self.lifecycle.op_finished(error)
        if self.lifecycle.in_flight <= 0:
            self._idle.set()

    def track(self, awaitable: Awaitable[Any]) -> asyncio.Future[Any]:
        """Count ``awaitable`` as an operation of this transaction until it completes."""
        future = asyncio.ensure_future(awaitable)
        self.op_started()

        def done(f: asyncio.Future[Any]) -> None:
            self.op_finished(asyncio.CancelledError() if f.cancelled() else f.exception())

        future.add_done_callback(done)
        return future

    def on_commit(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the loop) once the transaction has committed."""
        self._on_commit.append(callback)

    def on_abort(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the loop) once the transaction has been aborted."""
        self._on_abort.append(callback)

    def add_partition(self, topic: str) -> asyncio.Future[None]:
        """Register ``topic`` as a partition once (ADD_PARTITION_TO_TXN); later calls share the
        first request's outcome."""
        found = self._partitions.get(topic)
        if found is None:
            found = asyncio.ensure_future(self._coordinators.add_partition(self.txn_id, topic))
            found.add_done_callback(_consume_exception)
            self._partitions[topic] = found
        return found

    def add_subscription(self, topic: str, subscription: str) -> asyncio.Future[None]:
        """Register ``subscription`` of ``topic`` once (ADD_SUBSCRIPTION_TO_TXN)."""
        key = (topic, subscription)
        found = self._subscriptions.get(key)
        if found is None:
            found = asyncio.ensure_future(
                self._coordinators.add_subscription(self.txn_id, topic, subscription)
            )
            found.add_done_callback(_consume_exception)
            self._subscriptions[key] = found
        return found

    # -- ending --------------------------------------------------------------------------------

    async def commit(self) -> None:
        """Wait for every send and acknowledgment of the transaction to be answered, then
        commit it: its messages become visible and its acknowledgments take effect, on every
        topic, together.

        Raises:
            TransactionEndedError: it was committed or aborted already (or is being ended).
            TransactionTimedOutError: its timeout passed (its coordinator aborted it).
            TransactionErroredError: an operation inside it failed: abort it.
            TransactionConflictError: the coordinator refused the commit.
        """
        lifecycle = self.lifecycle
        lifecycle.begin_commit(self._ctx.loop.time())
        await self._idle.wait()
        lifecycle.committable(self._ctx.loop.time())
        await self._end_txn(commit=True)

    async def abort(self) -> None:
        """Wait for the transaction's operations in flight, then abort it: its messages are
        never delivered and its acknowledged messages are delivered again. Allowed while open or
        errored.

        Raises:
            TransactionEndedError: it was committed or aborted already (or is being ended).
            TransactionTimedOutError: its timeout passed: its coordinator aborts it anyway.
        """
        self.lifecycle.begin_abort(self._ctx.loop.time())
        # As a commit, after the operations in flight: one answered after END_TXN would
        # reach a transaction that no longer exists (and an ack there would stay held).
        await self._idle.wait()
        await self._end_txn(commit=False)

    async def _end_txn(self, *, commit: bool) -> None:
        try:
            await self._coordinators.end(self.txn_id, commit)
        except Exception as exc:
            error = self.lifecycle.end_failed(exc, self._ctx.loop.time())
            if error is exc:
                raise
            raise error from exc
        self.lifecycle.ended(commit)
        callbacks = self._on_commit if commit else self._on_abort
        self._on_commit, self._on_abort = [], []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("after the commit of transaction %s", self.lifecycle.name)


def _consume_exception(future: asyncio.Future[Any]) -> None:
    """Mark a registration's failure as retrieved (its users see it through the future)."""
    if not future.cancelled():
        future.exception()


def check_timeout(timeout: object) -> float:
    """A transaction timeout in seconds (> 0, at most what NEW_TXN can carry)."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout < math.inf  # NaN fails this too
    ):
        raise InvalidConfigurationError(f"timeout must be seconds > 0, got {timeout!r}")
    if timeout * 1000 >= 1 << 63:
        raise InvalidConfigurationError(f"timeout too large: {timeout!r}")
    return float(timeout)


__all__ = [
    "DEFAULT_TIMEOUT",
    "AsyncTransaction",
    "TransactionLifecycle",
    "TransactionState",
    "check_timeout",
]
