"""The topic producer: routing over the layout, lazy per-segment producers, transparent reroute.

:class:`AsyncProducer` publishes to one topic, whatever its shape: it routes every message with a
:class:`~braid.core.routing.SegmentRouter` over the layout its
:class:`~braid.client.layout_source.LayoutSource` provides, and hands it to the
:class:`~braid.client.segment_producer.SegmentProducer` of that segment, created on first use
(``docs/client.md#how-the-client-works-inside``; under an exclusive access mode every active segment
is attached eagerly, so a collision fails ``create_producer``). A ``persistent://`` topic is simply
a layout of legacy segments: the same code path, exercised today. There, too, segments attach at
create, so a classic topic keeps v4 producer semantics (errors and ``last_sequence_id`` at create).

Guarantees kept here:

* **call order** - messages are routed in ``send`` order, and while the producer re-routes
  (below) every new send routed to a segment being replaced waits in a queue behind the
  messages being moved, so no message overtakes an earlier one of its key or segment (C3);
  sends to the other segments go on at once - a split stalls only the keys it moves;
* **transparent segment-gone retry** (C4, ``docs/protocol.md#producing-to-segments``) - when a
  segment is terminated (a split/merge sealed it) or a newer layout no longer lists it as active,
  the producer collects its unconfirmed messages, waits with bounded backoff for a layout in which
  the segment is no longer active, and re-routes them before anything sent later: those already
  sent first, with the sequence ids they were sent with (the successor inherited the sealed
  segment's deduplication state, ADR 0055), then the rest in call order with fresh ids; only
  after :data:`MAX_REROUTE_ATTEMPTS` attempts do those messages fail with
  ``TopicTerminatedError`` (a scalable topic's: after the client's ``operation_timeout``);
* **sequence ids** (C5) - one monotonic counter per producer
  (:class:`~braid.client.sequence_ids.SequenceIds`), seeded from the brokers'
  ``last_sequence_id``; :attr:`AsyncProducer.last_sequence_id` is the highest stored one;
* **send timeout, flush, graceful and idempotent close**; async entry points never raise:
  every failure, including bad arguments, completes the returned future.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from braid.client.backoff import Backoff
from braid.client.context import ClientContext
from braid.client.delayed_delivery import delivery_time
from braid.client.errors import (
    AlreadyClosedError,
    InvalidConfigurationError,
    ProducerQueueFullError,
    TopicTerminatedError,
    error_for_code,
    is_transient,
)
from braid.client.layout_source import LayoutSource, LayoutSources
from braid.client.pending import PendingMessage, SendGroup, fail
from braid.client.producer_options import ProducerOptions, check_fields
from braid.client.schema import Schema
from braid.client.segment_producer import SegmentProducer, generated_name
from braid.client.sequence_ids import SequenceIds
from braid.client.transaction import AsyncTransaction
from braid.core.errors import BraidError, DeadlineExceededError, InvalidInputError
from braid.core.message_id import MessageId
from braid.core.routing import SegmentRouter
from braid.core.topic_layout import TopicLayout
from braid.protocol import commands

log = logging.getLogger(__name__)

#: How many times a message whose segment is gone is re-routed before it fails (the reference
#: client uses 10).
MAX_REROUTE_ATTEMPTS = 10


class AsyncProducer:
    """Publishes messages to one topic (create with ``AsyncClient.create_producer``)."""

    def __init__(
        self,
        ctx: ClientContext,
        sources: LayoutSources,
        source: LayoutSource,
        options: ProducerOptions,
    ) -> None:
        self._ctx = ctx
        self._sources = sources
        self._source = source
        self._options = options
        self._loop = ctx.loop
        schema = options.schema or Schema.BYTES
        self.schema = schema
        #: Encodes a value (None: the bytes schema, values are payloads).
        self._encode: Callable[[Any], bytes] | None = None if schema.is_bytes else schema.encode
        #: What every per-segment PRODUCER carries (None: no schema, bytes).
        self.wire_schema = None if schema.is_bytes else schema.to_wire()
        layout = source.current
        self._router = SegmentRouter(layout)
        self._segments: dict[int, SegmentProducer] = {}
        self._dead: dict[int, tuple[int, BaseException]] = {}
        self._base_name = options.producer_name
        self._scalable_base: str | None = None
        self._sequence = SequenceIds(options.initial_sequence_id)
        #: What its segment producers may ask of it (SegmentProducerOwner).
        self._segment_owner = _SegmentOwner(self)
        self._call_no = 0
        self._unresolved: dict[int, PendingMessage] = {}
        self._flush_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._space = asyncio.Event()
        self._space.set()
        self.space_listeners: list[Callable[[], None]] = []
        # Re-routing state: while _held is not None, new sends routed to a segment in
        # _retiring (gone, or no longer active) queue there until the successor is known.
        self._held: collections.deque[PendingMessage] | None = None
        self._retiring: set[int] = set()
        self._stale: list[PendingMessage] = []
        self._gone: dict[int, BaseException] = {}
        self._recovering = False
        self._closing = False
        self._closed = False
        self._close_task: asyncio.Future[None] | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        source.add_listener(self._on_layout)
        self._schedule_sweep()

    @classmethod
    async def create(
        cls, ctx: ClientContext, sources: LayoutSources, topic: str, options: ProducerOptions
    ) -> AsyncProducer:
        """Resolve the topic and, under an exclusive access mode, attach every active segment.

        Raises:
            InvalidTopicNameError, NotFoundError, AuthorizationError, FeatureNotSupportedError:
                resolution failed.
            ProducerBusyError, ProducerFencedError: exclusivity could not be acquired.
        """
        source = await sources.acquire(topic)
        producer = cls(ctx, sources, source, options)
        layout = source.current
        if options.exclusive or layout.all_legacy:
            # Eager attach: exclusive modes must fail here (C6); on the migration bridge a
            # classic topic keeps v4 producer semantics (errors and last_sequence_id at create).
            waiting = options.access_mode == "wait_for_exclusive"
            try:
                attached = asyncio.gather(
                    *(producer._open_segment(sid).start() for sid in layout.active_ids)
                )
                if waiting:
                    await attached
                else:
                    async with asyncio.timeout(ctx.settings.operation_timeout):
                        await attached
            except TimeoutError:
                await producer._abort()
                raise DeadlineExceededError(
                    f"producer on {producer.topic} not attached within "
                    f"{ctx.settings.operation_timeout:g}s"
                ) from None
            except BaseException:
                await producer._abort()
                raise
        elif producer.wire_schema is not None:
            # Segments attach lazily; the schema is checked (and registered) now, so an
            # incompatible one fails create_producer as on a classic topic (C11).
            try:
                await producer._register_schema(layout)
            except BaseException:
                await producer._abort()
                raise
        return producer

    async def _register_schema(self, layout: TopicLayout) -> None:
        """GET_OR_CREATE_SCHEMA of the producer's schema on the topic (by one of its segments:
        every segment shares the topic's schema), retried while the broker is unreachable.

        Raises:
            IncompatibleSchemaError: the topic's rules refuse the schema.
        """
        assert self.wire_schema is not None
        route = layout.route(layout.active_ids[0])
        backoff = self._ctx.backoff()
        deadline = self._ctx.deadline()
        while True:
            try:
                conn = await self._ctx.connection_for(route)
                request_id = conn.new_request_id()
                response = await conn.request(
                    commands.get_or_create_schema(route.topic, request_id, self.wire_schema),
                    request_id,
                )
            except Exception as exc:
                if not is_transient(exc) or self._loop.time() >= deadline:
                    raise
                await asyncio.sleep(backoff.next_delay())
                continue
            answer = response.getOrCreateSchemaResponse
            if answer.HasField("error_code"):
                raise error_for_code(answer.error_code, answer.error_message, context=self.topic)
            return

    # -- properties ---------------------------------------------------------------------------

    @property
    def topic(self) -> str:
        """The canonical topic name."""
        return self._source.topic

    @property
    def producer_name(self) -> str | None:
        """The producer's name (assigned by the broker for a classic topic, once attached)."""
        if self._base_name is not None:
            return self._base_name
        if self._scalable_base is not None:
            return self._scalable_base
        for seg in self._segments.values():
            if seg.route.legacy and seg.name:
                return seg.name
        return None

    @property
    def last_sequence_id(self) -> int:
        """The highest sequence id the broker has confirmed (-1 before any)."""
        return self._sequence.last

    @property
    def pending_count(self) -> int:
        """Messages sent but not yet confirmed or failed."""
        return len(self._unresolved)

    @property
    def closed(self) -> bool:
        return self._closing

    # -- sending ------------------------------------------------------------------------------

    def send_async(
        self,
        value: Any,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: int | None = None,
        sequence_id: int | None = None,
        *,
        deliver_after: datetime.timedelta | float | None = None,
        deliver_at: int | None = None,
        txn: AsyncTransaction | None = None,
    ) -> asyncio.Future[MessageId]:
        """Queue a message now (call order = publish order); the future gets its id.

        ``deliver_after`` (a timedelta or seconds) / ``deliver_at`` (ms since the epoch): a
        Queue (Shared) subscription gets the message no earlier
        (:mod:`braid.client.delayed_delivery`). ``txn``: send it in that transaction (it is
        stored now, delivered only once the transaction commits).

        Never raises: a closed producer, a full queue (``ProducerQueueFullError``) or an invalid
        argument fail the returned future.
        """
        fut: asyncio.Future[MessageId] = self._loop.create_future()
        self.submit(
            fut,
            value,
            key,
            properties,
            event_time,
            sequence_id,
            check_space=True,
            deliver_after=deliver_after,
            deliver_at=deliver_at,
            txn=txn,
        )
        return fut

    async def send(
        self,
        value: Any,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: int | None = None,
        sequence_id: int | None = None,
        *,
        deliver_after: datetime.timedelta | float | None = None,
        deliver_at: int | None = None,
        txn: AsyncTransaction | None = None,
    ) -> MessageId:
        """Publish a message and wait until it is stored; returns its id (``deliver_after`` /
        ``deliver_at``, ``txn``: as :meth:`send_async`).

        Raises:
            TimeoutError: not stored within ``send_timeout``.
            TopicTerminatedError: the topic accepts no more messages.
            TransactionStateError: ``txn`` is not open; TransactionConflictError: refused in it.
            AlreadyClosedError, ProducerBusyError, ...: see the error model.
        """
        await self.wait_for_space()
        return await self.send_async(
            value,
            key,
            properties,
            event_time,
            sequence_id,
            deliver_after=deliver_after,
            deliver_at=deliver_at,
            txn=txn,
        )

    async def send_many(
        self,
        values: Sequence[Any],
        keys: Sequence[str | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        event_times: Sequence[int | None] | None = None,
    ) -> list[MessageId]:
        """Publish many messages (in order) with one completion; returns their ids in order.

        No future or task is created per message. If any message fails, the call fails with
        that message's error (the others may have been stored: retrying may duplicate them).
        """
        await self.wait_for_space()
        fut: asyncio.Future[list[MessageId]] = self._loop.create_future()
        self.submit_many(fut, values, keys, properties, event_times)
        return await fut

    def submit(
        self,
        completion: Any,
        value: Any,
        key: Any = None,
        properties: Any = None,
        event_time: Any = None,
        sequence_id: Any = None,
        *,
        check_space: bool = False,
        deliver_after: Any = None,
        deliver_at: Any = None,
        txn: AsyncTransaction | None = None,
    ) -> None:
        """Queue one message with ``completion`` (a future of either kind); never raises."""
        try:
            if self._closing:
                raise AlreadyClosedError(f"producer on {self.topic} is closed")
            if check_space and len(self._unresolved) >= self._options.max_pending_messages:
                raise ProducerQueueFullError(
                    f"{len(self._unresolved)} messages are pending on {self.topic} "
                    f"(max_pending_messages={self._options.max_pending_messages})"
                )
            if txn is not None:
                txn.check_open("send in")
            when = None
            if deliver_after is not None or deliver_at is not None:
                when = delivery_time(deliver_after, deliver_at)  # before the record is counted
            record = self._record(value, key, properties, event_time, sequence_id, completion, -1)
            if when is not None:
                record.deliver_at = when
            if txn is not None:
                record.txn = txn
                txn.op_started()
        except BraidError as exc:
            if not completion.done():
                completion.set_exception(exc)
            return
        self._enqueue(record)

    def submit_many(
        self,
        completion: Any,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        properties: Sequence[Any] | None = None,
        event_times: Sequence[Any] | None = None,
    ) -> None:
        """Queue a ``send_many`` batch resolving ``completion`` with the list of ids.

        All or nothing: if one message is invalid (or its value does not fit the schema), none
        is queued and ``completion`` fails with that message's error.
        """
        first_call = self._call_no
        try:
            if self._closing:
                raise AlreadyClosedError(f"producer on {self.topic} is closed")
            count = len(values)
            for name, column in (
                ("keys", keys),
                ("properties", properties),
                ("event_times", event_times),
            ):
                if column is not None and len(column) != count:
                    raise InvalidInputError(
                        f"send_many: {name} has {len(column)} entries, values {count}"
                    )
            group = SendGroup(count, completion)
            records = [
                self._record(
                    values[i],
                    keys[i] if keys is not None else None,
                    properties[i] if properties is not None else None,
                    event_times[i] if event_times is not None else None,
                    None,
                    group,
                    i,
                )
                for i in range(count)
            ]
        except BraidError as exc:
            # Forget the messages of this call registered before the invalid one: they were
            # never queued, and a flush or close must not wait for them.
            for call_no in range(first_call, self._call_no):
                self._unresolved.pop(call_no, None)
            self._after_resolve()
            if not completion.done():
                completion.set_exception(exc)
            return
        enqueue = self._enqueue
        for record in records:
            enqueue(record)

    def _record(
        self,
        value: Any,
        key: Any,
        properties: Any,
        event_time: Any,
        sequence_id: Any,
        completion: Any,
        index: int,
    ) -> PendingMessage:
        if self._encode is not None:
            value = self._encode(value)
        if not (
            type(value) is bytes
            and key is None
            and properties is None
            and event_time is None
            and sequence_id is None
        ):
            value, properties = check_fields(value, key, properties, event_time, sequence_id)
        call_no = self._call_no
        self._call_no = call_no + 1
        record = PendingMessage(
            value,
            key,
            properties,
            event_time,
            sequence_id,
            completion,
            index,
            call_no,
            self._loop.time(),
        )
        self._unresolved[call_no] = record
        if len(self._unresolved) >= self._options.max_pending_messages:
            self._space.clear()
        return record

    async def wait_for_space(self) -> None:
        """Wait until fewer than ``max_pending_messages`` messages are pending."""
        while len(self._unresolved) >= self._options.max_pending_messages and not self._closing:
            self._space.clear()
            await self._space.wait()

    # -- routing ------------------------------------------------------------------------------

    def _enqueue(self, record: PendingMessage) -> None:
        if record.key is None and record.origin_hash >= 0:
            # A keyless resend stays in the lineage it was sent to, where its floor is known.
            sid = self._router.route_hash(record.origin_hash)
        else:
            sid = self._router.route(record.key)
        held = self._held
        if held is not None and sid in self._retiring:
            # Its segment is being replaced: wait behind the messages being moved, so the
            # key's order holds. Keys of other segments go on at once (no stall for them).
            held.append(record)
            return
        seg = self._segments.get(sid)
        if seg is None:
            dead = self._dead.get(sid)
            if dead is not None and dead[0] == self._router.layout.epoch:
                self._resolved_failed([record], dead[1])
                return
            seg = self._open_segment(sid)
            seg.start()
        seg.add(record)

    def _open_segment(self, sid: int) -> SegmentProducer:
        route = self._router.layout.route(sid)
        if route.legacy:
            name = self._base_name
        else:
            if self._scalable_base is None:
                self._scalable_base = self._base_name or generated_name()
            name = f"{self._scalable_base}-seg-{sid}"
        seg = SegmentProducer(
            self._segment_owner,
            self._ctx,
            route,
            self._options,
            name,
            entry_buckets=self._router.layout.entry_buckets,
        )
        self._segments[sid] = seg
        return seg

    # -- outcomes -----------------------------------------------------------------------------

    def _resolved_ok(self, records: list[PendingMessage]) -> None:
        unresolved = self._unresolved
        last = -1
        for record in records:
            unresolved.pop(record.call_no, None)
            if record.seq > last:
                last = record.seq
        self._sequence.confirmed(last)
        self._after_resolve()

    def _resolved_failed(self, records: list[PendingMessage], error: BaseException) -> None:
        for record in records:
            self._unresolved.pop(record.call_no, None)
            fail(record, error)
        self._after_resolve()

    def _after_resolve(self) -> None:
        if len(self._unresolved) < self._options.max_pending_messages:
            if not self._space.is_set():
                self._space.set()
            for listener in self.space_listeners:
                listener()
        if self._flush_waiters:
            self._check_flush()

    def _check_flush(self) -> None:
        oldest = next(iter(self._unresolved), None)
        remaining = []
        for barrier, fut in self._flush_waiters:
            if oldest is None or oldest >= barrier:
                if not fut.done():
                    fut.set_result(None)
            else:
                remaining.append((barrier, fut))
        self._flush_waiters = remaining

    # -- segment gone / layout change ---------------------------------------------------------

    def _segment_gone(self, seg: SegmentProducer, error: BaseException) -> None:
        """A segment was terminated: take its messages and re-route them (segment-gone retry)."""
        if self._segments.get(seg.segment_id) is seg:
            del self._segments[seg.segment_id]
        self._stale.extend(self._take_unresolved(seg))
        self._gone[seg.segment_id] = error
        self._ctx.spawn(seg.close(), f"closing producer of {seg.route.topic}")
        log.info("segment %d of %s is gone (%s): re-routing", seg.segment_id, self.topic, error)
        self._start_recovery({seg.segment_id})

    def _take_unresolved(self, seg: SegmentProducer) -> list[PendingMessage]:
        """``seg``'s unconfirmed messages, those already sent marked with where they went."""
        info = self._router.layout.dag.segments.get(seg.segment_id)
        if info is None:
            info = self._source.current.dag.segments.get(seg.segment_id)
        return seg.take_unresolved(info.hash_range.start if info is not None else -1)

    def _segment_failed(self, seg: SegmentProducer, error: BaseException) -> None:
        """A segment refused the producer for good: fail its messages, forget it."""
        if self._segments.get(seg.segment_id) is seg:
            del self._segments[seg.segment_id]
        self._resolved_failed(seg.take_unresolved(), error)

    def _on_layout(self, layout: TopicLayout) -> None:
        if self._closing:
            return
        stale = {sid for sid in self._segments if not layout.is_active(sid)}
        if stale or self._held is not None:
            self._start_recovery(stale)
            return
        self._adopt(layout)

    def _adopt(self, layout: TopicLayout) -> None:
        """Route on ``layout`` from now on (every live segment producer is active in it)."""
        self._router = SegmentRouter(layout)
        self._dead = {sid: d for sid, d in self._dead.items() if d[0] == layout.epoch}
        for sid, seg in self._segments.items():
            seg.route = layout.route(sid)
        if self._options.exclusive:
            for sid in layout.active_ids:
                if sid not in self._segments:
                    self._open_segment(sid).start()

    def _start_recovery(self, retiring: set[int]) -> None:
        """Hold new sends to ``retiring`` segments and (once) start moving their messages."""
        self._retiring |= retiring
        if self._held is None:
            self._held = collections.deque()
        if not self._recovering:
            self._recovering = True
            self._ctx.spawn(self._recover(), f"re-routing messages of {self.topic}")

    async def _recover(self) -> None:
        """Move the messages of gone segments onto a layout where those segments are sealed.

        Loops until (a) no live segment producer is inactive in the current layout (each one
        found is retired: its in-flight entries settle, the rest move) and (b) every segment
        that reported itself gone is inactive in the current layout - re-reading the layout
        after every wait, so a layout that changed meanwhile is never adopted unchecked.
        """
        backoff = Backoff(0.05, 1.0)
        attempts = 0
        # A sealed segment of a scalable topic has successors whose layout may come late (a
        # controller leader lost mid-split is replaced after its session expires): wait for it.
        scalable = self.topic.startswith("topic://")
        deadline = self._loop.time() + self._ctx.settings.operation_timeout
        try:
            while not self._closed:
                layout = self._source.current
                retire = [sid for sid in self._segments if not layout.is_active(sid)]
                if retire:
                    self._retiring.update(retire)
                    for sid in retire:
                        seg = self._segments.pop(sid, None)
                        if seg is None:
                            continue  # reported itself gone while we waited for another
                        await seg.wait_sent(self._ctx.settings.operation_timeout)
                        self._stale.extend(self._take_unresolved(seg))
                        await seg.close()
                    continue  # the layout may have moved on while we waited
                still_active = [sid for sid in self._gone if layout.is_active(sid)]
                if not still_active:
                    break
                attempts += 1
                over = (
                    self._loop.time() >= deadline if scalable else attempts > MAX_REROUTE_ATTEMPTS
                )
                if over:
                    for sid in still_active:
                        error = self._gone[sid]
                        if not isinstance(error, TopicTerminatedError):
                            error = TopicTerminatedError(str(error))
                        self._dead[sid] = (layout.epoch, error)
                    log.warning(
                        "segments %s of %s stay terminated with no newer layout: failing sends",
                        still_active,
                        self.topic,
                    )
                    break
                await self._source.wait_newer(layout.epoch, backoff.next_delay())
        except Exception:
            # Never leave sends held: route what we have on the newest layout (a segment
            # still sealed there reports itself gone again and recovery restarts).
            log.exception("re-routing the messages of %s failed; retrying them", self.topic)
        finally:
            self._recovering = False
        self._gone.clear()
        self._retiring.clear()
        self._adopt(self._source.current)
        held, self._held = self._held or collections.deque(), None
        # Messages already sent go first, in sequence-id order, with those ids: a successor's
        # deduplication judges them (ADR 0055) and must see one producer's ids ascend. Then the
        # rest in call order across both queues: a segment's send queue never takes a later
        # message before an earlier one (C3). A key's sent messages all precede its unsent ones.
        stale = self._stale
        sent = sorted((r for r in stale if r.sent_seq >= 0), key=lambda r: r.sent_seq)
        records = sent + sorted(
            [*(r for r in stale if r.sent_seq < 0), *held], key=lambda r: r.call_no
        )
        self._stale = []
        for record in records:
            self._enqueue(record)

    # -- timeouts, flush, close ---------------------------------------------------------------

    def _schedule_sweep(self) -> None:
        timeout = self._options.send_timeout
        if timeout > 0 and not self._closed:
            interval = min(1.0, max(0.02, timeout / 4))
            self._sweeper = self._loop.call_later(interval, self._sweep)

    def _sweep(self) -> None:
        timeout = self._options.send_timeout
        now = self._loop.time()
        expired: list[PendingMessage] = []
        for seg in self._segments.values():
            expired.extend(seg.expire(now, timeout))
        limit = now - timeout
        for queue in (self._stale, self._held):
            if queue:
                keep = [r for r in queue if r.enqueued_at > limit]
                expired.extend(r for r in queue if r.enqueued_at <= limit)
                queue.clear()
                queue.extend(keep)
        if expired:
            error = DeadlineExceededError(f"message to {self.topic} not stored within {timeout:g}s")
            self._resolved_failed(expired, error)
        self._schedule_sweep()

    async def flush(self) -> None:
        """Send every batch now and wait until every message sent before this call is settled."""
        barrier = self._call_no
        for seg in list(self._segments.values()):
            seg.flush()
        oldest = next(iter(self._unresolved), None)
        if oldest is None or oldest >= barrier:
            return
        fut: asyncio.Future[None] = self._loop.create_future()
        self._flush_waiters.append((barrier, fut))
        await fut

    async def close(self) -> None:
        """Complete pending sends (bounded by ``send_timeout``), then release everything.

        Idempotent; concurrent callers wait for the same close.
        """
        if self._close_task is None:
            self._close_task = asyncio.ensure_future(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        self._closing = True
        self._space.set()
        timeout = self._options.send_timeout or self._ctx.settings.operation_timeout
        try:
            async with asyncio.timeout(timeout + 1.0):
                await self.flush()
        except (TimeoutError, Exception) as exc:
            log.debug("close of producer on %s: flush ended with %r", self.topic, exc)
        await self._abort()

    async def _abort(self) -> None:
        self._closing = True
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        self._source.remove_listener(self._on_layout)
        segments = list(self._segments.values())
        self._segments.clear()
        leftovers: list[PendingMessage] = list(self._stale) + list(self._held or ())
        for seg in segments:
            leftovers.extend(seg.take_unresolved())
        await asyncio.gather(*(seg.close() for seg in segments), return_exceptions=True)
        self._stale, self._held = [], None
        if leftovers:
            self._resolved_failed(leftovers, AlreadyClosedError(f"producer on {self.topic} closed"))
        for _barrier, fut in self._flush_waiters:
            if not fut.done():
                fut.set_result(None)
        self._flush_waiters = []
        await self._sources.release(self._source)

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _SegmentOwner:
    """What an :class:`AsyncProducer` lets its segment producers ask of it (it implements
    :class:`~braid.client.segment_producer.SegmentProducerOwner`): its schema, its sequence ids,
    and where the outcomes of their messages go."""

    __slots__ = ("_producer", "sequence_ids", "wire_schema")

    def __init__(self, producer: AsyncProducer) -> None:
        self._producer = producer
        self.sequence_ids = producer._sequence
        self.wire_schema = producer.wire_schema

    def confirmed(self, records: list[PendingMessage]) -> None:
        self._producer._resolved_ok(records)

    def failed(self, records: list[PendingMessage], error: BaseException) -> None:
        self._producer._resolved_failed(records, error)

    def segment_gone(self, segment: SegmentProducer, error: BaseException) -> None:
        self._producer._segment_gone(segment, error)

    def segment_refused(self, segment: SegmentProducer, error: BaseException) -> None:
        self._producer._segment_failed(segment, error)


def check_options(**kwargs: Any) -> ProducerOptions:
    """Build :class:`ProducerOptions`, turning a bad keyword into a typed error."""
    try:
        return ProducerOptions(**kwargs)
    except TypeError as exc:
        raise InvalidConfigurationError(str(exc)) from exc


__all__ = ["MAX_REROUTE_ATTEMPTS", "AsyncProducer", "check_options"]
