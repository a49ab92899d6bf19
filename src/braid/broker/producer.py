"""A producer attached to a topic: in-order receipts for concurrently persisted messages.

Every SEND is handed to the managed ledger at once (many appends in flight is what makes publishing
fast), but the official client requires receipts in the order it sent the messages: a receipt ahead
of its queue head makes it close the connection. The producer keeps the publishes in a queue and
answers from the head whenever the head's append has finished.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from braid.ledger.api import Position
from braid.protocol.generated import PulsarApi_pb2 as pb

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

    def send_close_producer(self, producer_id: int) -> None:
        """Tell the client the broker closed this producer (it reconnects and resends)."""
        ...

    @property
    def remote_address(self) -> str: ...

    @property
    def closed(self) -> bool:
        """The connection is closed (its producers are about to be detached)."""
        ...


@dataclass(slots=True)
class _Publish:
    sequence_id: int
    highest_sequence_id: int
    future: asyncio.Future[Position | None]


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
        self.closed = False
        self.messages_in = 0
        self.bytes_in = 0
        self._inflight: deque[_Publish] = deque()

    @property
    def pending(self) -> int:
        return len(self._inflight)

    def track(
        self, sequence_id: int, highest_sequence_id: int, future: asyncio.Future[Position | None]
    ) -> None:
        """Queue a publish; its receipt (or error) is sent once it and all before it finished."""
        self._inflight.append(_Publish(sequence_id, highest_sequence_id, future))
        if future.done():
            self._answer_ready()
        else:
            future.add_done_callback(self._on_done)

    def _on_done(self, _: asyncio.Future[Position | None]) -> None:
        self._answer_ready()

    def _answer_ready(self) -> None:
        queue = self._inflight
        while queue and queue[0].future.done():
            publish = queue.popleft()
            fut = publish.future
            exc: BaseException | None = (
                asyncio.CancelledError("publish cancelled") if fut.cancelled() else fut.exception()
            )
            if self.closed:
                continue
            if exc is not None:
                self.transport.send_publish_error(self.producer_id, publish.sequence_id, exc)
                continue
            position = fut.result()
            self.transport.send_receipt(
                self.producer_id,
                publish.sequence_id,
                publish.highest_sequence_id,
                DUPLICATE_POSITION if position is None else position,
            )

    def stats(self) -> dict[str, object]:
        return {
            "producerId": self.producer_id,
            "producerName": self.name,
            "accessMode": AccessMode.Name(self.access_mode),
            "address": self.transport.remote_address,
            "msgInCounter": self.messages_in,
            "bytesInCounter": self.bytes_in,
            "pendingReceipts": len(self._inflight),
        }
