"""A message on its way to the broker, and how its sender learns the outcome.

:class:`PendingMessage` carries what a send needs to be (re)routed and (re)encoded - value,
key, properties, event time, an explicit sequence id, a delayed delivery time, its transaction -
plus its call number (the order of the ``send`` calls, which every re-route preserves), the
sequence id it was already sent with if a split or merge sealed its segment before the receipt,
and its completion.
A completion is one of

* an ``asyncio.Future`` (``AsyncProducer.send_async``),
* a ``concurrent.futures.Future`` (the blocking facade's ``send_async``), or
* a :class:`SendGroup` shared by all messages of one ``send_many`` call, with the message's
  index: the group resolves once, with every id, when its last message is stored - no future
  or task per message.

:func:`succeed` and :func:`fail` are the only places completions are resolved; they tolerate
a future the caller cancelled meanwhile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Mapping
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING
from typing import TYPE_CHECKING, Any, TypeVar

from braid.core.message_id import MessageId

if TYPE_CHECKING:
    from braid.client.transaction import AsyncTransaction

_INVALID_STATE = (asyncio.InvalidStateError, concurrent.futures.InvalidStateError)
_DONE = (FINISHED, CANCELLED, CANCELLED_AND_NOTIFIED)
T = TypeVar("T")


class SharedConditionFuture(concurrent.futures.Future[T]):
    """A ``concurrent.futures.Future`` that shares one condition variable with its siblings.

    ``Future()`` builds a ``threading.Condition`` (an ``RLock`` and more) per instance - most of
    the cost of a blocking ``send_async``. A producer's futures share one condition instead;
    completion notifies every waiter of the producer, and :meth:`result` / :meth:`exception`
    wait in a loop until *their* future is done (the base class waits only once). Everything
    else (callbacks, cancellation, ``concurrent.futures.wait``) is the base class's.
    """

    def __init__(self, condition: threading.Condition) -> None:
        self._condition = condition
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []

    def _wait_done(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._state not in _DONE:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                self._condition.wait(remaining)

    def result(self, timeout: float | None = None) -> T:
        self._wait_done(timeout)
        return super().result(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait_done(timeout)
        return super().exception(0)


class SendGroup:
    """The shared completion of one ``send_many`` call."""

    __slots__ = ("future", "ids", "remaining")

    def __init__(self, count: int, future: Any) -> None:
        self.ids: list[MessageId | None] = [None] * count
        self.remaining = count
        self.future = future
        if count == 0:
            _set_result(future, [])

    def succeed(self, index: int, message_id: MessageId) -> None:
        if self.ids[index] is None:
            self.ids[index] = message_id
            self.remaining -= 1
            if self.remaining == 0:
                _set_result(self.future, self.ids)

    def fail(self, error: BaseException) -> None:
        if not self.future.done():
            _set_exception(self.future, error)


class PendingMessage:
    """One message from ``send`` until its receipt (or failure)."""

    __slots__ = (
        "call_no",
        "completion",
        "deliver_at",
        "enqueued_at",
        "event_time",
        "explicit_seq",
        "index",
        "key",
        "origin_hash",
        "properties",
        "sent_seq",
        "seq",
        "txn",
        "value",
    )

    def __init__(
        self,
        value: bytes,
        key: str | None,
        properties: Mapping[str, str] | None,
        event_time: int | None,
        explicit_seq: int | None,
        completion: Any,
        index: int,
        call_no: int,
        enqueued_at: float,
    ) -> None:
        self.value = value
        self.key = key
        self.properties = properties
        self.event_time = event_time
        self.explicit_seq = explicit_seq
        self.completion = completion
        self.index = index
        self.call_no = call_no
        self.enqueued_at = enqueued_at
        self.seq = -1
        #: The sequence id it was sent with to a segment that was then sealed before its receipt
        #: came (-1: never sent): a re-route resends it with this id, so the successor's
        #: deduplication recognises it if the sealed segment stored it (ADR 0055).
        self.sent_seq = -1
        #: The first hash of the segment it was last sent to (routes it if keyless).
        self.origin_hash = -1
        #: ``deliver_at_time`` (ms since the epoch) of a delayed message, else ``None``.
        self.deliver_at: int | None = None
        #: The transaction it is sent in (told once when it is resolved), else ``None``.
        self.txn: AsyncTransaction | None = None


def succeed(message: PendingMessage, message_id: MessageId) -> None:
    """Resolve ``message``'s completion with its id."""
    if message.txn is not None:
        _settle_txn(message, None)
    completion = message.completion
    if completion is None:
        return
    if message.index >= 0:
        completion.succeed(message.index, message_id)
    else:
        _set_result(completion, message_id)


def fail(message: PendingMessage, error: BaseException) -> None:
    """Fail ``message``'s completion with ``error``."""
    if message.txn is not None:
        _settle_txn(message, error)
    completion = message.completion
    if completion is None:
        return
    if message.index >= 0:
        completion.fail(error)
    else:
        _set_exception(completion, error)


def _settle_txn(message: PendingMessage, error: BaseException | None) -> None:
    """Tell the message's transaction its send was answered (once: the link is dropped)."""
    txn, message.txn = message.txn, None
    if txn is not None:
        txn.op_finished(error)


def _set_result(future: Any, value: Any) -> None:
    # set_result refuses a done (cancelled) future: cheaper than asking done() first, which
    # takes the condition lock of a concurrent future once more.
    try:
        future.set_result(value)
    except _INVALID_STATE:
        pass


def _set_exception(future: Any, error: BaseException) -> None:
    try:
        future.set_exception(error)
    except _INVALID_STATE:
        pass


__all__ = ["PendingMessage", "SendGroup", "SharedConditionFuture", "fail", "succeed"]
