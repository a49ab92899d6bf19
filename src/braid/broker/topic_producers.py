"""The producers of one topic and their access modes (Pulsar's ``ProducerAccessMode``).

One :class:`TopicProducers` per topic, persistent or not, is the one owner of who may publish:
producer names are unique on a topic (a name whose connection is gone is replaced), ``Shared``
producers coexist, ``Exclusive`` is refused while another producer is attached,
``ExclusiveWithFencing`` closes the others, and ``WaitForExclusive`` waits (after telling the
client it is not ready yet) until the topic has no other producer. The topic adds its own rules
around it (a terminated persistent topic takes no new producer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from braid.broker.errors import ProducerBusy, ProducerFenced, TopicTerminated
from braid.broker.ownership import AssignedBroker
from braid.broker.producer import AccessMode, Producer


class TopicProducers:
    """The producers attached to topic ``topic_name``, keyed by ``id(producer)`` (producer ids are
    per connection)."""

    def __init__(self, topic_name: str) -> None:
        self.topic_name = topic_name
        self.producers: dict[int, Producer] = {}
        self._exclusive: Producer | None = None
        self._changed = asyncio.Event()

    async def add(
        self, producer: Producer, on_waiting: Callable[[], None], stopped: Callable[[], bool]
    ) -> None:
        """Attach ``producer`` honouring its access mode; ``stopped()`` tells a waiting
        ``WaitForExclusive`` producer that the topic went away meanwhile.

        Raises:
            ProducerBusy: its name is taken, or ``Exclusive`` with other producers attached.
            ProducerFenced: another producer holds the topic exclusively.
            TopicTerminated: the topic closed while the producer waited.
        """
        name = self.topic_name
        for other in list(self.producers.values()):
            if other.name == producer.name:
                if other.transport.closed:
                    # Its connection is gone but not yet cleaned up: the client is back.
                    self.remove(other)
                    continue
                raise ProducerBusy(
                    f"producer with name {producer.name!r} is already connected to {name}"
                )
        mode = producer.access_mode
        if mode == AccessMode.WaitForExclusive:
            notified = False
            while self.producers:
                if not notified:
                    on_waiting()
                    notified = True
                self._changed.clear()
                await self._changed.wait()
                if stopped():
                    raise TopicTerminated(f"topic {name} was closed or terminated")
        elif mode == AccessMode.ExclusiveWithFencing:
            for other in list(self.producers.values()):
                self.remove(other)
                other.transport.send_close_producer(other.producer_id)
        elif self._exclusive is not None:
            raise ProducerFenced(f"topic {name} has an exclusive producer {self._exclusive.name!r}")
        elif mode == AccessMode.Exclusive and self.producers:
            raise ProducerBusy(f"topic {name} has existing shared producers")
        self.producers[id(producer)] = producer
        producer.release = self.remove
        if mode != AccessMode.Shared:
            self._exclusive = producer

    def remove(self, producer: Producer) -> None:
        """Detach ``producer`` (idempotent); a waiting ``WaitForExclusive`` producer looks again."""
        if self.producers.pop(id(producer), None) is None:
            return
        producer.detach()
        if self._exclusive is producer:
            self._exclusive = None
        self._changed.set()

    def disconnect_all(self, assigned: AssignedBroker | None = None) -> None:
        """Close every producer from the broker side (they reconnect, to ``assigned`` if named)."""
        for producer in list(self.producers.values()):
            self.remove(producer)
            producer.transport.send_close_producer(producer.producer_id, assigned)

    def wake(self) -> None:
        """Let waiting producers re-check (the topic is closing)."""
        self._changed.set()


__all__ = ["TopicProducers"]
