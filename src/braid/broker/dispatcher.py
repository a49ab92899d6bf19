"""Delivery of a subscription's entries to its consumers (Pulsar's dispatchers).

One dispatcher per subscription runs one task that reads from the subscription's cursor in batches
and hands entries to consumers that have permits. The subscription type picks the class:

* :class:`SingleActiveDispatcher` (Exclusive, Failover): every entry goes to the one active
  consumer. Failover's active consumer is the first by (priority level, consumer name), as Pulsar
  orders them; when it changes, consumers are told (ACTIVE_CONSUMER_CHANGE) and the cursor is
  rewound so the new active consumer gets everything still unacknowledged, in order. A consumer
  that subscribed with ``read_compacted`` reads the compacted ledger up to the compaction horizon
  first (:mod:`braid.broker.compaction`), then the topic after it. A consumer attached without
  permits (a segment a Stream consumer opened ahead) has its first entries read ahead, once, and
  its first FLOW is answered from memory; nothing is sent before that FLOW.
* :class:`SharedDispatcher` (Shared): entries are spread round-robin over consumers with permits;
  entries to deliver again (negative acks, a departed consumer's unacknowledged entries, entries
  held back) sit in a :class:`ReplayQueue` served before new entries. Entries whose
  ``deliver_at_time`` has not come wait in a :class:`~braid.broker.delayed.DelayedDeliveryTracker`.
* ``KeySharedDispatcher`` (:mod:`braid.broker.key_shared`): a shared dispatcher routing by key.

Every delivery carries the entry's remaining batch-index ack set (PIP-54) when part of a batch was
acknowledged, so the client skips those messages, and is charged only the messages it will see.

All cursor moves (read, rewind, reset) happen under :attr:`Dispatcher.lock`, so a seek or rewind
never races a read in flight. The task sleeps on an event woken by FLOW, new entries, consumer
changes, acknowledgements, redelivery requests and delayed messages coming due: no polling.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from braid.broker.consumer import Consumer, Delivery, SubType
from braid.broker.delayed import DelayedDeliveryTracker
from braid.broker.dispatch_settings import DispatchSettings
from braid.broker.entries import CorruptEntry, parse_metadata
from braid.clock import Clock
from braid.core import ack_set
from braid.ledger.api import (
    EARLIEST,
    Entry,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerClosed,
    Position,
)
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)


class CompactedReader(Protocol):
    """What a read-compacted consumer's dispatcher needs from the topic's compaction."""

    @property
    def horizon(self) -> Position | None:
        """The last position the compacted ledger covers (``None``: never compacted)."""
        ...

    async def read_from(
        self, start: Position, max_entries: int
    ) -> list[tuple[Entry, ack_set.AckSet]]:
        """Compacted entries with positions at or after ``start``, each with the ack set of the
        batch messages it keeps (empty: all of them)."""
        ...


class EntryVerdict(enum.IntEnum):
    """What an :class:`EntryFilter` says of an entry read from the cursor."""

    DELIVER = 0
    #: Never delivered; acknowledged on the subscription (a transaction marker, an aborted
    #: transaction's entry).
    SKIP = 1
    #: Not delivered now and not acknowledged (held by a pending acknowledgement).
    HOLD = 2


class EntryFilter(Protocol):
    """What a subscription's transactions add to dispatch (:mod:`braid.broker.transactions`)."""

    def read_limit(self) -> Position | None:
        """The last position the cursor may read now (``None``: no limit)."""
        ...

    def verdict(self, entry: Entry) -> EntryVerdict:
        """Whether ``entry`` is delivered, skipped for good or held."""
        ...

    def batch_mask(self, position: Position, count: int) -> ack_set.AckSet | None:
        """The messages of the batch entry at ``position`` (of ``count``) that no pending
        acknowledgement holds, as ack-set words (``None``: none is held)."""
        ...


def _metadata(entry: Entry) -> pb.MessageMetadata | None:
    try:
        return parse_metadata(entry.data)
    except CorruptEntry:
        return None


