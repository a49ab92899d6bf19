"""A consumer attached to a subscription: its permits, its unacknowledged messages, its connection.

The dispatcher decides *what* a consumer gets; the consumer keeps the per-consumer books Pulsar
keeps: FLOW permits counted in messages (a batch entry costs ``num_messages_in_batch``), the
entries delivered but not yet acknowledged (so they can be redelivered when the consumer asks or
leaves), and counters for stats - its own and its topic's (:attr:`Consumer.topic_counters`, which
outlive the consumer). The consumer is the only writer of its books: the dispatcher asks through
its methods (:meth:`Consumer.deliver`, :meth:`Consumer.acknowledged`, :meth:`Consumer.take_pending`,
...). Sending goes through :class:`ConsumerTransport`, implemented by the connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from braid.broker.rates import TrafficCounters
from braid.broker.sticky_keys import KeySharedPolicy
from braid.ledger.api import Entry, Position
from braid.protocol.generated import PulsarApi_pb2 as pb

if TYPE_CHECKING:
    from braid.broker.ownership import AssignedBroker

#: Subscription types: the generated ``CommandSubscribe.SubType`` enum itself (``SubType.Shared``
#: is the wire value, ``SubType.Name(value)`` its name), so it cannot drift from the schema.
SubType = pb.CommandSubscribe.SubType


@dataclass(frozen=True, slots=True)
class Delivery:
    """One entry handed to a consumer, with how often it was delivered before.

    ``messages`` is what it costs in permits; ``ack_set`` (PIP-54 bit words, empty = all) names the
    batch messages the client is to deliver - the others were acknowledged or compacted away.
    """

    entry: Entry
    redelivery_count: int
    messages: int
    ack_set: tuple[int, ...] = ()


class ConsumerTransport(Protocol):
    """What a consumer needs from its connection (implemented by ``BrokerConnection``)."""

    def send_messages(self, consumer_id: int, deliveries: Sequence[Delivery]) -> None:
        """Send MESSAGE frames for ``deliveries`` and flush them in as few writes as possible."""
        ...

    def send_close_consumer(self, consumer_id: int, assigned: AssignedBroker | None = None) -> None:
        """Tell the client the broker closed this consumer (it re-subscribes; to ``assigned``
        when its topic moved there)."""
        ...

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None: ...

    def send_reached_end_of_topic(self, consumer_id: int) -> bool:
        """Tell the consumer it drained a terminated topic; ``False`` if its client cannot."""
        ...

    @property
    def remote_address(self) -> str: ...

    @property
    def closed(self) -> bool:
        """The connection is closed (its consumers are about to be detached)."""
        ...


class Consumer:
    """One consumer of a subscription on one connection."""

    def __init__(
        self,
        consumer_id: int,
        consumer_name: str,
        sub_type: SubType.ValueType,
        priority_level: int,
        transport: ConsumerTransport,
        *,
        read_compacted: bool = False,
        key_shared: KeySharedPolicy | None = None,
    ) -> None:
        self.consumer_id = consumer_id
        self.consumer_name = consumer_name
        self.sub_type = sub_type
        self.priority_level = priority_level
        self.transport = transport
        #: Reads the compacted ledger up to the compaction horizon (Exclusive/Failover only).
        self.read_compacted = read_compacted
        #: The ``KeySharedMeta`` it subscribed with (Key_Shared only).
        self.key_shared = key_shared
        self.permits = 0
        # Delivered, not yet acknowledged: position -> number of messages in that entry. Only
        # this class changes it: the dispatcher asks through the methods below.
        self._pending: dict[Position, int] = {}
        self.closed = False
        self._told_end_of_topic = False
        self.messages_out = 0
        self.bytes_out = 0
        #: The topic's counters (set when it attaches), so dispatch rates survive the consumer.
        self.topic_counters = TrafficCounters()

    def add_permits(self, permits: int) -> None:
        self.permits += permits

    def detach(self) -> None:
        """Stop delivering to this consumer (its subscription let it go); idempotent."""
        self.closed = True

    def notify_end_of_topic(self) -> None:
        """Tell the client, once, that it drained a terminated topic (a client that cannot take
        the notice simply finds no more messages)."""
        if not self._told_end_of_topic:
            self._told_end_of_topic = True
            self.transport.send_reached_end_of_topic(self.consumer_id)

    def deliver(self, deliveries: Sequence[Delivery], *, track: bool = True) -> None:
        """Send ``deliveries`` to the client and charge their messages against the permits;
        ``track=False`` keeps them off the unacknowledged books (a non-persistent topic's
        messages are never redelivered)."""
        if not deliveries or self.closed:
            return
        messages = size = 0
        pending = self._pending
        for d in deliveries:
            if track:
                pending[d.entry.position] = d.messages
            messages += d.messages
            size += len(d.entry.data)
        self.permits -= messages
        self.messages_out += messages
        self.bytes_out += size
        topic = self.topic_counters
        topic.messages_out += messages
        topic.bytes_out += size
        self.transport.send_messages(self.consumer_id, deliveries)

    @property
    def unacked_messages(self) -> int:
        """Messages delivered and not acknowledged yet (a batch entry counts its messages)."""
        return sum(self._pending.values())

    def acknowledged(self, positions: Iterable[Position]) -> None:
        """Forget the delivered entries at ``positions`` (individually acknowledged)."""
        pending = self._pending
        for pos in positions:
            pending.pop(pos, None)

    def pending_up_to(self, position: Position) -> list[Position]:
        """The delivered, unacknowledged entries at or before ``position``."""
        return [p for p in self._pending if p <= position]

    def acknowledged_up_to(self, position: Position) -> None:
        """Forget every delivered entry at or before ``position`` (cumulative ack)."""
        for pos in [p for p in self._pending if p <= position]:
            del self._pending[pos]

    def take_pending(self, positions: Sequence[Position] | None = None) -> list[Position]:
        """Remove and return pending positions (all, or those of ``positions`` it has)."""
        pending = self._pending
        if positions is None:
            taken = list(pending)
            pending.clear()
            return taken
        # A position named twice (one per message of a batch) is taken once.
        taken = [p for p in dict.fromkeys(positions) if p in pending]
        for p in taken:
            del pending[p]
        return taken

    def forget_pending(self) -> None:
        """Forget every delivered entry (the cursor was reset: they are read again)."""
        self._pending.clear()

    def stats(self) -> dict[str, object]:
        return {
            "consumerName": self.consumer_name,
            "address": self.transport.remote_address,
            "availablePermits": self.permits,
            "unackedMessages": self.unacked_messages,
            "msgOutCounter": self.messages_out,
            "bytesOutCounter": self.bytes_out,
            "priorityLevel": self.priority_level,
        }
