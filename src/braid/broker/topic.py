"""A persistent topic (``persistent://`` or ``segment://``): a managed ledger with producers and
subscriptions.

Publishing hands every message to :meth:`ManagedLedger.append_with_callback` immediately, so many
appends are in flight at once (the ledger keeps call order and reports in that order); the append
callback answers the producer's receipt queue, in order, from the bookie's group-commit completion.
Deduplication, when on, filters resends before they reach the ledger (a segment's also drops
what its ancestors stored, ADR 0055; a resend of a stored message gets its receipt even after
termination, as in Pulsar). Subscriptions are durable
cursors, created on first subscribe at the requested initial position and restored with the
managed ledger after a restart. Termination seals the ledger: sends fail with
``TopicTerminatedError`` and new producers are refused. A topic's compaction (the compacted ledger
read-compacted consumers start from) is its :attr:`PersistentTopic.compaction`.

Traffic is counted in :attr:`PersistentTopic.counters` (messages - every message of a batch - and
bytes, in and out; :mod:`braid.broker.rates`), and a segment topic may carry a
:class:`~braid.broker.key_sampler.KeyHashSampler` that looks at one entry in every few on the SEND
path to learn where its keys hash (where a split would halve the load).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from braid.broker.backlog_quota import estimated_backlog_bytes
from braid.broker.compaction import COMPACTION_CURSOR, TopicCompaction
from braid.broker.consumer import Consumer
from braid.broker.dedup import DEDUP_CURSOR_NAME, DupStatus, MessageDeduplication
from braid.broker.dispatch_settings import DispatchSettings
from braid.broker.entries import messages_in_entry, publish_time_of
from braid.broker.errors import (
    ConsumerBusy,
    DuplicateInFlight,
    SubscriptionNotFound,
    TopicFenced,
    TopicTerminated,
)
from braid.broker.key_sampler import KeyHashSampler
from braid.broker.ownership import AssignedBroker
from braid.broker.producer import PendingReceipt, Producer
from braid.broker.rates import TrafficCounters
from braid.broker.subscription import Subscription
from braid.broker.subscription_admission import check_unsubscribe
from braid.broker.topic_producers import TopicProducers
from braid.clock import Clock, SystemClock
from braid.core.errors import BraidError, FencedError
from braid.ledger.api import (
    EARLIEST,
    LATEST,
    CursorNotFound,
    InvalidPosition,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerClosed,
    Position,
)
from braid.protocol.generated import PulsarApi_pb2 as pb

if TYPE_CHECKING:
    from braid.broker.transactions.pending_ack import TopicTransactions

log = logging.getLogger(__name__)

#: Cursor names the broker uses for itself; never listed or attachable as subscriptions.
SYSTEM_CURSORS = frozenset({DEDUP_CURSOR_NAME, COMPACTION_CURSOR})
#: Cursors of non-durable subscriptions (readers) carry this prefix: they live only while a reader
#: is attached, and any left behind by a crash are deleted when the topic loads.
READER_CURSOR_PREFIX = "braid.reader."


class PersistentTopic:
    """One topic served by this broker."""

    def __init__(
        self,
        name: str,
        ledger: ManagedLedger,
        dedup: MessageDeduplication | None,
        *,
        read_batch: int = 100,
        settings: DispatchSettings | None = None,
        clock: Clock | None = None,
        on_drained: Callable[[str, str], None] | None = None,
        on_fenced: Callable[[PersistentTopic], None] | None = None,
    ) -> None:
        self.name = name
        self.ledger = ledger
        self.dedup = dedup
        self.settings = settings or DispatchSettings(read_batch=read_batch)
        self.clock = clock or SystemClock()
        self.compaction = TopicCompaction.load(name, ledger, self.clock)
        self.compaction.listeners.append(self.wake_dispatchers)
        self._on_drained = on_drained
        self._on_fenced = on_fenced
        #: Another writer took the managed ledger over: no more sends here (ADR 0040).
        self.fenced = False
        # Subscriptions already reported drained (reported again only after moving back).
        self._drained: set[str] = set()
        self._producer_set = TopicProducers(name)
        #: Keyed by id(producer): producer ids are per connection.
        self.producers: dict[int, Producer] = self._producer_set.producers
        self.subscriptions: dict[str, Subscription] = {}
        self._sub_lock = asyncio.Lock()
        self._background: set[asyncio.Future[None]] = set()
        self.closed = False
        #: Messages and bytes in and out since the topic was loaded (never go backwards).
        self.counters = TrafficCounters()
        #: Samples published keys' hashes (segment topics only; see the module docstring).
        self.key_sampler: KeyHashSampler | None = None
        #: The transaction buffer and pending acks (set on load while the broker runs a
        #: transaction coordinator; :mod:`braid.broker.transactions`).
        self.transactions: TopicTransactions | None = None

    @classmethod
    async def load(
        cls,
        name: str,
        ledger: ManagedLedger,
        *,
        dedup_enabled: bool,
        read_batch: int = 100,
        settings: DispatchSettings | None = None,
        clock: Clock | None = None,
        on_drained: Callable[[str, str], None] | None = None,
        on_fenced: Callable[[PersistentTopic], None] | None = None,
    ) -> PersistentTopic:
        """Wrap an opened managed ledger; rebuilds dedup state and the durable subscriptions.

        ``on_drained(topic, subscription)`` is called when a subscription has consumed every
        entry of the terminated topic (the scalable-topic controller's drain events);
        ``on_fenced(topic)`` once, when another writer took the managed ledger over (the broker
        unloads the topic).
        """
        dedup: MessageDeduplication | None = None
        if dedup_enabled:
            dedup = await MessageDeduplication.load(ledger)
        elif DEDUP_CURSOR_NAME in ledger.cursors:
            # Deduplication was turned off: its cursor would otherwise pin the ledger forever.
            await ledger.delete_cursor(DEDUP_CURSOR_NAME)
        for leftover in [c for c in ledger.cursors if c.startswith(READER_CURSOR_PREFIX)]:
            await ledger.delete_cursor(leftover)
        topic = cls(
            name,
            ledger,
            dedup,
            read_batch=read_batch,
            settings=settings,
            clock=clock,
            on_drained=on_drained,
            on_fenced=on_fenced,
        )
        for cursor_name, cursor in ledger.cursors.items():
            if cursor_name not in SYSTEM_CURSORS:
                topic.subscriptions[cursor_name] = topic._new_subscription(cursor_name, cursor)
        return topic

    def _new_subscription(
        self,
        name: str,
        cursor: ManagedCursor,
        *,
        durable: bool = True,
        on_empty: Callable[[Subscription], None] | None = None,
    ) -> Subscription:
        sub = Subscription(
            self.name,
            name,
            self.ledger,
            cursor,
            settings=self.settings,
            clock=self.clock,
            compacted=self.compaction,
            durable=durable,
            on_empty=on_empty,
            on_cursor_moved=self.check_drained if durable else None,
        )
        if self.transactions is not None:
            self.transactions.adopt(sub)
        return sub

    def check_drained(self, sub: Subscription) -> None:
        """Report ``sub`` once it has consumed all of the terminated topic and that is written
        (the subscription calls this after each acknowledgement's write, the broker's limits
        monitor after writing a cursor whose write had failed)."""
        if self._on_drained is None or not self.is_terminated:
            return
        if sub.cursor.backlog() > 0:
            self._drained.discard(sub.name)  # a seek moved it back
            return
        if not sub.cursor.state_written:
            return  # reported once the write lands
        if sub.name not in self._drained:
            self._drained.add(sub.name)
            self._on_drained(self.name, sub.name)

    @property
    def is_terminated(self) -> bool:
        return self.ledger.is_terminated

    # -- producers -----------------------------------------------------------------------------

    def last_sequence_id(self, producer_name: str) -> int:
        """What PRODUCER_SUCCESS tells a producer to continue from (-1 without deduplication)."""
        return self.dedup.last_sequence_id(producer_name) if self.dedup is not None else -1

    async def add_producer(self, producer: Producer, on_waiting: Callable[[], None]) -> None:
        """Attach ``producer`` honouring its access mode.

        ``WaitForExclusive`` calls ``on_waiting`` (the connection sends a not-ready success) and
        waits until the topic has no other producer. Raises :class:`TopicTerminated`, or what
        :meth:`~braid.broker.topic_producers.TopicProducers.add` raises.
        """
        if self.is_terminated:
            raise TopicTerminated(f"topic {self.name} is terminated; no new producers")
        await self._producer_set.add(
            producer, on_waiting, stopped=lambda: self.closed or self.is_terminated
        )

    def disconnect_producers(self) -> None:
        """Close every producer from the broker side (a backlog quota was exceeded); the
        clients reconnect, and their new PRODUCER meets the quota check."""
        self._producer_set.disconnect_all()

    def remove_producer(self, producer: Producer) -> None:
        self._producer_set.remove(producer)

    def publish(
        self, receipt: PendingReceipt, data: bytes, metadata: pb.MessageMetadata | None = None
    ) -> None:
        """Persist ``data`` (or recognise a duplicate) and answer ``receipt`` through its
        producer's :meth:`~Producer.complete`: with its position once durable, ``None`` for a
        duplicate that was not written again, or the error. ``metadata`` is ``data``'s
        ``MessageMetadata`` when the caller parsed it already (the SEND validation did): the key
        sampler reads it instead of parsing the entry again.

        The pipeline of a SEND: the managed ledger calls :meth:`_appended` with ``receipt`` as
        its context from the bookie's group-commit completion, in order - no task, future or
        closure per message.
        """
        producer = receipt.producer
        dedup = self.dedup
        if self.ledger.is_terminated:
            # As Pulsar: a resend of what was stored gets its receipt even once sealed.
            if dedup is not None and dedup.is_duplicate(
                producer.name, receipt.sequence_id, data, metadata
            ):
                producer.complete(receipt, None, None)
                return
            producer.complete(receipt, None, TopicTerminated(f"topic {self.name} is terminated"))
            return
        if dedup is not None:
            status = dedup.check(
                producer.name, receipt.sequence_id, receipt.last_sequence_id, data, metadata
            )
            if status is DupStatus.DUP:
                producer.complete(receipt, None, None)
                return
            if status is not DupStatus.NOT_DUP:
                producer.complete(
                    receipt,
                    None,
                    DuplicateInFlight(
                        f"message {receipt.sequence_id} of {producer.name!r} is still being "
                        "persisted"
                    ),
                )
                return
        size = len(data)
        # A batch SEND carries several messages: its receipt covers sequence_id..last_sequence_id.
        messages = max(receipt.last_sequence_id - receipt.sequence_id + 1, 1)
        producer.count_in(messages, size)
        counters = self.counters
        counters.messages_in += messages
        counters.bytes_in += size
        sampler = self.key_sampler
        if sampler is not None:
            sampler.offer(data, metadata)
        try:
            self.ledger.append_with_callback(data, self._appended, receipt)
        except BraidError as exc:  # the ledger refused at once (closed, fenced, terminated)
            self._appended(None, exc, receipt)

    def _appended(
        self, position: Position | None, error: BaseException | None, receipt: PendingReceipt
    ) -> None:
        producer = receipt.producer
        dedup = self.dedup
        if error is not None:
            if isinstance(error, FencedError):
                error = self._fenced_by(error)
            if dedup is not None:
                dedup.on_failed(producer.name)
        else:
            assert position is not None
            if dedup is not None:
                dedup.on_persisted(producer.name, receipt.last_sequence_id, position)
            if receipt.txn is not None and self.transactions is not None:
                self.transactions.buffer.on_appended(receipt.txn, position)
            for sub in self.subscriptions.values():
                if sub.dispatcher is not None:
                    sub.dispatcher.wake()
        producer.complete(receipt, position, error)

    def _fenced_by(self, error: BaseException) -> TopicFenced:
        """The managed ledger has another owner: this send was not stored and nothing sent here
        will be; tell the broker once, which gives the topic up (ADR 0040)."""
        fenced = TopicFenced(
            f"topic {self.name} was fenced: another writer took its managed ledger over; "
            "the message was not stored"
        )
        if not self.fenced:
            self.fenced = True
            log.warning("topic %s was fenced: %s; giving it up", self.name, error)
            if self._on_fenced is not None:
                self._on_fenced(self)
        return fenced

    # -- subscriptions -------------------------------------------------------------------------

    async def subscribe(
        self,
        subscription_name: str,
        consumer: Consumer,
        *,
        initial_earliest: bool,
        durable: bool = True,
        start: Position | None = None,
    ) -> Subscription:
        """Attach ``consumer`` to ``subscription_name``, creating its cursor if new.

        A non-durable subscription (a reader) starts at ``start`` (else the initial position)
        and is deleted when its last consumer leaves.
        """
        if subscription_name in SYSTEM_CURSORS or subscription_name.startswith(
            READER_CURSOR_PREFIX
        ):
            raise ConsumerBusy(f"subscription name {subscription_name!r} is reserved by the broker")
        async with self._sub_lock:
            sub = self.subscriptions.get(subscription_name)
            if sub is not None and sub.durable != durable:
                kind = "durable" if sub.durable else "non-durable"
                raise ConsumerBusy(f"subscription {subscription_name!r} on {self.name} is {kind}")
            if sub is None:
                initial = start if start is not None else (EARLIEST if initial_earliest else LATEST)
                cursor_name = (
                    subscription_name if durable else READER_CURSOR_PREFIX + subscription_name
                )
                try:
                    cursor = await self.ledger.open_cursor(cursor_name, initial)
                except InvalidPosition:
                    # A start position past the end (or from another topic): read new messages.
                    cursor = await self.ledger.open_cursor(cursor_name, LATEST)
                sub = self._new_subscription(
                    subscription_name,
                    cursor,
                    durable=durable,
                    on_empty=None if durable else self._drop_when_unused,
                )
                self.subscriptions[subscription_name] = sub
                if durable:
                    self.check_drained(sub)
            elif durable:
                # A consumer taking over from another starts where the acknowledgements are on
                # disk: had it started from ones still in memory, a crash would replay the
                # predecessor's messages to it after its own (a key's order undone).
                await sub.cursor.write_state()
            consumer.topic_counters = self.counters
            sub.add_consumer(consumer)
            return sub

    async def create_subscription(self, subscription_name: str, *, earliest: bool) -> None:
        """Create a durable subscription with no consumer yet (idempotent: an existing one keeps
        its position). The scalable-topic controller provisions segments this way."""
        if subscription_name in SYSTEM_CURSORS or subscription_name.startswith(
            READER_CURSOR_PREFIX
        ):
            raise ConsumerBusy(f"subscription name {subscription_name!r} is reserved by the broker")
        async with self._sub_lock:
            existing = self.subscriptions.get(subscription_name)
            if existing is not None:
                if not existing.durable:
                    raise ConsumerBusy(
                        f"subscription {subscription_name!r} on {self.name} is a reader's"
                    )
                return
            cursor = await self.ledger.open_cursor(
                subscription_name, EARLIEST if earliest else LATEST
            )
            sub = self._new_subscription(subscription_name, cursor)
            self.subscriptions[subscription_name] = sub
            self.check_drained(sub)

    async def delete_subscription(self, subscription_name: str) -> None:
        """Delete a subscription, disconnecting its consumers first.

        Raises:
            SubscriptionNotFound: no such subscription.
        """
        async with self._sub_lock:
            sub = self.subscriptions.get(subscription_name)
            if sub is None:
                raise SubscriptionNotFound(
                    f"subscription {subscription_name!r} does not exist on {self.name}"
                )
            await sub.close()
            await self.ledger.delete_cursor(sub.cursor.name)
            if self.transactions is not None:
                await self.transactions.forget(subscription_name)
            del self.subscriptions[subscription_name]
            self._drained.discard(subscription_name)

    def _drop_when_unused(self, sub: Subscription) -> None:
        task = asyncio.ensure_future(self._drop_subscription(sub))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _drop_subscription(self, sub: Subscription) -> None:
        """Delete a reader's subscription once no consumer is attached any more."""
        async with self._sub_lock:
            if sub.consumers or self.subscriptions.get(sub.name) is not sub or self.closed:
                return
            del self.subscriptions[sub.name]
            await sub.close()
            try:
                await self.ledger.delete_cursor(sub.cursor.name)
            except (CursorNotFound, ManagedLedgerClosed):
                pass

    async def unsubscribe(self, subscription_name: str, consumer: Consumer | None) -> None:
        """Delete the subscription; refused while consumers other than ``consumer`` are attached."""
        async with self._sub_lock:
            sub = self.subscriptions.get(subscription_name)
            if sub is None:
                raise SubscriptionNotFound(
                    f"subscription {subscription_name!r} does not exist on {self.name}"
                )
            check_unsubscribe(subscription_name, sub.consumers, consumer)
            if consumer is not None:
                sub.remove_consumer(consumer)
            await sub.close()
            await self.ledger.delete_cursor(sub.cursor.name)
            del self.subscriptions[subscription_name]

    # -- positions -----------------------------------------------------------------------------

    def wake_dispatchers(self) -> None:
        """Something that bounds reading moved (compaction, a transaction ended): dispatch."""
        for sub in self.subscriptions.values():
            if sub.dispatcher is not None:
                sub.dispatcher.unblock()

    async def last_message_position(self, *, compacted: bool = False) -> tuple[Position, int]:
        """The last entry's position and the batch index of its last message (-1: not a batch).

        For a read-compacted consumer, when nothing was published after the compaction horizon,
        the last message is the compacted ledger's (``(-1, -1)`` when it is empty), as Pulsar
        answers: what the topic ends with may have been compacted away.
        """
        last = self.ledger.last_confirmed_position
        if self.transactions is not None:  # not past an open transaction, nor on a marker
            last = await self.transactions.last_readable(last)
        horizon = self.compaction.horizon
        if compacted and horizon is not None and (last.entry_id < 0 or last <= horizon):
            found = await self.compaction.last_compacted()
            return found if found is not None else (Position(-1, -1), -1)
        if last.entry_id < 0:
            return last, -1
        entries = await self.ledger.read(last, 1)
        if not entries:
            return last, -1
        count = messages_in_entry(entries[0].data)
        return last, (count - 1 if count > 1 else -1)

    async def find_position_by_publish_time(self, timestamp_ms: int) -> Position:
        """First entry published at or after ``timestamp_ms`` (binary search over the ledgers);
        ``LATEST`` if every entry is older."""
        last = self.ledger.last_confirmed_position
        spans: list[tuple[int, int]] = []  # (ledger id, entries)
        for info in self.ledger.ledgers:
            count = info.entries
            if info.ledger_id == last.ledger_id:
                count = last.entry_id + 1
            if count > 0:
                spans.append((info.ledger_id, count))
        total = sum(c for _, c in spans)

        def position_at(index: int) -> Position:
            for ledger_id, count in spans:
                if index < count:
                    return Position(ledger_id, index)
                index -= count
            raise IndexError(index)

        lo, hi = 0, total
        while lo < hi:
            mid = (lo + hi) // 2
            entries = await self.ledger.read(position_at(mid), 1)
            published = publish_time_of(entries[0].data) if entries else 0
            if published >= timestamp_ms:
                hi = mid
            else:
                lo = mid + 1
        return position_at(lo) if lo < total else LATEST

    # -- lifecycle -----------------------------------------------------------------------------

    async def terminate(self) -> Position:
        """Seal the topic; returns its last position. Consumers that drained it are told (if they
        can take it)."""
        position = await self.ledger.terminate()
        for sub in list(self.subscriptions.values()):
            if sub.dispatcher is not None:
                sub.dispatcher.wake()
            if sub.durable:
                self.check_drained(sub)
        return position

    async def close(self, assigned: AssignedBroker | None = None) -> None:
        """Detach everyone (clients reconnect elsewhere/later - to ``assigned`` when the topic
        moved there), snapshot dedup, close the ledger."""
        if self.closed:
            return
        self.closed = True
        self._producer_set.wake()
        self._producer_set.disconnect_all(assigned)
        for sub in list(self.subscriptions.values()):
            await sub.close(assigned)
        await self.compaction.close()
        if self.transactions is not None:
            await self.transactions.close()
        if self.dedup is not None:
            try:
                await self.dedup.close()
            except Exception:
                log.exception("final dedup snapshot of %s failed", self.name)
        await self.ledger.close()

    def connected_clients(self) -> tuple[int, int]:
        """``(producers, consumers)`` connected now: a delete without ``force`` is refused while
        either is not zero (Pulsar's ``TopicBusyException``)."""
        return len(self.producers), sum(len(s.consumers) for s in self.subscriptions.values())

    def stats(self) -> dict[str, object]:
        return {
            "msgInCounter": self.counters.messages_in,
            "bytesInCounter": self.counters.bytes_in,
            "msgOutCounter": self.counters.messages_out,
            "bytesOutCounter": self.counters.bytes_out,
            "storageSize": self.ledger.total_size,
            # The slowest durable subscription's unacknowledged bytes (Pulsar's backlogSize).
            "backlogSize": max(
                (
                    estimated_backlog_bytes(self.ledger.ledgers, s.cursor.mark_delete_position)
                    for s in self.subscriptions.values()
                    if s.durable
                ),
                default=0,
            ),
            "numberOfEntries": self.ledger.number_of_entries,
            "lastConfirmedEntry": str(self.ledger.last_confirmed_position),
            "terminated": self.is_terminated,
            "deduplicationEnabled": self.dedup is not None,
            "compaction": self.compaction.stats(),
            "publishers": [p.stats() for p in self.producers.values()],
            "subscriptions": {name: s.stats() for name, s in self.subscriptions.items()},
        }