def _messages(meta: pb.MessageMetadata | None) -> int:
    if meta is not None and meta.HasField("num_messages_in_batch"):
        return max(meta.num_messages_in_batch, 1)
    return 1


class ReplayQueue:
    """Positions to deliver (again) before new entries, each with its sticky-key hash when known
    (a Key_Shared dispatcher must not let a newer entry of a hash overtake a held one)."""

    def __init__(self) -> None:
        self._hash: dict[Position, int | None] = {}
        self._per_hash: Counter[int] = Counter()

    def __len__(self) -> int:
        return len(self._hash)

    def __bool__(self) -> bool:
        return bool(self._hash)

    def __contains__(self, position: object) -> bool:
        return position in self._hash

    def add(self, position: Position, key_hash: int | None = None) -> None:
        if position in self._hash:
            return
        self._hash[position] = key_hash
        if key_hash is not None:
            self._per_hash[key_hash] += 1

    def holds_hash(self, key_hash: int) -> bool:
        """Whether an entry of ``key_hash`` is waiting here."""
        return self._per_hash[key_hash] > 0

    def take(self, count: int) -> list[tuple[Position, int | None]]:
        """Remove and return the ``count`` lowest positions, in order."""
        taken = sorted(self._hash)[:count]
        return [(p, self._remove(p)) for p in taken]

    def discard(self, position: Position) -> None:
        if position in self._hash:
            self._remove(position)

    def discard_up_to(self, position: Position) -> None:
        for p in [p for p in self._hash if p <= position]:
            self._remove(p)

    def clear(self) -> None:
        self._hash.clear()
        self._per_hash.clear()

    def _remove(self, position: Position) -> int | None:
        key_hash = self._hash.pop(position)
        if key_hash is not None:
            self._per_hash[key_hash] -= 1
            if self._per_hash[key_hash] <= 0:
                del self._per_hash[key_hash]
        return key_hash


