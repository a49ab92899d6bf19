"""A durable subscription: a named cursor on a topic's managed ledger plus its consumers.

The subscription admits consumers (Exclusive: one; Failover, Shared and Key_Shared: many of the
same type), turns acknowledgements into cursor operations (individual -> ``delete``, cumulative ->
``mark_delete``, a part of a batch -> ``delete_batch_indexes`` when batch-index acknowledgement is
on), handles seek (reset the cursor, then close the consumers so they re-subscribe at the new
position, as Pulsar does) and unsubscribe (delete the cursor). Delivery is the dispatcher's job
(:mod:`braid.broker.dispatcher`, :mod:`braid.broker.key_shared`), chosen by the type of the first
consumer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from braid.broker.backlog_quota import estimated_backlog_bytes
from braid.broker.consumer import Consumer, SubType
from braid.broker.dispatch_settings import DispatchSettings
from braid.broker.dispatcher import (
    CompactedReader,
    Dispatcher,
    EntryFilter,
    SharedDispatcher,
    SingleActiveDispatcher,
)
from braid.broker.errors import NotSupported
from braid.broker.key_shared import KeySharedDispatcher
from braid.broker.ownership import AssignedBroker
from braid.broker.sticky_keys import KeySharedPolicy
from braid.broker.subscription_admission import check_joins
from braid.clock import Clock, SystemClock
from braid.ledger.api import InvalidPosition, ManagedCursor, ManagedLedger, Position

#: A batch-index acknowledgement: the entry and the ack-set words of its messages still unacked.
BatchIndexAck = tuple[Position, Sequence[int]]

log = logging.getLogger(__name__)


class Subscription:
    """One durable subscription of one topic."""

    def __init__(
        self,
        topic_name: str,
        name: str,
        ledger: ManagedLedger,
        cursor: ManagedCursor,
        *,
        read_batch: int = 100,
        settings: DispatchSettings | None = None,
        clock: Clock | None = None,
        compacted: CompactedReader | None = None,
        durable: bool = True,
        on_empty: Callable[[Subscription], None] | None = None,
        on_cursor_moved: Callable[[Subscription], None] | None = None,
    ) -> None:
        self.topic_name = topic_name
        self.durable = durable
        self._on_empty = on_empty
        self._on_cursor_moved = on_cursor_moved
        self._resetting = False
        self.name = name
        self.ledger = ledger
        self.cursor = cursor
        self.settings = settings or DispatchSettings(read_batch=read_batch)
        self._clock = clock or SystemClock()
        self._compacted = compacted
        self.dispatcher: Dispatcher | None = None
        # Cursor writes for acks are applied one at a time, in arrival order.
        self._ack_lock = asyncio.Lock()
        self._closed = False
        self._retired: asyncio.Future[None] | None = None
        #: Set by the topic's transactions (:mod:`braid.broker.transactions`); every dispatcher
        #: of this subscription reads through it.
        self.entry_filter: EntryFilter | None = None

    @property
    def sub_type(self) -> SubType.ValueType | None:
        return self.dispatcher.sub_type if self.dispatcher is not None else None

    @property
    def consumers(self) -> list[Consumer]:
        return list(self.dispatcher.consumers) if self.dispatcher is not None else []

    @property
    def msg_backlog(self) -> int:
        """Entries not yet acknowledged (the cursor's backlog)."""
        return self.cursor.backlog()

    def add_consumer(self, consumer: Consumer) -> None:
        """Attach ``consumer`` or raise saying why it cannot attach.

        Raises:
            ConsumerBusy: another type, a second Exclusive consumer, another Key_Shared policy.
            NotSupported: Key_Shared disabled by the broker; ``read_compacted`` on a shared type.
            ConsumerAssignError: STICKY hash ranges that conflict with another consumer's.
        """
        if consumer.sub_type == SubType.Key_Shared and not self.settings.key_shared_enabled:
            raise NotSupported("Key_Shared subscriptions are disabled by the broker")
        if consumer.read_compacted and consumer.sub_type not in (
            SubType.Exclusive,
            SubType.Failover,
        ):
            raise NotSupported(
                "read compacted is only allowed on Exclusive or Failover subscriptions"
            )
        current = self.dispatcher
        if current is not None:
            for stale in [c for c in current.consumers if c.transport.closed]:
                # Its connection is gone but not yet cleaned up; it must not block a reconnect.
                self.remove_consumer(stale)
        if current is not None and current.consumers:
            check_joins(self.name, self.topic_name, current.sub_type, consumer)
        if current is None or current.sub_type != consumer.sub_type:
            if current is not None:
                self._retired = asyncio.ensure_future(current.close())
            # A new dispatcher knows nothing of what the old one read: start from the first
            # unacknowledged entry so nothing read-but-undelivered is skipped.
            self.cursor.rewind()
            current = self._new_dispatcher(consumer)
            current.entry_filter = self.entry_filter
            current.on_skipped = self._cursor_moved
            self.dispatcher = current
            current.start()
        current.add_consumer(consumer)

    def _new_dispatcher(self, first: Consumer) -> Dispatcher:
        description = f"{self.topic_name}/{self.name}"
        if first.sub_type == SubType.Key_Shared:
            return KeySharedDispatcher(
                self.ledger,
                self.cursor,
                first.key_shared or KeySharedPolicy(),
                settings=self.settings,
                clock=self._clock,
                description=description,
            )
        if first.sub_type == SubType.Shared:
            return SharedDispatcher(
                self.ledger,
                self.cursor,
                first.sub_type,
                settings=self.settings,
                clock=self._clock,
                description=description,
            )
        return SingleActiveDispatcher(
            self.ledger,
            self.cursor,
            first.sub_type,
            settings=self.settings,
            clock=self._clock,
            compacted=self._compacted,
            description=description,
        )

    def remove_consumer(self, consumer: Consumer) -> None:
        if self.dispatcher is not None:
            self.dispatcher.remove_consumer(consumer)
        if self._on_empty is not None and not self._resetting and not self.consumers:
            # A reader's subscription ends with its last consumer (but not during a seek, whose
            # consumers come straight back).
            self._on_empty(self)

    def flow(self, consumer: Consumer, permits: int) -> None:
        if self.dispatcher is not None:
            self.dispatcher.on_flow(consumer, permits)

    def redeliver(self, consumer: Consumer, positions: Sequence[Position] | None) -> None:
        if self.dispatcher is not None:
            self.dispatcher.redeliver(consumer, positions)

    def record_acks(
        self, consumer: Consumer, positions: Sequence[Position], cumulative: bool
    ) -> None:
        """Take acknowledged positions off the delivery books at once, so no redelivery can pick
        them up while the acknowledgement is being persisted. The ACK handler calls this before
        it hands the persisting to a task (the dispatcher may run first); :meth:`acknowledge`
        calls it again, which changes nothing."""
        dispatcher = self.dispatcher
        if dispatcher is None or not positions:
            return
        if not cumulative:
            dispatcher.on_acked(positions)
        elif consumer.sub_type not in (SubType.Shared, SubType.Key_Shared):
            dispatcher.on_acked_up_to(max(positions))

    async def acknowledge(
        self,
        consumer: Consumer,
        positions: Sequence[Position],
        cumulative: bool,
        batch_indexes: Sequence[BatchIndexAck] = (),
    ) -> None:
        """Record acks now (so they are never redelivered) and persist them in order.

        ``batch_indexes`` acknowledge single messages of batch entries (PIP-54); they are applied
        only when ``acknowledgmentAtBatchIndexLevelEnabled`` is on (else such an entry stays
        unacknowledged until all of it is, as before PIP-54).
        """
        partial = list(batch_indexes) if self.settings.batch_index_ack else []
        if cumulative:
            if consumer.sub_type in (SubType.Shared, SubType.Key_Shared):
                raise NotSupported(
                    "cumulative acknowledgement is not allowed on a "
                    f"{SubType.Name(consumer.sub_type)} subscription"
                )
            position = max(positions) if positions else None
            self.record_acks(consumer, positions, cumulative)
            async with self._ack_lock:
                if position is not None and position > self.cursor.mark_delete_position:
                    try:
                        await self.cursor.mark_delete(position)
                    except InvalidPosition as exc:
                        log.info("ignoring cumulative ack %s on %s: %s", position, self.name, exc)
                await self._delete_batch_indexes(partial)
            self._cursor_moved()
            return
        self.record_acks(consumer, positions, cumulative)
        await self.delete_positions(positions, partial)

    async def delete_positions(
        self, positions: Sequence[Position], partial: Sequence[BatchIndexAck] = ()
    ) -> None:
        """Persist individual acknowledgements of ``positions`` (taken off the delivery books
        already) in arrival order; a committed transaction's pending acks come here."""
        async with self._ack_lock:
            mark = self.cursor.mark_delete_position
            fresh = [p for p in positions if p > mark]
            if fresh:
                try:
                    await self.cursor.delete(fresh)
                except InvalidPosition as exc:
                    log.info("ignoring ack of %s on %s: %s", fresh, self.name, exc)
            await self._delete_batch_indexes(partial)
        self._cursor_moved()

    async def mark_delete_up_to(self, position: Position) -> None:
        """Persist a cumulative acknowledgement (a committed transaction's), in arrival order."""
        async with self._ack_lock:
            if position > self.cursor.mark_delete_position:
                try:
                    await self.cursor.mark_delete(position)
                except InvalidPosition as exc:
                    log.info("ignoring cumulative ack %s on %s: %s", position, self.name, exc)
        self._cursor_moved()

    async def _delete_batch_indexes(self, acks: Sequence[BatchIndexAck]) -> None:
        """Apply batch-index acks (hold :attr:`_ack_lock`); entries they complete are forgotten
        by the dispatcher like whole-entry acks."""
        mark = self.cursor.mark_delete_position
        fresh = [(p, words) for p, words in acks if p > mark]
        if not fresh:
            return
        try:
            await self.cursor.delete_batch_indexes(fresh)
        except InvalidPosition as exc:
            log.info("ignoring batch-index ack of %s on %s: %s", fresh, self.name, exc)
            return
        done = [p for p, _ in fresh if self.cursor.is_deleted(p)]
        if done and self.dispatcher is not None:
            self.dispatcher.on_acked(done)

    def _cursor_moved(self) -> None:
        if self._on_cursor_moved is not None:
            self._on_cursor_moved(self)

    async def reset_cursor(self, position: Position) -> None:
        """Seek: close the consumers (they re-subscribe), then make ``position`` the next entry."""
        self._resetting = True
        try:
            self.disconnect_consumers()
        finally:
            self._resetting = False
        dispatcher = self.dispatcher
        if dispatcher is None:
            await self.cursor.reset(position)
        else:
            async with dispatcher.lock:
                await self.cursor.reset(position)
                dispatcher.reset_books()
        self._cursor_moved()

    async def expire_up_to(self, position: Position) -> bool:
        """Acknowledge everything up to ``position`` on the broker's behalf (message TTL and
        backlog eviction); the consumers stay attached and entries they hold at or below it are
        taken off their books. Returns whether the cursor moved."""
        async with self._ack_lock:
            if position <= self.cursor.mark_delete_position:
                return False
            dispatcher = self.dispatcher
            if dispatcher is None:
                await self.cursor.mark_delete(position)
            else:
                async with dispatcher.lock:
                    await self.cursor.mark_delete(position)
                    # As if each consumer acknowledged what it holds up to there (a Key_Shared
                    # dispatcher releases their hashes); replays of them are dropped.
                    held = [p for c in dispatcher.consumers for p in c.pending_up_to(position)]
                    dispatcher.on_acked(held)
                    dispatcher.on_acked_up_to(position)
                    if isinstance(dispatcher, SharedDispatcher):
                        dispatcher.replay.discard_up_to(position)
        self._cursor_moved()
        return True

    def disconnect_consumers(self, assigned: AssignedBroker | None = None) -> None:
        """Close every consumer from the broker side; the clients reconnect on their own (to
        ``assigned`` when the topic moved there)."""
        for consumer in self.consumers:
            self.remove_consumer(consumer)
            consumer.transport.send_close_consumer(consumer.consumer_id, assigned)

    async def close(self, assigned: AssignedBroker | None = None) -> None:
        self._closed = True
        self.disconnect_consumers(assigned)
        if self.dispatcher is not None:
            await self.dispatcher.close()

    def stats(self) -> dict[str, object]:
        dispatcher = self.dispatcher
        active = dispatcher.active_consumer if dispatcher is not None else None
        return {
            "type": SubType.Name(self.sub_type) if self.sub_type is not None else None,
            "msgBacklog": self.cursor.backlog(),
            # Pulsar's estimate: what a destination_storage backlog quota measures.
            "backlogSize": estimated_backlog_bytes(
                self.ledger.ledgers, self.cursor.mark_delete_position
            ),
            "markDeletePosition": str(self.cursor.mark_delete_position),
            "readPosition": str(self.cursor.read_position),
            "unackedMessages": dispatcher.unacked_count() if dispatcher is not None else 0,
            "activeConsumerName": active.consumer_name if active is not None else None,
            "consumers": [c.stats() for c in self.consumers],
            **(dispatcher.stats() if dispatcher is not None else {}),
        }
