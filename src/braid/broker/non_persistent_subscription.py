"""A subscription of a non-persistent topic: its consumers, and where each message goes now.

A ``non-persistent://`` topic stores nothing (ADR 0062), so its subscription has no cursor and no
backlog: :meth:`NonPersistentSubscription.dispatch` runs inside the producer's SEND and either
hands the message to one consumer with room - FLOW permits above zero, as Pulsar checks - or
drops it and counts the drop (:class:`DropMeter`, Pulsar's ``msgDropRate``). Which consumer, by
the type of the subscription's consumers (Pulsar's non-persistent dispatchers):

* Exclusive, Failover: the one active consumer - Pulsar's failover choice, the consumers sorted by
  (priority level, name) and the partition index modulo their number picking one (index 0 for a
  topic that is not a partition); Failover consumers hear ACTIVE_CONSUMER_CHANGE.
* Shared: round-robin over the consumers with permits, the lowest priority level first.
* Key_Shared: the consumer the message's sticky-key hash selects
  (:mod:`braid.broker.sticky_keys`, AUTO_SPLIT or STICKY as the first consumer asked); when that
  consumer has no permits the message is dropped - it never goes to another consumer, so a key's
  messages keep their order.

Acknowledgements and redelivery requests are no-ops (nothing could be delivered again), as are
the delivery books: a consumer's messages are not tracked as unacknowledged. A seek or a cursor
reset is refused with :class:`~braid.broker.errors.NotAllowedOnNonPersistent`. A durable
subscription stays when its last consumer leaves (later messages are dropped and counted); a
reader's (non-durable) is removed then. No I/O, no task, nothing allocated per message but the
delivery itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from braid.broker.consumer import Consumer, Delivery, SubType
from braid.broker.dispatch_settings import DispatchSettings
from braid.broker.errors import ConsumerBusy, NotAllowedOnNonPersistent, NotSupported
from braid.broker.ownership import AssignedBroker
from braid.broker.sticky_keys import (
    KeySharedPolicy,
    StickyKeySelector,
    new_selector,
    sticky_hash_of,
)
from braid.broker.subscription_admission import check_joins
from braid.clock import Clock
from braid.ledger.api import Entry, Position
from braid.protocol.generated import PulsarApi_pb2 as pb

#: Shortest span a drop rate is computed over; a stats read sooner reports the previous rate.
MIN_RATE_INTERVAL_S = 1.0


class DropMeter:
    """Messages dropped: a cumulative count (bumped on the hot path, nothing else) and Pulsar's
    ``msgDropRate``, drops per second between two stats reads at least
    :data:`MIN_RATE_INTERVAL_S` apart (the first read measures from the meter's creation)."""

    __slots__ = ("_clock", "_mark_count", "_mark_time", "_rate", "count")

    def __init__(self, clock: Clock) -> None:
        self.count = 0
        self._clock = clock
        self._mark_time = clock.monotonic()
        self._mark_count = 0
        self._rate = 0.0

    def rate(self) -> float:
        now = self._clock.monotonic()
        elapsed = now - self._mark_time
        if elapsed >= MIN_RATE_INTERVAL_S:
            self._rate = (self.count - self._mark_count) / elapsed
            self._mark_time, self._mark_count = now, self.count
        return self._rate


def not_allowed(what: str, topic: str) -> NotAllowedOnNonPersistent:
    """The refusal of an operation that needs stored messages (Pulsar's ``NotAllowed``)."""
    return NotAllowedOnNonPersistent(
        f"{what} is not allowed on non-persistent topic {topic}: it stores no messages"
    )


class NonPersistentSubscription:
    """One subscription of one non-persistent topic."""

    def __init__(
        self,
        topic_name: str,
        name: str,
        *,
        partition: int,
        settings: DispatchSettings,
        clock: Clock,
        durable: bool = True,
        on_empty: Callable[[NonPersistentSubscription], None] | None = None,
    ) -> None:
        self.topic_name = topic_name
        self.name = name
        self.durable = durable
        self.settings = settings
        self._partition = max(partition, 0)
        self._on_empty = on_empty
        self.sub_type: SubType.ValueType | None = None
        self._consumers: list[Consumer] = []
        self._active: Consumer | None = None
        self._policy: KeySharedPolicy | None = None
        self._selector: StickyKeySelector[Consumer] | None = None
        self._next = 0
        #: Messages dropped because no consumer had room (Pulsar's subscription ``msgDropRate``).
        self.drops = DropMeter(clock)
        # Messages and bytes delivered to consumers that have since left.
        self._out_of_removed = (0, 0)

    @property
    def consumers(self) -> list[Consumer]:
        return list(self._consumers)

    @property
    def msg_backlog(self) -> int:
        """Always 0: nothing waits for a consumer."""
        return 0

    # -- consumers -----------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        """Attach ``consumer`` or raise saying why it cannot attach.

        Raises:
            ConsumerBusy: another type, a second Exclusive consumer, another Key_Shared policy.
            NotSupported: ``read_compacted`` (nothing is compacted); Key_Shared disabled.
            ConsumerAssignError: STICKY hash ranges that conflict with another consumer's.
        """
        if consumer.read_compacted:
            raise NotSupported("readCompacted only valid on persistent topics")
        if consumer.sub_type == SubType.Key_Shared and not self.settings.key_shared_enabled:
            raise NotSupported("Key_Shared subscriptions are disabled by the broker")
        for stale in [c for c in self._consumers if c.transport.closed]:
            self.remove_consumer(stale)  # its connection is gone; it must not block a reconnect
        if self._consumers:
            self._check_joins(consumer)
        else:
            self._reset_type(consumer)
        if self._selector is not None:
            self._selector.add(consumer, consumer.key_shared or KeySharedPolicy())
        self._consumers.append(consumer)
        self._pick_active(newcomer=consumer)

    def _check_joins(self, consumer: Consumer) -> None:
        assert self.sub_type is not None
        check_joins(self.name, self.topic_name, self.sub_type, consumer)
        policy = consumer.key_shared or KeySharedPolicy()
        if self._policy is not None and not policy.same_subscription_policy(self._policy):
            raise ConsumerBusy(
                "the consumer uses a different Key_Shared policy than the subscription "
                f"({policy.mode.name} vs {self._policy.mode.name})"
            )

    def _reset_type(self, first: Consumer) -> None:
        """The first consumer sets the subscription's type (and Key_Shared policy)."""
        self.sub_type = first.sub_type
        self._active = None
        self._next = 0
        self._policy = self._selector = None
        if first.sub_type == SubType.Key_Shared:
            self._policy = first.key_shared or KeySharedPolicy()
            self._selector = new_selector(
                self._policy,
                consistent_hashing=self.settings.key_shared_consistent_hashing,
                replica_points=self.settings.key_shared_replica_points,
            )

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.detach()
        if consumer in self._consumers:
            self._consumers.remove(consumer)
            messages, size = self._out_of_removed
            self._out_of_removed = (messages + consumer.messages_out, size + consumer.bytes_out)
            if self._selector is not None:
                self._selector.remove(consumer)
            self._pick_active(newcomer=None)
        if not self._consumers and self._on_empty is not None:
            self._on_empty(self)

    def _pick_active(self, newcomer: Consumer | None) -> None:
        """Exclusive/Failover: choose the active consumer; Failover consumers are told."""
        if self.sub_type not in (SubType.Exclusive, SubType.Failover):
            return
        ordered = sorted(self._consumers, key=lambda c: (c.priority_level, c.consumer_name))
        new = ordered[self._partition % len(ordered)] if ordered else None
        changed = new is not self._active
        self._active = new
        if self.sub_type != SubType.Failover:
            return
        # Told on the next loop turn, so a new consumer hears of it after its SUBSCRIBE's SUCCESS.
        loop = asyncio.get_running_loop()
        if changed:
            loop.call_soon(self._notify_active, new)
        elif newcomer is not None:
            loop.call_soon(self._notify, newcomer, False)

    def _notify_active(self, active: Consumer | None) -> None:
        if active is self._active:  # else it changed again meanwhile; that change notifies
            for c in self._consumers:
                self._notify(c, c is active)

    @staticmethod
    def _notify(consumer: Consumer, is_active: bool) -> None:
        if not consumer.closed:
            consumer.transport.send_active_consumer_change(consumer.consumer_id, is_active)

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits)

    # -- delivery ------------------------------------------------------------------------------

    def dispatch(self, entry: Entry, messages: int, metadata: pb.MessageMetadata) -> None:
        """Hand one published entry (``messages`` messages) to a consumer with room, or drop it."""
        consumer = self._choose(metadata)
        if consumer is None or consumer.permits <= 0 or consumer.transport.closed:
            self.drops.count += messages
            return
        consumer.deliver((Delivery(entry, 0, messages),), track=False)

    def _choose(self, metadata: pb.MessageMetadata) -> Consumer | None:
        sub_type = self.sub_type
        if sub_type == SubType.Shared:
            return self._next_shared()
        if sub_type == SubType.Key_Shared:
            selector = self._selector
            return selector.select(sticky_hash_of(metadata)) if selector is not None else None
        return self._active

    def _next_shared(self) -> Consumer | None:
        """Round-robin over the consumers with permits, the lowest priority level first."""
        consumers = self._consumers
        count = len(consumers)
        best: Consumer | None = None
        best_index = 0
        for step in range(count):
            index = (self._next + step) % count
            candidate = consumers[index]
            if candidate.permits > 0 and (
                best is None or candidate.priority_level < best.priority_level
            ):
                best, best_index = candidate, index
        if best is not None:
            self._next = best_index + 1
        return best

    # -- what needs storage --------------------------------------------------------------------

    def record_acks(
        self, consumer: Consumer, positions: Sequence[Position], cumulative: bool
    ) -> None:
        """A no-op: nothing is kept to acknowledge (as Pulsar)."""

    async def acknowledge(
        self,
        consumer: Consumer,
        positions: Sequence[Position],
        cumulative: bool,
        batch_indexes: Sequence[tuple[Position, Sequence[int]]] = (),
    ) -> None:
        """A no-op: nothing is kept to acknowledge (as Pulsar)."""

    def redeliver(self, consumer: Consumer, positions: Sequence[Position] | None) -> None:
        """A no-op: nothing is kept to deliver again (as Pulsar)."""

    async def reset_cursor(self, position: Position) -> None:
        """Refused: there is no cursor to move."""
        raise not_allowed("seek (reset cursor)", self.topic_name)

    # -- lifecycle -----------------------------------------------------------------------------

    def disconnect_consumers(self, assigned: AssignedBroker | None = None) -> None:
        """Close every consumer from the broker side; the clients reconnect on their own (to
        ``assigned`` when the topic moved there)."""
        for consumer in list(self._consumers):
            self.remove_consumer(consumer)
            consumer.transport.send_close_consumer(consumer.consumer_id, assigned)

    async def close(self, assigned: AssignedBroker | None = None) -> None:
        self._on_empty = None
        self.disconnect_consumers(assigned)

    def stats(self) -> dict[str, object]:
        """Pulsar's ``NonPersistentSubscriptionStats`` fields (and ``msgDropCount``, Braid's
        cumulative count behind ``msgDropRate``)."""
        messages, size = self._out_of_removed
        active = self._active
        stats: dict[str, object] = {
            "type": SubType.Name(self.sub_type) if self.sub_type is not None else "None",
            "msgBacklog": 0,
            "msgOutCounter": messages + sum(c.messages_out for c in self._consumers),
            "bytesOutCounter": size + sum(c.bytes_out for c in self._consumers),
            "msgDropRate": self.drops.rate(),
            "msgDropCount": self.drops.count,
            "isDurable": self.durable,
            "activeConsumerName": active.consumer_name if active is not None else None,
            "consumers": [c.stats() for c in self._consumers],
        }
        if self._policy is not None:
            stats["keySharedMode"] = self._policy.mode.name
        return stats


__all__ = ["DropMeter", "NonPersistentSubscription", "not_allowed"]