class Dispatcher:
    """Reads a subscription's cursor and delivers entries to its consumers (the common part)."""

    def __init__(
        self,
        ledger: ManagedLedger,
        cursor: ManagedCursor,
        sub_type: SubType.ValueType,
        *,
        settings: DispatchSettings,
        clock: Clock,
        description: str = "",
    ) -> None:
        self._ledger = ledger
        self._cursor = cursor
        self.sub_type = sub_type
        self._settings = settings
        self._clock = clock
        self._read_batch = max(1, settings.read_batch)
        self._description = description
        self.consumers: list[Consumer] = []
        self._redeliveries: dict[Position, int] = {}
        self._wake = asyncio.Event()
        self.lock = asyncio.Lock()
        self._closed = False
        self._messages_per_entry = 1.0
        self._task: asyncio.Task[None] | None = None
        #: The subscription's transactions (max read position, markers, aborted entries,
        #: pending acks), when the broker runs a transaction coordinator.
        self.entry_filter: EntryFilter | None = None
        #: Called after entries the filter skipped (markers, aborted) were acknowledged: the
        #: subscription's cursor moved without a consumer's ack (it may have drained a sealed
        #: topic that ends with them).
        self.on_skipped: Callable[[], None] | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        """Stop dispatching (consumers are detached by the subscription)."""
        self._closed = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def wake(self) -> None:
        """New entries may be readable."""
        self._wake.set()

    def unblock(self) -> None:
        """Something changed that may let held-back entries go (permits, acks, consumers)."""
        self._wake.set()

    # -- consumers -----------------------------------------------------------------------------

    @property
    def active_consumer(self) -> Consumer | None:
        return None

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.unblock()

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach ``consumer``; its unacknowledged entries are redelivered to the others."""
        consumer.detach()
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self._requeue(consumer.take_pending())
        self.unblock()

    # -- flow, acks, redelivery ----------------------------------------------------------------

    def on_flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits)
        self.unblock()

    def on_acked(self, positions: Sequence[Position]) -> None:
        """Forget delivery books for individually acknowledged positions."""
        for pos in positions:
            self._redeliveries.pop(pos, None)
        for c in self.consumers:
            c.acknowledged(positions)

    def on_acked_up_to(self, position: Position) -> None:
        """Forget delivery books for everything up to ``position`` (cumulative ack)."""
        for c in self.consumers:
            c.acknowledged_up_to(position)
        for pos in [p for p in self._redeliveries if p <= position]:
            del self._redeliveries[pos]

    def redeliver(self, consumer: Consumer, positions: Sequence[Position] | None) -> None:
        """Redeliver ``consumer``'s unacknowledged entries (``None`` = all of them)."""
        self._requeue(consumer.take_pending(positions))
        self.unblock()

    def _requeue(self, positions: Sequence[Position]) -> None:
        for pos in positions:
            self._redeliveries[pos] = self._redeliveries.get(pos, 0) + 1

    def requeue(
        self, positions: Sequence[Position], key_hashes: Mapping[Position, int] | None = None
    ) -> None:
        """Deliver ``positions`` again (an aborted transaction released its acks of them), taking
        them off any consumer's books first (a batch entry part of which was held);
        ``key_hashes`` are their sticky-key hashes (Key_Shared keeps each key's order with them)."""
        if not positions:
            return
        taken: list[Position] = []
        for consumer in self.consumers:
            taken.extend(consumer.take_pending(positions))
        self._requeue(taken)
        on_books = set(taken)
        rest = [p for p in positions if p not in on_books]
        self._requeue_released(rest, key_hashes or {})
        self.unblock()

    def _requeue_released(
        self, positions: Sequence[Position], key_hashes: Mapping[Position, int]
    ) -> None:
        """Requeue positions no consumer has on its books (their hashes given, when known)."""
        self._requeue(positions)

    async def _read_new(self, max_entries: int) -> list[Entry]:
        """Read the next entries from the cursor, as the subscription's :class:`EntryFilter`
        allows: never past the max read position; markers and aborted entries acknowledged and
        left out, entries held by pending acks left out. Empty only when nothing is readable."""
        entry_filter = self.entry_filter
        if entry_filter is None:
            return await self._cursor.read_entries(max_entries)
        while True:
            limit = entry_filter.read_limit()
            if limit is not None and self._cursor.read_position > limit:
                return []
            entries = await self._cursor.read_entries(max_entries)
            if not entries:
                return []
            if limit is not None and entries[-1].position > limit:
                kept = [e for e in entries if e.position <= limit]
                await self._cursor.seek(entries[len(kept)].position)
                entries = kept
            admitted: list[Entry] = []
            skipped: list[Position] = []
            for entry in entries:
                verdict = entry_filter.verdict(entry)
                if verdict is EntryVerdict.DELIVER:
                    admitted.append(entry)
                elif verdict is EntryVerdict.SKIP:
                    skipped.append(entry.position)
            if skipped:
                await self._cursor.delete(skipped)
                if self.on_skipped is not None:
                    self.on_skipped()
            if admitted or not entries:
                return admitted

    def reset_books(self) -> None:
        """Forget every delivery book (after the cursor was reset by a seek); hold :attr:`lock`."""
        self._redeliveries.clear()
        for c in self.consumers:
            c.forget_pending()

    def unacked_count(self) -> int:
        return sum(c.unacked_messages for c in self.consumers)

    def stats(self) -> dict[str, object]:
        """Dispatcher details for the subscription's stats."""
        return {}

    # -- the dispatch loop ---------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closed:
            self._wake.clear()
            try:
                async with self.lock:
                    progressed = await self._dispatch_once()
            except asyncio.CancelledError:
                raise
            except ManagedLedgerClosed:
                return
            except Exception:
                log.exception("dispatch failed on %s", self._description)
                progressed = False
            if progressed:
                # Let the connection's reader and other dispatchers run between batches.
                await asyncio.sleep(0)
            elif not self._closed:
                await self._wake.wait()

    async def _dispatch_once(self) -> bool:
        """One round; ``True`` when it made progress (another round follows at once)."""
        raise NotImplementedError

    def _entries_for(self, permits: int) -> int:
        """How many entries to read for ``permits`` messages, given the recent batch sizes."""
        wanted = int(permits / self._messages_per_entry) or 1
        return max(1, min(wanted, self._read_batch))

    def _delivery(
        self, entry: Entry, meta: pb.MessageMetadata | None, kept: ack_set.AckSet = ()
    ) -> Delivery:
        """What ``entry`` costs and carries: the batch messages still unacknowledged (and, for a
        compacted entry, kept by compaction) go as its ack set and are the permits it uses."""
        count = _messages(meta)
        # A moving average of messages per entry sizes the next read to the permits.
        self._messages_per_entry += (count - self._messages_per_entry) * 0.1
        words = kept
        if self._settings.batch_index_ack and count > 1:
            remaining = self._cursor.batch_deleted_indexes(entry.position)
            if remaining is not None:
                words = remaining if not words else ack_set.intersect(words, remaining)
            # Messages a transaction's pending acknowledgement holds are not delivered.
            mask = (
                None
                if self.entry_filter is None
                else self.entry_filter.batch_mask(entry.position, count)
            )
            if mask is not None:
                words = ack_set.intersect(words or ack_set.all_set(count), mask)
        messages = ack_set.cardinality(words, count) if words else count
        return Delivery(entry, self._redeliveries.get(entry.position, 0), max(messages, 1), words)

    def _check_end_of_topic(self) -> bool:
        """Tell the consumers once the cursor has read all of a terminated topic; whether it
        has."""
        if not self._ledger.is_terminated or self._cursor.has_more_entries():
            return False
        for c in self.consumers:
            c.notify_end_of_topic()
        return True


