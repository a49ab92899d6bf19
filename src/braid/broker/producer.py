"""A producer attached to a topic: in-order receipts for concurrently persisted messages.

Every SEND is handed to the managed ledger at once (many appends in flight is what makes publishing
fast), but the official client requires receipts in the order it sent the messages: a receipt ahead
of its queue head makes it close the connection. So each SEND first takes its place in the
producer's queue (:meth:`Producer.expect`); whatever answers it - the ledger's append callback,
a duplicate check, a refused checksum - calls :meth:`Producer.complete`, which sends every answer
now at the head of the queue. No future per message: a :class:`PendingReceipt` is a few slots,
and it is also the context the managed ledger hands back with the append's completion.

A SEND refused because the topic is terminated is answered, for the official C++ client, not with
a SEND error: that client closes its *whole connection* on any SEND error but a checksum one, and
every receipt still in flight on it - other producers', other partitions' - would be lost, so
messages that were stored would be resent and refused as not stored (a duplicate once the
application retries elsewhere: the migration to a scalable topic does exactly that, ADR 0063).
The producer alone is closed instead (``CLOSE_PRODUCER``; every earlier receipt went before it):
the client re-creates it, a terminated topic refuses that with ``TopicTerminated``, and exactly
the messages that were not stored fail with it. Other clients (Braid's re-routes on the SEND
error at once, ``docs/protocol.md``) get the SEND error.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from braid.core.errors import TopicTerminatedError
from braid.ledger.api import Position
from braid.protocol.generated import PulsarApi_pb2 as pb

if TYPE_CHECKING:
    from braid.broker.ownership import AssignedBroker
    from braid.broker.transactions.ids import TxnId

#: Producer access modes: the generated ``ProducerAccessMode`` enum itself (``AccessMode.Shared``
#: is the wire value, ``AccessMode.Name(value)`` its name).
AccessMode = pb.ProducerAccessMode


class ProducerTransport(Protocol):
    """What a producer needs from its connection (implemented by ``BrokerConnection``)."""

    def send_receipt(
        self, producer_id: int, sequence_id: int, highest_sequence_id: int, position: Position
    ) -> None: ...

    def send_publish_error(
        self, producer_id: int, sequence_id: int, exc: BaseException
    ) -> None: ...

    def send_close_producer(self, producer_id: int, assigned: AssignedBroker | None = None) -> None:
        """Tell the client the broker closed this producer (it reconnects and resends; to
        ``assigned`` when its topic moved there)."""
        ...

    @property
    def remote_address(self) -> str: ...

    @property
    def closed(self) -> bool:
        """The connection is closed (its producers are about to be detached)."""
        ...


class PendingReceipt:
    """One SEND of ``producer`` waiting for its answer: a receipt at ``position`` or ``error``.

    ``highest_sequence_id`` is the SEND's own field (echoed in the receipt); ``last_sequence_id``
    the last sequence id the SEND covers (a batch of n from ``s`` covers ``s + n - 1``), which
    deduplication records.
    """

    __slots__ = (
        "done",
        "error",
        "highest_sequence_id",
        "last_sequence_id",
        "position",
        "producer",
        "sequence_id",
        "txn",
    )

    def __init__(
        self, producer: Producer, sequence_id: int, highest_sequence_id: int, last_sequence_id: int
    ) -> None:
        self.producer = producer
        self.sequence_id = sequence_id
        self.highest_sequence_id = highest_sequence_id
        self.last_sequence_id = last_sequence_id
        self.position: Position | None = None
        self.error: BaseException | None = None
        self.done = False
        #: The transaction the SEND belongs to (its topic's transaction buffer hears of the
        #: stored position); ``None`` outside transactions.
        self.txn: TxnId | None = None


#: Receipt position for a duplicate that was not written again (Pulsar answers ``-1:-1``).
DUPLICATE_POSITION = Position(-1, -1)


class Producer:
    """One producer on one connection."""

    def __init__(
        self,
        producer_id: int,
        name: str,
        access_mode: AccessMode.ValueType,
        transport: ProducerTransport,
        *,
        user_provided_name: bool,
    ) -> None:
        self.producer_id = producer_id
        self.name = name
        self.access_mode = access_mode
        self.transport = transport
        self.user_provided_name = user_provided_name
        #: The schema version PRODUCER_SUCCESS gave it (``None``: no schema).
        self.schema_version: bytes | None = None
        self.closed = False
        #: Detaches this producer from its topic (set by the topic's producer set).
        self.release: Callable[[Producer], None] | None = None
        #: Close rather than answer a SEND refused by a terminated topic (module docstring).
        self.close_when_terminated = False
        # Counters for stats (messages counts every message of a batch; refused: SENDs refused
        # before storage, poison or oversize); only count_in and count_refused change them.
        self._messages_in = 0
        self._bytes_in = 0
        self._messages_refused = 0
        self._inflight: deque[PendingReceipt] = deque()

    @property
    def pending(self) -> int:
        return len(self._inflight)

    def detach(self) -> None:
        """The topic let this producer go: answers still due are no longer sent."""
        self.closed = True

    def count_in(self, messages: int, size: int) -> None:
        """Count one SEND handed to storage: ``messages`` messages, ``size`` bytes."""
        self._messages_in += messages
        self._bytes_in += size

    def count_refused(self) -> int:
        """Count one SEND refused before storage; returns how many were refused so far."""
        self._messages_refused += 1
        return self._messages_refused

    def expect(
        self, sequence_id: int, highest_sequence_id: int, last_sequence_id: int
    ) -> PendingReceipt:
        """Queue the answer to a SEND, in arrival order (before anything can answer it)."""
        receipt = PendingReceipt(self, sequence_id, highest_sequence_id, last_sequence_id)
        self._inflight.append(receipt)
        return receipt

    def complete(
        self, receipt: PendingReceipt, position: Position | None, error: BaseException | None
    ) -> None:
        """Answer ``receipt`` (``position`` ``None`` without an error: a duplicate that was not
        written again); sends it and every later answer already known, once all before it went.
        """
        receipt.position = position
        receipt.error = error
        receipt.done = True
        queue = self._inflight
        transport = self.transport
        while queue and queue[0].done:
            head = queue.popleft()
            if self.closed:
                continue
            if head.error is not None:
                if self.close_when_terminated and isinstance(head.error, TopicTerminatedError):
                    self._close_terminated()  # drops every later answer (all refused too)
                    continue
                transport.send_publish_error(self.producer_id, head.sequence_id, head.error)
                continue
            transport.send_receipt(
                self.producer_id,
                head.sequence_id,
                head.highest_sequence_id,
                DUPLICATE_POSITION if head.position is None else head.position,
            )

    def _close_terminated(self) -> None:
        """The topic is terminated: close this producer rather than send a SEND error (module
        docstring)."""
        if self.release is not None:
            self.release(self)
        self.closed = True
        self.transport.send_close_producer(self.producer_id)

    def stats(self) -> dict[str, object]:
        return {
            "producerId": self.producer_id,
            "producerName": self.name,
            "accessMode": AccessMode.Name(self.access_mode),
            "address": self.transport.remote_address,
            "msgInCounter": self._messages_in,
            "bytesInCounter": self._bytes_in,
            "msgRefusedCounter": self._messages_refused,
            "pendingReceipts": len(self._inflight),
        }
