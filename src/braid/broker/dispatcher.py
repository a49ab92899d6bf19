"""Delivery of a subscription's entries to its consumers (Pulsar's dispatchers).

One dispatcher per subscription runs one task that reads from the subscription's cursor in batches
and hands entries to consumers that have permits:

* **single active** (Exclusive, Failover): every entry goes to the one active consumer. Failover's
  active consumer is the first by (priority level, consumer name), as Pulsar orders them; when it
  changes, consumers are told (ACTIVE_CONSUMER_CHANGE) and the cursor is rewound so the new active
  consumer gets everything still unacknowledged, in order.
* **shared** (Shared): entries are spread round-robin over consumers with permits; entries to
  redeliver (negative acks, a departed consumer's unacknowledged entries) sit in a replay set
  that is served before new entries.

All cursor moves (read, rewind, reset) happen under :attr:`Dispatcher.lock`, so a seek or rewind
never races a read in flight. The task sleeps on an event woken by FLOW, new entries, consumer
changes and redelivery requests: no polling.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from braid.broker.consumer import Consumer, Delivery, SubType
from braid.broker.entries import messages_in_entry
from braid.ledger.api import Entry, ManagedCursor, ManagedLedger, ManagedLedgerClosed, Position

log = logging.getLogger(__name__)


class Dispatcher:
    """Reads a subscription's cursor and delivers entries to its consumers."""

    def __init__(
        self,
        ledger: ManagedLedger,
        cursor: ManagedCursor,
        sub_type: SubType.ValueType,
        *,
        read_batch: int = 100,
        description: str = "",
    ) -> None:
        self._ledger = ledger
        self._cursor = cursor
        self.sub_type = sub_type
        self._single_active = sub_type in (SubType.Exclusive, SubType.Failover)
        self._read_batch = max(1, read_batch)
        self._description = description
        self.consumers: list[Consumer] = []
        self._active: Consumer | None = None
        self._replay: set[Position] = set()
        self._redeliveries: dict[Position, int] = {}
        self._rewind_pending = False
        self._wake = asyncio.Event()
        self.lock = asyncio.Lock()
        self._closed = False
        self._rr = 0
        self._messages_per_entry = 1.0
        self._task: asyncio.Task[None] | None = None

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
        self._wake.set()

    # -- consumers -----------------------------------------------------------------------------

    @property
    def active_consumer(self) -> Consumer | None:
        return self._active if self._single_active else None

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        if self._single_active and not self._pick_active() and self.sub_type == SubType.Failover:
            # The active consumer stays: only the newcomer needs to hear that it is standing by.
            asyncio.get_running_loop().call_soon(self._notify_standby, consumer)
        self.wake()

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach ``consumer``; its unacknowledged entries are redelivered to the others."""
        consumer.closed = True
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self._requeue(consumer.take_pending())
        if self._single_active:
            self._pick_active()
        self.wake()

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

    # -- flow, acks, redelivery ----------------------------------------------------------------

    def on_flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits)
        self.wake()

    def on_acked(self, positions: Iterable[Position]) -> None:
        """Forget delivery books for individually acknowledged positions."""
        for pos in positions:
            self._replay.discard(pos)
            self._redeliveries.pop(pos, None)
            for c in self.consumers:
                c.pending.pop(pos, None)

    def on_acked_up_to(self, position: Position) -> None:
        """Forget delivery books for everything up to ``position`` (cumulative ack)."""
        for c in self.consumers:
            c.acknowledged_up_to(position)
        for pos in [p for p in self._redeliveries if p <= position]:
            del self._redeliveries[pos]
        self._replay = {p for p in self._replay if p > position}

    def redeliver(self, consumer: Consumer, positions: Sequence[Position] | None) -> None:
        """Redeliver ``consumer``'s unacknowledged entries (``None`` = all of them).

        A single-active dispatcher always redelivers everything unacknowledged (as Pulsar), which
        keeps the order for an Exclusive/Failover consumer.
        """
        if self._single_active or positions is None:
            self._requeue(consumer.take_pending())
        else:
            self._requeue(consumer.take_pending(positions))
        self.wake()

    def _requeue(self, positions: Sequence[Position]) -> None:
        if not positions:
            return
        for pos in positions:
            self._redeliveries[pos] = self._redeliveries.get(pos, 0) + 1
        if self._single_active:
            self._rewind_pending = True
        else:
            self._replay.update(positions)

    def reset_books(self) -> None:
        """Forget every delivery book (after the cursor was reset by a seek); hold :attr:`lock`."""
        self._replay.clear()
        self._redeliveries.clear()
        self._rewind_pending = False
        for c in self.consumers:
            c.pending.clear()

    def unacked_count(self) -> int:
        return sum(sum(c.pending.values()) for c in self.consumers)

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
        if self._single_active:
            return await self._dispatch_single_active()
        return await self._dispatch_shared()

    async def _dispatch_single_active(self) -> bool:
        if self._rewind_pending:
            self._rewind_pending = False
            self._cursor.rewind()
        consumer = self._active
        if consumer is None or consumer.permits <= 0:
            return False
        entries = await self._cursor.read_entries(self._entries_for(consumer.permits))
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
                # Batches used the permits up: read the rest again when the client asks for more.
                await self._cursor.seek(entry.position)
                break
            delivery = self._delivery(entry)
            budget -= delivery.messages
            deliveries.append(delivery)
        consumer.deliver(deliveries)
        return True

    async def _dispatch_shared(self) -> bool:
        available = [c for c in self.consumers if c.permits > 0]
        if not available:
            return False
        if self._replay:
            entries = await self._read_replay()
            self._spread(entries)
            return True
        budget = sum(c.permits for c in available)
        entries = await self._cursor.read_entries(self._entries_for(budget))
        if not entries:
            self._check_end_of_topic()
            return False
        self._spread(entries)
        return True

    async def _read_replay(self) -> list[Entry]:
        positions = sorted(self._replay)[: self._read_batch]
        self._replay.difference_update(positions)
        wanted = [p for p in positions if not self._cursor.is_deleted(p)]
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
        return entries

    def _spread(self, entries: Sequence[Entry]) -> None:
        available = [c for c in self.consumers if c.permits > 0 and not c.closed]
        if not available:
            self._replay.update(e.position for e in entries)
            return
        budgets = {id(c): c.permits for c in available}
        batches: dict[int, list[Delivery]] = {id(c): [] for c in available}
        n = len(available)
        for entry in entries:
            target: Consumer | None = None
            for _ in range(n):
                candidate = available[self._rr % n]
                self._rr += 1
                if budgets[id(candidate)] > 0:
                    target = candidate
                    break
            if target is None:
                self._replay.add(entry.position)
                continue
            delivery = self._delivery(entry)
            budgets[id(target)] -= delivery.messages
            batches[id(target)].append(delivery)
        for c in available:
            c.deliver(batches[id(c)])

    def _entries_for(self, permits: int) -> int:
        """How many entries to read for ``permits`` messages, given the recent batch sizes."""
        wanted = int(permits / self._messages_per_entry) or 1
        return max(1, min(wanted, self._read_batch))

    def _delivery(self, entry: Entry) -> Delivery:
        messages = messages_in_entry(entry.data)
        # A moving average of messages per entry sizes the next read to the permits.
        self._messages_per_entry += (messages - self._messages_per_entry) * 0.1
        return Delivery(entry, self._redeliveries.get(entry.position, 0), messages)

    def _check_end_of_topic(self) -> None:
        if not self._ledger.is_terminated or self._cursor.has_more_entries():
            return
        for c in self.consumers:
            if not c.told_end_of_topic:
                # Told once; a client that cannot take the notice simply finds no more messages.
                c.told_end_of_topic = True
                c.transport.send_reached_end_of_topic(c.consumer_id)