class SingleActiveDispatcher(Dispatcher):
    """Exclusive and Failover: one active consumer gets everything, in order."""

    def __init__(
        self,
        ledger: ManagedLedger,
        cursor: ManagedCursor,
        sub_type: SubType.ValueType,
        *,
        settings: DispatchSettings,
        clock: Clock,
        compacted: CompactedReader | None = None,
        description: str = "",
    ) -> None:
        super().__init__(
            ledger, cursor, sub_type, settings=settings, clock=clock, description=description
        )
        self._active: Consumer | None = None
        self._rewind_pending = False
        self._compacted = compacted
        # Where the next compacted read starts (None: derive it from the cursor), and whether the
        # next read is the first since the consumer started or the cursor was rewound.
        self._compacted_from: Position | None = None
        self._first_read = True
        # Read ahead for a consumer attached without permits: the entries at its read position,
        # read once (the cursor is past them) and delivered by its first FLOW.
        self._ahead: list[Entry] = []
        self._ahead_for: Consumer | None = None

    @property
    def active_consumer(self) -> Consumer | None:
        return self._active

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        if not self._pick_active() and self.sub_type == SubType.Failover:
            # The active consumer stays: only the newcomer needs to hear that it is standing by.
            asyncio.get_running_loop().call_soon(self._notify_standby, consumer)
        self.unblock()

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.detach()
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self._requeue(consumer.take_pending())
        self._pick_active()
        self.unblock()

    def _pick_active(self) -> bool:
        """Choose the active consumer; ``True`` if it changed (everyone is then told)."""
        new = min(self.consumers, key=lambda c: (c.priority_level, c.consumer_name), default=None)
        old = self._active
        if new is old:
            return False
        self._active = new
        if old is not None and not old.closed:
            # Whatever the old active consumer has not acknowledged goes to the new one.
            self._requeue(old.take_pending())
        self._first_read = True
        if self.sub_type == SubType.Failover:
            # Told on the next loop turn, so a new consumer hears of it after its SUBSCRIBE's
            # SUCCESS rather than before.
            asyncio.get_running_loop().call_soon(self._notify_active, new)
        return True

    def _notify_standby(self, consumer: Consumer) -> None:
        if not consumer.closed and consumer is not self._active:
            consumer.transport.send_active_consumer_change(consumer.consumer_id, False)

    def _notify_active(self, active: Consumer | None) -> None:
        if active is not self._active:
            return  # changed again meanwhile; that change notifies
        for c in self.consumers:
            if not c.closed:
                c.transport.send_active_consumer_change(c.consumer_id, c is active)

    def redeliver(self, consumer: Consumer, positions: Sequence[Position] | None) -> None:
        """A single-active dispatcher always redelivers everything unacknowledged (as Pulsar),
        which keeps the order for an Exclusive/Failover consumer."""
        self._requeue(consumer.take_pending())
        self.unblock()

    def _requeue(self, positions: Sequence[Position]) -> None:
        super()._requeue(positions)
        if positions:
            self._rewind_pending = True

    def reset_books(self) -> None:
        super().reset_books()
        self._rewind_pending = False
        self._compacted_from = None
        self._first_read = True
        self._ahead = []  # the cursor was reset: what was read ahead is not next any more

    async def _dispatch_once(self) -> bool:
        if self._rewind_pending:
            self._rewind_pending = False
            self._ahead = []
            self._cursor.rewind()
            self._compacted_from = None
            self._first_read = True
        consumer = self._active
        if consumer is None:
            return False
        if consumer.permits <= 0:
            await self._read_ahead(consumer)
            return False
        if self._ahead and consumer.read_compacted:
            await self._unread_ahead()  # it reads from its compaction horizon instead
        start = self._compacted_start(consumer)
        if start is not None:
            return await self._dispatch_compacted(consumer, start)
        self._first_read = False
        ahead = await self._take_ahead()
        entries = ahead or await self._read_new(self._entries_for(consumer.permits))
        if not entries:
            self._check_end_of_topic()
            return False
        if consumer is not self._active or consumer.closed or self._rewind_pending:
            # The consumer changed (or asked for redelivery) while we read: these entries are
            # still unacknowledged, so the rewind brings them back in order.
            self._rewind_pending = True
            return True
        deliveries: list[Delivery] = []
        budget = consumer.permits
        for entry in entries:
            if budget <= 0:
                # The permits are used up: the rest waits for the client's next FLOW.
                if ahead:
                    self._ahead = entries[len(deliveries) :]
                else:
                    await self._cursor.seek(entry.position)
                break
            delivery = self._delivery(entry, _metadata(entry))
            budget -= delivery.messages
            deliveries.append(delivery)
        consumer.deliver(deliveries)
        # The last entries of a terminated topic: the notice follows them in this round, not
        # after one more (empty) read - a draining Stream consumer's ack waits for it (ADR 0068).
        return bool(self._ahead) or not self._check_end_of_topic()

    # -- reading ahead of the first FLOW (a segment opened ahead, ADR 0043) --------------------

    async def _read_ahead(self, consumer: Consumer) -> None:
        """Read the first entries for a consumer attached without permits (once per consumer),
        so that its first FLOW is answered from memory: nothing is sent before that FLOW."""
        if self._ahead or self._ahead_for is consumer or consumer.read_compacted:
            return
        self._ahead_for = consumer
        self._ahead = await self._read_new(self._read_batch)
        if consumer is not self._active or self._rewind_pending:
            await self._unread_ahead()

    async def _take_ahead(self) -> list[Entry]:
        """The entries read ahead, still to deliver; ``[]`` when none were read, or when one of
        them changed meanwhile (acknowledged by an expiry, or a transaction's verdict) - the
        cursor is then put back on them, to read them again."""
        entry_filter = self.entry_filter
        if any(
            self._cursor.is_deleted(entry.position)
            or (
                entry_filter is not None and entry_filter.verdict(entry) is not EntryVerdict.DELIVER
            )
            for entry in self._ahead
        ):
            await self._unread_ahead()
        entries, self._ahead = self._ahead, []
        return entries

    async def _unread_ahead(self) -> None:
        """Put the cursor back on the first entry read ahead, to read it again."""
        entries, self._ahead = self._ahead, []
        if entries:
            await self._cursor.seek(entries[0].position)

    # -- reading the compacted ledger (read_compacted consumers) -------------------------------

    def _compacted_start(self, consumer: Consumer) -> Position | None:
        """Where to read the compacted ledger from, or ``None`` to read the topic itself."""
        if not consumer.read_compacted or self._compacted is None:
            return None
        horizon = self._compacted.horizon
        if horizon is None:
            return None
        start = self._compacted_from
        if start is None:
            mark = self._cursor.mark_delete_position
            # Pulsar's rule: a consumer that has acknowledged nothing reads the compacted ledger
            # from its beginning, even where the topic's own ledgers were trimmed already.
            start = EARLIEST if self._first_read and mark.entry_id == -1 else None
            if start is None:
                start = self._cursor.read_position
        return start if start <= horizon else None

    async def _dispatch_compacted(self, consumer: Consumer, start: Position) -> bool:
        assert self._compacted is not None
        self._first_read = False
        horizon = self._compacted.horizon
        batch = await self._compacted.read_from(start, self._entries_for(consumer.permits))
        if consumer is not self._active or consumer.closed or self._rewind_pending:
            self._rewind_pending = True
            return True
        if not batch or horizon is None:
            # Everything up to the horizon was delivered: the topic goes on after it.
            self._compacted_from = None
            if horizon is not None:
                await self._cursor.seek(Position(horizon.ledger_id, horizon.entry_id + 1))
            return True
        deliveries: list[Delivery] = []
        budget = consumer.permits
        next_start = start
        for entry, kept in batch:
            if budget <= 0:
                break
            delivery = self._delivery(entry, _metadata(entry), kept)
            budget -= delivery.messages
            deliveries.append(delivery)
            next_start = Position(entry.position.ledger_id, entry.position.entry_id + 1)
        self._compacted_from = next_start
        await self._cursor.seek(next_start)
        consumer.deliver(deliveries)
        return True


