"""One per-segment consumer or reader: SUBSCRIBE/FLOW/MESSAGE/ACK against one segment's topic.

Every consumer type (:mod:`braid.client.consumer_base`) reads a topic through one
:class:`SegmentConsumer` per segment it reads - a legacy segment's ``persistent://`` topic or a
managed ``segment://`` topic - and multiplexes them into its receive queue. The protocol is
:class:`SegmentSubscriber`'s; :class:`SegmentConsumer` turns entries into messages (the segment
reader's feed turns them into columns). A per-segment consumer sees its parent only through
:class:`SegmentParent` (:class:`ConsumerParent` for a consumer), never its private state. For its
segment it keeps the standard consumer protocol:

* **attach** - lookup -> connect -> SUBSCRIBE -> FLOW, retried with backoff on transient
  failures; deterministic refusals (busy, not found, unauthorized) fail the first attach (so
  ``subscribe`` raises) and are logged on later ones;
* **readers** (non-durable, for checkpoint consumers) start from the parent's position for the
  segment: its beginning, its newest message (the start then resolves to a concrete position
  with GET_LAST_MESSAGE_ID, so a checkpoint taken right away is exact), or just after a cursor -
  the broker is asked for the whole entry and earlier messages are filtered here, which works
  for brokers that start a reader inclusively or exclusively;
* **flow control** - permits are granted as the application takes messages (half the receiver
  queue at a time), not as they arrive; a window bounded in bytes too grows and shrinks with the
  sizes seen (:mod:`braid.client.receive_window`);
* **acknowledgments** are grouped (every 100 ms or 1000 ids) and sent on the loop; a batched
  message is acknowledged individually once every message of its entry is (the broker has no
  batch-index acks); negative acks become REDELIVER_UNACKNOWLEDGED_MESSAGES after a delay;
* **reconnect** - on connection loss or CLOSE_CONSUMER the segment's undelivered messages leave
  the receive queue (the broker redelivers them, a reader resumes after the last delivered one)
  and the consumer re-attaches; acknowledgments recorded meanwhile are sent once it is back;
* **half-acknowledged entries** - when an entry comes back (a negative ack, a reconnect) only
  its messages the application has not acknowledged are delivered again;
* **schema** - SUBSCRIBE carries the consumer's schema (the broker checks it); an entry
  written with a schema version whose definition the consumer's schema needs and does not
  know yet (Avro) is held, with every later entry of the segment, until GET_SCHEMA answers,
  so the segment's order is kept and ``Message.value`` never needs the network;
* **read ahead** - a segment a Stream consumer attaches ahead of being readable
  (:meth:`SegmentSubscriber.hold_ahead`, ADR 0075) grants its first window at once and holds
  what arrives, counted as queued, until :meth:`~SegmentSubscriber.resume` releases it in order
  (the hand-over is then no round trip); a :meth:`~SegmentSubscriber.pause` drops it instead
  (never delivered: the broker gives it to the segment's next owner).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from braid.client.backoff import Backoff
from braid.client.connection import BrokerConnection
from braid.client.context import ClientContext
from braid.client.errors import AlreadyClosedError, ConsumerBusyError, is_transient
from braid.client.message import Message, decode_entry, position_of, wire_schema_version
from braid.client.receive_window import ReceiveWindow
from braid.client.schema import PayloadDecoder
from braid.core.checkpoint import SegmentCursor
from braid.core.errors import BraidError
from braid.core.topic_layout import SegmentRoute
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

_UINT64_MAX = (1 << 64) - 1
#: Batch index meaning "the whole entry" in a cursor (an entry's last message or beyond).
WHOLE_ENTRY = 2**31 - 1
ACK_GROUP_TIME = 0.1
ACK_GROUP_MAX = 1000
#: Longest wait between two attempts to take over a segment its previous owner still holds.
BUSY_RETRY_MAX = 0.25


@dataclass(frozen=True)
class SubscriptionSpec:
    """How a segment is subscribed (shared by all segments of one consumer)."""

    subscription: str
    sub_type: int
    consumer_name: str
    initial_position: int = pb.CommandSubscribe.Latest
    durable: bool = True
    receiver_queue_size: int = 1000
    #: Bound the receive window in bytes too (:mod:`braid.client.receive_window`).
    receiver_queue_bytes: int | None = None
    negative_ack_delay: float = 1.0
    #: Keep retrying a ``ConsumerBusy`` refusal (an assigned segment whose previous owner is
    #: still draining it before it lets go) instead of failing the attach.
    retry_busy: bool = False


class ReaderStart:
    """Where a reader (re)starts: ``beginning``, ``latest``, or just after ``cursor``."""

    __slots__ = ("cursor", "kind")

    def __init__(self, kind: str, cursor: SegmentCursor | None = None) -> None:
        self.kind = kind
        self.cursor = cursor


class SegmentParent(Protocol):
    """What a per-segment consumer may ask of the consumer (or segment reader) it feeds.

    The parent owns what its segments share: the delivery lock (it guards every segment's
    :attr:`~SegmentSubscriber.queued` count and permit counters, because the application takes
    messages on its own threads), where readers start, and what happens to a segment's
    undelivered messages and to its end.
    """

    @property
    def wire_schema(self) -> pb.Schema | None:
        """The schema every SUBSCRIBE carries (``None``: bytes, no schema)."""
        ...

    @property
    def delivery_lock(self) -> threading.Lock: ...

    def on_loop_thread(self) -> bool:
        """Whether the caller runs on the client's event loop thread."""
        ...

    def reader_start(self, seg: SegmentSubscriber) -> ReaderStart:
        """Where the reader ``seg`` (re)starts (non-durable segments only)."""
        ...

    def latest_resolved(self, seg: SegmentSubscriber, cursor: SegmentCursor | None) -> None:
        """A reader started at "latest" learnt the position it started after."""
        ...

    def purge(self, seg: SegmentSubscriber) -> None:
        """Drop ``seg``'s messages not taken by the application yet (it lost its connection:
        the broker sends them again)."""
        ...

    def segment_ended(self, seg: SegmentSubscriber) -> None:
        """The broker reported the end of ``seg``'s (terminated) topic."""
        ...