class SharedDispatcher(Dispatcher):
    """Shared: round-robin over consumers with permits, a replay queue, delayed delivery."""

    def __init__(
        self,
        ledger: ManagedLedger,
        cursor: ManagedCursor,
        sub_type: SubType.ValueType,
        *,
        settings: DispatchSettings,
        clock: Clock,
        description: str = "",
    ) -> None:
        super().__init__(
            ledger, cursor, sub_type, settings=settings, clock=clock, description=description
        )
        self.replay = ReplayQueue()
        # Replay positions being read right now: an ack arriving meanwhile drops them here.
        self._replay_reading: set[Position] = set()
        self._replay_stuck = False
        self._rr = 0
        self._delayed = (
            DelayedDeliveryTracker(clock, tick_s=settings.delayed_tick_s, on_due=self.unblock)
            if settings.delayed_delivery
            else None
        )

    async def close(self) -> None:
        if self._delayed is not None:
            self._delayed.close()
        await super().close()

    def unblock(self) -> None:
        self._replay_stuck = False
        super().unblock()

    def on_acked(self, positions: Sequence[Position]) -> None:
        for pos in positions:
            self.replay.discard(pos)
            self._replay_reading.discard(pos)
        if self._delayed is not None:
            self._delayed.forget(positions)
        super().on_acked(positions)

    def on_acked_up_to(self, position: Position) -> None:
        super().on_acked_up_to(position)
        self.replay.discard_up_to(position)

    def _requeue(self, positions: Sequence[Position]) -> None:
        super()._requeue(positions)
        for pos in positions:
            self.replay.add(pos, self._hash_of_pending(pos))

    def _hash_of_pending(self, position: Position) -> int | None:
        """The sticky hash of a delivered position (Key_Shared knows it)."""
        return None

    def _requeue_released(
        self, positions: Sequence[Position], key_hashes: Mapping[Position, int]
    ) -> None:
        super()._requeue(positions)
        for pos in positions:
            self.replay.add(pos, key_hashes.get(pos))

    def reset_books(self) -> None:
        super().reset_books()
        self.replay.clear()
        if self._delayed is not None:
            self._delayed.clear()

    def stats(self) -> dict[str, object]:
        return {
            "msgDelayed": len(self._delayed) if self._delayed is not None else 0,
            "replayQueueSize": len(self.replay),
        }

    async def _dispatch_once(self) -> bool:
        if self._delayed is not None:
            for pos in self._delayed.take_due():
                self.replay.add(pos)
        if not any(c.permits > 0 and not c.closed for c in self.consumers):
            return False
        if self.replay and not self._replay_stuck:
            entries = await self._read_replay()
            if entries and self._spread(entries, from_replay=True) == 0:
                # Everything waiting is held back (no permits for its consumer, a draining
                # key): try new entries, and the queue again once something changes.
                self._replay_stuck = True
            return True
        if len(self.replay) >= self._settings.key_shared_look_ahead:
            return False
        budget = sum(c.permits for c in self.consumers if c.permits > 0)
        entries = await self._read_new(self._entries_for(budget))
        if not entries:
            self._check_end_of_topic()
            return False
        self._spread(entries, from_replay=False)
        return True

    async def _read_replay(self) -> list[Entry]:
        taken = self.replay.take(self._read_batch)
        wanted = [p for p, _ in taken if not self._cursor.is_deleted(p)]
        self._replay_reading = set(wanted)
        entries: list[Entry] = []
        # Read runs of consecutive entries of one ledger with one call.
        i = 0
        while i < len(wanted):
            j = i + 1
            while (
                j < len(wanted)
                and wanted[j].ledger_id == wanted[i].ledger_id
                and wanted[j].entry_id == wanted[j - 1].entry_id + 1
            ):
                j += 1
            run = await self._ledger.read(wanted[i], j - i)
            keep = set(wanted[i:j])
            entries.extend(e for e in run if e.position in keep)
            i = j
        # Acknowledged while we read (the consumer that had it acked it, then left): not again.
        entries = [e for e in entries if e.position in self._replay_reading]
        self._replay_reading = set()
        entry_filter = self.entry_filter
        if entry_filter is not None:  # held by a pending ack now: back when its txn aborts
            entries = [e for e in entries if entry_filter.verdict(e) is not EntryVerdict.HOLD]
        return entries

    def _held_for_later(self, entry: Entry, meta: pb.MessageMetadata | None) -> bool:
        """True when ``entry``'s delivery time has not come (it now waits in the tracker)."""
        if self._delayed is None or meta is None or not meta.HasField("deliver_at_time"):
            return False
        return self._delayed.hold(entry.position, meta.deliver_at_time)

    def _spread(self, entries: Sequence[Entry], *, from_replay: bool) -> int:
        """Hand ``entries`` out; those nobody can take now go to the replay queue. Returns how
        many were delivered."""
        available = [c for c in self.consumers if c.permits > 0 and not c.closed]
        budgets = {id(c): c.permits for c in available}
        batches: dict[int, list[Delivery]] = {id(c): [] for c in available}
        n = len(available)
        delivered = 0
        for entry in entries:
            meta = _metadata(entry)
            if self._held_for_later(entry, meta):
                continue
            target: Consumer | None = None
            for _ in range(n):
                candidate = available[self._rr % n]
                self._rr += 1
                if budgets[id(candidate)] > 0:
                    target = candidate
                    break
            if target is None:
                self.replay.add(entry.position)
                continue
            delivery = self._delivery(entry, meta)
            budgets[id(target)] -= delivery.messages
            batches[id(target)].append(delivery)
            delivered += 1
        for c in available:
            c.deliver(batches[id(c)])
        return delivered