class ConsumerParent(SegmentParent, Protocol):
    """The parent of a :class:`SegmentConsumer`: the consumer whose receive queue it feeds."""

    @property
    def topic(self) -> str: ...

    @property
    def decoder(self) -> PayloadDecoder | None:
        """Decodes payloads with the consumer's schema (``None``: bytes)."""
        ...

    def enqueue(
        self, seg: SegmentSubscriber, messages: list[Message], *, counted: bool = False
    ) -> None:
        """Make ``messages`` receivable, in order (``counted``: already in ``seg.queued``)."""
        ...


class SegmentSubscriber:
    """The consumer protocol on one segment (attach, flow, acknowledgments, reconnect); what a
    dispatched entry becomes is the subclass's (:class:`SegmentConsumer`: messages)."""

    def __init__(
        self,
        parent: SegmentParent,
        ctx: ClientContext,
        route: SegmentRoute,
        spec: SubscriptionSpec,
        key_shared: pb.KeySharedMeta | None = None,
    ) -> None:
        self.parent = parent
        self._delivery_lock = parent.delivery_lock
        self.ctx = ctx
        self.route = route
        self.segment_id = route.segment_id
        self.spec = spec
        self.key_shared = key_shared
        self.conn: BrokerConnection | None = None
        self.consumer_id = 0
        self.ready = False
        self.closed = False
        self.ended = False
        self.paused = False
        # Attached ahead of being readable: entries read are held until resume (ADR 0075).
        self.ahead = False
        self.queued = 0
        self._consumed = 0
        self._flow_pending = False
        self.window = ReceiveWindow(spec.receiver_queue_size, spec.receiver_queue_bytes)
        self._skip: SegmentCursor | None = None
        self._attaching = False
        self._started = False
        self._first: asyncio.Future[None] = ctx.loop.create_future()
        self._lock = threading.Lock()
        self._acks: list[pb.MessageIdData] = []
        self._cumulative: tuple[int, int] | None = None
        self._ack_scheduled = False
        self._batches: dict[tuple[int, int], set[int]] = {}
        self._nacks: dict[tuple[int, int], None] = {}
        self._nack_timer: asyncio.TimerHandle | None = None

    # -- attach -------------------------------------------------------------------------------

    def start(self) -> asyncio.Future[None]:
        """Begin attaching; the future holds the first attach's outcome."""
        if not self._started:
            self._started = True
            self._spawn_attach()
        return self._first

    def _spawn_attach(self) -> None:
        if self._attaching or self.closed:
            return
        self._attaching = True
        self.ctx.spawn(self._attach_loop(), f"consumer attach to {self.route.topic}")

    async def _attach_loop(self) -> None:
        backoff = self.ctx.backoff()
        busy_backoff = Backoff(0.02, BUSY_RETRY_MAX)
        try:
            while not self.closed:
                try:
                    await self._attach_once()
                    return
                except Exception as exc:
                    if self.closed or self.ctx.closed:
                        return
                    if self.spec.retry_busy and isinstance(exc, ConsumerBusyError):
                        # The previous owner drains before it detaches; the segment is ours
                        # as soon as it lets go. Not a failure of the subscribe call.
                        log.debug("%s is still held by its previous owner", self.route.topic)
                        if not self._first.done():
                            self._first.set_result(None)
                        await asyncio.sleep(busy_backoff.next_delay())
                        continue
                    if not is_transient(exc):
                        if not self._first.done():
                            self._first.set_exception(exc)
                            return
                        log.warning("re-subscribing to %s failed: %s", self.route.topic, exc)
                    else:
                        log.debug("consumer on %s not attached yet: %s", self.route.topic, exc)
                        self.ctx.route_failed(self.route)
                    await asyncio.sleep(backoff.next_delay())
        finally:
            self._attaching = False
            if not self._first.done() and (self.closed or self.ctx.closed):
                self._first.set_exception(
                    AlreadyClosedError(f"consumer on {self.route.topic} closed")
                )
                self._first.exception()  # retrieved: nobody may be waiting

    async def _attach_once(self) -> None:
        conn = await self.ctx.connection_for(self.route)
        consumer_id = self.ctx.next_id()
        request_id = conn.new_request_id()
        spec = self.spec
        start_id: pb.MessageIdData | None = None
        initial = spec.initial_position
        start: ReaderStart | None = None
        if not spec.durable:
            start = self.parent.reader_start(self)
            if start.kind == "after" and start.cursor is not None:
                cursor = start.cursor
                self._skip = cursor
                start_id = commands.message_id(
                    cursor.ledger_id, cursor.entry_id, batch_index=max(cursor.batch_index, 0)
                )
                initial = pb.CommandSubscribe.Earliest
            else:
                self._skip = None
                initial = (
                    pb.CommandSubscribe.Earliest
                    if start.kind == "beginning"
                    else pb.CommandSubscribe.Latest
                )
        cmd = commands.subscribe(
            self.route.topic,
            spec.subscription,
            spec.sub_type,  # type: ignore[arg-type]
            consumer_id,
            request_id,
            consumer_name=spec.consumer_name,
            initial_position=initial,  # type: ignore[arg-type]
            durable=spec.durable,
            start_message_id=start_id,
            key_shared_meta=self.key_shared,
            schema=self.parent.wire_schema,
        )
        conn.register_consumer(consumer_id, self)
        try:
            await conn.request(cmd, request_id)
            if start is not None and start.kind == "latest":
                await self._resolve_latest(conn, consumer_id)
        except BaseException:
            conn.unregister_consumer(consumer_id, self)
            raise
        if self.closed:
            conn.unregister_consumer(consumer_id, self)
            with contextlib.suppress(Exception):
                conn.send(commands.close_consumer(consumer_id, conn.new_request_id()))
            return
        self.conn = conn
        self.consumer_id = consumer_id
        self.ready = True
        with self._delivery_lock:
            self._consumed = 0
            permits = self.window.restart()
        if not self.paused:
            conn.send(commands.flow(consumer_id, permits))
        with self._lock:
            unsent = bool(self._acks) or self._cumulative is not None
        if unsent:
            self._flush_acks()
        log.debug("subscribed %s on %s", spec.subscription, self.route.topic)
        if not self._first.done():
            self._first.set_result(None)

    async def _resolve_latest(self, conn: BrokerConnection, consumer_id: int) -> None:
        """Pin a reader started at "latest" to the concrete position it started after."""
        request_id = conn.new_request_id()
        response = await conn.request(
            commands.get_last_message_id(consumer_id, request_id), request_id
        )
        r = response.getLastMessageIdResponse
        mid = (
            r.consumer_mark_delete_position
            if r.HasField("consumer_mark_delete_position")
            else (r.last_message_id)
        )
        if mid.ledgerId == _UINT64_MAX or mid.entryId == _UINT64_MAX:
            cursor = None  # nothing stored yet: "after the start" is the beginning
        else:
            cursor = SegmentCursor.after(mid.ledgerId, mid.entryId, WHOLE_ENTRY)
        self.parent.latest_resolved(self, cursor)

    # -- receiving ----------------------------------------------------------------------------

    def on_message(self, message: pb.CommandMessage, body: bytes) -> None:
        """One dispatched entry (what it becomes is the subclass's)."""
        raise NotImplementedError

    def _drop_held(self) -> None:
        """Forget entries a subclass holds back undelivered (the broker redelivers them)."""

    def _release_held(self) -> None:
        """Deliver, in order, entries a subclass holds back (what it read ahead)."""

    def _discard_undecodable(self, mid: pb.MessageIdData, exc: BraidError) -> None:
        """Drop an entry that cannot be decoded: log it once, acknowledge it so it is not
        redelivered forever, and give its permit back."""
        log.error(
            "discarding an undecodable entry %d:%d of %s: %s",
            mid.ledgerId,
            mid.entryId,
            self.route.topic,
            exc,
        )
        self._send_soon(
            commands.ack(self.consumer_id, [commands.message_id(mid.ledgerId, mid.entryId)])
        )
        self._permits_back(1)

    def _permits_back(self, count: int) -> None:
        with self._delivery_lock:
            grant = self.count_delivered(count)
        if grant:
            self.send_flow()

    def sized(self, nbytes: int, messages: int) -> None:
        """An entry of ``messages`` messages and ``nbytes`` bytes arrived (loop only): with a
        byte-bounded window, grant at once what it may now grow by."""
        with self._delivery_lock:
            grow = self.window.received(nbytes, messages)
        conn = self.conn
        if grow and conn is not None and self.ready and not self.paused:
            with contextlib.suppress(Exception):
                conn.send(commands.flow(self.consumer_id, grow))

    def count_delivered(self, count: int) -> bool:
        """The application took ``count`` of this segment's messages; return whether permits
        should now be granted (then call :meth:`send_flow` on the loop).

        Called with the parent consumer's delivery lock held, which guards the permit counters.
        """
        self._consumed += count
        if self._flow_pending or self._consumed < self.window.threshold:
            return False
        self._flow_pending = True
        return True

    def send_flow(self) -> None:
        """Grant the permits of the messages delivered since the last grant (loop only)."""
        with self._delivery_lock:
            permits = self.window.grant(self._consumed)
            self._consumed = 0
            self._flow_pending = False
        conn = self.conn
        if permits and conn is not None and self.ready and not self.paused:
            with contextlib.suppress(Exception):
                conn.send(commands.flow(self.consumer_id, permits))

    def pause(self) -> None:
        """Grant no more permits (draining before a detach or a mode flip); entries held
        ahead are dropped (the broker redelivers them)."""
        self.paused = True
        if self.ahead:
            self.ahead = False
            self._drop_held()

    def hold_ahead(self) -> None:
        """Attach ahead of being readable (before :meth:`start`): read the first window at
        once and hold it until :meth:`resume` (ADR 0075)."""
        self.ahead = True

    def resume(self) -> None:
        """Start delivering a segment attached ahead: release what it holds, in order (loop
        only). A paused one grants its permits now if attached, else when the attach
        completes."""
        if self.ahead:
            self.ahead = False
            self._release_held()
            return
        if not self.paused:
            return
        self.paused = False
        conn = self.conn
        if conn is not None and self.ready:
            with self._delivery_lock:
                self._consumed = 0
                self._flow_pending = False
                permits = self.window.restart()
            with contextlib.suppress(Exception):
                conn.send(commands.flow(self.consumer_id, permits))

    # -- acknowledgments ----------------------------------------------------------------------

    def ack_individual(
        self, ledger_id: int, entry_id: int, batch_index: int, batch_size: int
    ) -> None:
        """Acknowledge one message (any thread); its entry is acked once fully acknowledged."""
        with self._lock:
            if batch_size > 1 and batch_index >= 0:
                key = (ledger_id, entry_id)
                remaining = self._batches.get(key)
                if remaining is None:
                    remaining = set(range(batch_size))
                    self._batches[key] = remaining
                remaining.discard(batch_index)
                if remaining:
                    return
                del self._batches[key]
            self._acks.append(commands.message_id(ledger_id, entry_id))
            flush_now = len(self._acks) >= ACK_GROUP_MAX
            if self._ack_scheduled and not flush_now:
                return
            self._ack_scheduled = True
        if flush_now:
            self._call_in_loop(self._flush_acks)
        else:
            self._call_in_loop(self._schedule_ack_flush)

    def ack_cumulative(
        self, ledger_id: int, entry_id: int, batch_index: int, batch_size: int
    ) -> None:
        """Acknowledge everything up to this message in the segment (any thread).

        Mid-batch, the entry before is acknowledged (the broker has no batch-index acks); the
        rest of the entry is covered by a later ack.
        """
        if 0 <= batch_index < batch_size - 1 and batch_index != WHOLE_ENTRY:
            if entry_id == 0:
                return
            entry_id -= 1
        with self._lock:
            current = self._cumulative
            if current is not None and current >= (ledger_id, entry_id):
                return
            self._cumulative = (ledger_id, entry_id)
            if self._ack_scheduled:
                return
            self._ack_scheduled = True
        self._call_in_loop(self._schedule_ack_flush)

    def _schedule_ack_flush(self) -> None:
        self.ctx.loop.call_later(ACK_GROUP_TIME, self._flush_acks)

    def flush_acks(self) -> None:
        """Send the recorded acknowledgments now (on the loop)."""
        self._flush_acks()

    def _flush_acks(self) -> None:
        conn = self.conn
        with self._lock:
            self._ack_scheduled = False
            if conn is None or not self.ready:
                return  # kept: sent once re-attached (see _attach_once)
            acks, self._acks = self._acks, []
            cumulative, self._cumulative = self._cumulative, None
        with contextlib.suppress(Exception):
            if acks:
                conn.send(commands.ack(self.consumer_id, acks))
            if cumulative is not None:
                mid = commands.message_id(*cumulative)
                conn.send(commands.ack(self.consumer_id, [mid], cumulative=True))

    def negative_ack(self, ledger_id: int, entry_id: int) -> None:
        """Ask for the message's entry to be redelivered after the negative-ack delay."""
        with self._lock:
            # The entry comes back whole; its indexes acknowledged already are filtered out
            # then (on_message), so only the unacknowledged ones are delivered again.
            self._nacks[(ledger_id, entry_id)] = None
        self._call_in_loop(self._schedule_nacks)

    def _schedule_nacks(self) -> None:
        if self._nack_timer is None:
            self._nack_timer = self.ctx.loop.call_later(
                self.spec.negative_ack_delay, self._flush_nacks
            )

    def _flush_nacks(self) -> None:
        self._nack_timer = None
        with self._lock:
            nacks, self._nacks = list(self._nacks), {}
        self._send_redeliver(nacks)

    def redeliver(self, entries: list[tuple[int, int]]) -> None:
        """Ask for these ``(ledger, entry)`` to be redelivered now (an ack timeout)."""
        self._call_in_loop(lambda: self._send_redeliver(entries))

    def _send_redeliver(self, entries: list[tuple[int, int]]) -> None:
        conn = self.conn
        if entries and conn is not None and self.ready:
            ids = [commands.message_id(ledger, entry) for ledger, entry in entries]
            with contextlib.suppress(Exception):
                conn.send(commands.redeliver_unacknowledged_messages(self.consumer_id, ids))

    def redeliver_unacknowledged(self, purged: int) -> None:
        """Ask the broker for every unacknowledged message of this consumer again (loop only;
        Pulsar's ``redeliverUnacknowledgedMessages``), after the parent dropped the ``purged``
        ones it still held: their permits are granted again. Not attached: the re-attach
        redelivers them anyway."""
        conn = self.conn
        if conn is None or not self.ready:
            return
        self._drop_held()
        with contextlib.suppress(Exception):
            conn.send(commands.redeliver_unacknowledged_messages(self.consumer_id))
        if purged:
            self._permits_back(purged)

    # -- broker events ------------------------------------------------------------------------

    def on_active_change(self, active: bool) -> None:
        log.debug("consumer on %s is %s", self.route.topic, "active" if active else "standby")

    def on_end_of_topic(self) -> None:
        self.ended = True
        self.parent.segment_ended(self)

    def on_closed_by_broker(self) -> None:
        log.info("broker closed the consumer on %s: re-subscribing", self.route.topic)
        self._lost()

    def on_connection_lost(self) -> None:
        self._lost()

    def _lost(self) -> None:
        conn, self.conn = self.conn, None
        self.ready = False
        if conn is not None:
            conn.unregister_consumer(self.consumer_id, self)
        # Acknowledgments recorded but not sent yet stay, and go out once re-attached: the
        # application did acknowledge those messages (an ack names a stored position, valid
        # on any connection). So do the acknowledged indexes of half-acknowledged entries.
        with self._delivery_lock:
            self._consumed = 0
            self._flow_pending = False
        self._drop_held()
        self.parent.purge(self)
        if not self.closed:
            self._spawn_attach()

    # -- closing ------------------------------------------------------------------------------

    async def close(self, *, unsubscribe: bool = False) -> None:
        """Flush acks and close (or unsubscribe) on the broker; idempotent."""
        if self.closed:
            return
        self._flush_acks()
        self.closed = True
        self._drop_held()
        if self._nack_timer is not None:
            self._nack_timer.cancel()
        conn, self.conn = self.conn, None
        self.ready = False
        if not self._first.done():
            self._first.set_exception(AlreadyClosedError(f"consumer on {self.route.topic} closed"))
            self._first.exception()
        if conn is None or conn.closed:
            return
        conn.unregister_consumer(self.consumer_id, self)
        request_id = conn.new_request_id()
        cmd = (
            commands.unsubscribe(self.consumer_id, request_id)
            if unsubscribe
            else commands.close_consumer(self.consumer_id, request_id)
        )
        try:
            await conn.request(cmd, request_id)
        except BraidError as exc:
            if unsubscribe:
                raise
            log.debug("closing the consumer on %s: %s", self.route.topic, exc)

    def _send_soon(self, cmd: pb.BaseCommand) -> None:
        conn = self.conn
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.send(cmd)

    def _call_in_loop(self, fn: Callable[[], None]) -> None:
        if self.parent.on_loop_thread():
            fn()
        else:
            self.ctx.loop.call_soon_threadsafe(fn)


class SegmentConsumer(SegmentSubscriber):
    """The consumer (or reader) of one segment for a consumer: entries become
    :class:`~braid.client.message.Message` objects in the consumer's receive queue, an entry
    whose writer schema is not known yet held back (see the module docstring)."""

    def __init__(
        self,
        parent: ConsumerParent,
        ctx: ClientContext,
        route: SegmentRoute,
        spec: SubscriptionSpec,
        key_shared: pb.KeySharedMeta | None = None,
    ) -> None:
        super().__init__(parent, ctx, route, spec, key_shared)
        self._consumer = parent
        # Entries waiting for a writer schema definition (None: nothing waits), and the
        # generation that drops them when the segment's undelivered messages are purged.
        self._held: list[list[Message]] | None = None
        self._held_generation = 0

    def on_message(self, message: pb.CommandMessage, body: bytes) -> None:
        if self.paused:
            return  # draining: not delivered, so never acknowledged; the broker redelivers it
        mid = message.message_id
        try:
            messages, dispatched = decode_entry(
                body,
                topic=self._consumer.topic,
                segment_id=self.segment_id,
                ledger_id=mid.ledgerId,
                entry_id=mid.entryId,
                redelivery=message.redelivery_count,
                owner=self,
                decoder=self._consumer.decoder,
            )
        except BraidError as exc:
            self._discard_undecodable(mid, exc)
            return
        if self._batches:
            with self._lock:
                remaining = self._batches.get((mid.ledgerId, mid.entryId))
                if remaining is not None:
                    # A redelivery of a half-acknowledged entry: deliver what is left of it.
                    messages = [m for m in messages if position_of(m)[2] in remaining]
        skip = self._skip
        if skip is not None:
            messages = [m for m in messages if skip.is_after(*position_of(m)[:3])]
            if messages:
                self._skip = None
        if len(messages) < dispatched:
            # Messages the application will never take (below a reader's start, compacted out)
            # still used permits: grant them back now, or the broker stops dispatching.
            self._permits_back(dispatched - len(messages))
        if messages:
            self._deliver(messages)

    def _deliver(self, messages: list[Message]) -> None:
        """Queue an entry's messages for the application, behind any entry still waiting for
        its writer schema definition."""
        decoder = self._consumer.decoder
        if not self.ahead and (
            self._held is None
            and (decoder is None or not decoder.needs_writer(wire_schema_version(messages[0])))
        ):
            self._consumer.enqueue(self, messages)
            return
        with self._delivery_lock:
            self.queued += len(messages)  # in the consumer's hands: not drained yet
        if self.ahead:
            # Read ahead of being readable: kept, in order, until resume (ADR 0075).
            if self._held is None:
                self._held = []
            self._held.append(messages)
            return
        self._hold(messages)

    def _hold(self, messages: list[Message]) -> None:
        """Keep ``messages`` (counted in :attr:`queued`) until their writer definition is
        known; the first entry held starts the GET_SCHEMA."""
        if self._held is not None:
            self._held.append(messages)
            return
        self._held = [messages]
        version = wire_schema_version(messages[0])
        assert version is not None
        self.ctx.spawn(
            self._fetch_writer(version, self._held_generation),
            f"schema version of {self.route.topic}",
        )

    async def _fetch_writer(self, version: bytes, generation: int) -> None:
        """Learn the definition of schema ``version`` (GET_SCHEMA), then release the held
        entries in order. A version the broker does not have decodes with the consumer's own
        definition (``Message.value`` raises if that cannot read it)."""
        decoder = self._consumer.decoder
        assert decoder is not None
        backoff = self.ctx.backoff()
        while not self.closed and version not in decoder.writers:
            try:
                conn = await self.ctx.connection_for(self.route)
                request_id = conn.new_request_id()
                response = await conn.request(
                    commands.get_schema(self.route.topic, request_id, version), request_id
                )
            except Exception as exc:
                if is_transient(exc):
                    await asyncio.sleep(backoff.next_delay())
                    continue
                log.warning("GET_SCHEMA on %s failed: %s", self.route.topic, exc)
                decoder.writers.setdefault(version, None)
                break
            answer = response.getSchemaResponse
            if answer.HasField("error_code"):
                log.warning(
                    "schema version %s of %s is unavailable (%s): decoding with the "
                    "consumer's schema",
                    version.hex(),
                    self.route.topic,
                    answer.error_message,
                )
                decoder.writers.setdefault(version, None)
            else:
                decoder.writers.setdefault(version, bytes(answer.schema.schema_data))
        if generation != self._held_generation:
            return  # the held entries were purged meanwhile (the broker redelivers them)
        self._release_held()

    def _release_held(self) -> None:
        """Queue the held entries in order, up to one whose writer definition is still to
        learn (that one and the rest wait for it)."""
        decoder = self._consumer.decoder
        held, self._held = self._held or [], None
        for messages in held:
            if self.closed or self.paused:
                # Never delivered, so never acknowledged: redelivered (to the next owner).
                with self._delivery_lock:
                    self.queued -= len(messages)
            elif self._held is None and (
                decoder is None or not decoder.needs_writer(wire_schema_version(messages[0]))
            ):
                self._consumer.enqueue(self, messages, counted=True)
            else:
                self._hold(messages)  # behind another version to learn: order kept

    def _drop_held(self) -> None:
        held, self._held = self._held, None
        self._held_generation += 1
        if held:
            with self._delivery_lock:
                self.queued -= sum(len(m) for m in held)


__all__ = [
    "ACK_GROUP_MAX",
    "ACK_GROUP_TIME",
    "WHOLE_ENTRY",
    "ConsumerParent",
    "ReaderStart",
    "SegmentConsumer",
    "SegmentParent",
    "SegmentSubscriber",
    "SubscriptionSpec",
]
