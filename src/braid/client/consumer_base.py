"""What the three consumer types share: segment fan-in, receive, delivery bookkeeping, close.

A consumer presents many per-segment consumers as one stream (fan-in,
``docs/client.md#how-the-client-works-inside``): they feed one
:class:`~braid.client.receive_queue.ReceiveQueue`, and every message the application takes passes
through :meth:`ConsumerBase._delivered` - the one place that grants flow-control permits back to its
segment and lets the subclass record the delivery (the Stream consumer's position vector, the
Checkpoint consumer's per-segment positions). That bookkeeping runs under one lock because the
blocking facade takes messages on application threads.

Subclasses decide which segments to attach and how (:meth:`ConsumerBase._start`), and implement
the acknowledgment API of their kind. Per-segment consumers see their consumer only through
:class:`~braid.client.segment_consumer.ConsumerParent` (implemented by :class:`_SegmentsParent`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

from braid.client.context import ClientContext
from braid.client.errors import (
    AlreadyClosedError,
    IllegalStateError,
    InvalidConfigurationError,
    NotFoundError,
)
from braid.client.layout_source import LayoutSource, LayoutSources
from braid.client.message import Message, count_by_owner, delivered_by, position_of
from braid.client.receive_queue import ReceiveQueue
from braid.client.schema import PayloadDecoder, Schema
from braid.client.segment_consumer import (
    ReaderStart,
    SegmentConsumer,
    SegmentSubscriber,
    SubscriptionSpec,
)
from braid.client.transaction import AsyncTransaction
from braid.client.transaction_acks import acknowledge_in_transaction
from braid.core.checkpoint import SegmentCursor
from braid.core.message_id import MessageId, message_position
from braid.core.topic_layout import SegmentRoute, TopicLayout
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)


def check_receive_args(max_messages: int, timeout: float | None) -> None:
    """Validate ``receive``/``receive_many`` arguments.

    Raises:
        InvalidConfigurationError: a negative timeout or a non-positive ``max_messages``.
    """
    if timeout is not None and (not isinstance(timeout, int | float) or timeout < 0):
        raise InvalidConfigurationError(f"timeout must be None or >= 0 seconds: {timeout!r}")
    if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
        raise InvalidConfigurationError(f"max_messages must be a positive int: {max_messages!r}")


class ConsumerBase:
    """Common machinery of Stream, Queue and Checkpoint consumers."""

    kind = "consumer"

    def __init__(
        self,
        ctx: ClientContext,
        sources: LayoutSources,
        source: LayoutSource,
        consumer_name: str | None,
        schema: Schema | None = None,
    ) -> None:
        self._ctx = ctx
        self._sources = sources
        self._source = source
        self.consumer_name = consumer_name or f"braid-{uuid.uuid4().hex[:10]}"
        self.schema = schema or Schema.BYTES
        #: What every per-segment SUBSCRIBE carries (None: no schema, bytes).
        self.wire_schema = None if self.schema.is_bytes else self.schema.to_wire()
        #: Decodes every segment's payloads (None: the bytes schema, payloads are values).
        self.decoder = None if self.schema.is_bytes else PayloadDecoder(self.schema)
        self._loop_thread = threading.get_ident()
        self._queue = ReceiveQueue(ctx.loop, f"{self.kind} on {source.topic}")
        self._owns_queue = True
        self._lock = threading.Lock()
        self._segments: dict[int, SegmentConsumer] = {}
        #: What its per-segment consumers may ask of it.
        self._as_parent = _SegmentsParent(self)
        self._closed = False
        self._close_task: asyncio.Future[None] | None = None
        source.add_listener(self._on_layout_event)

    @property
    def topic(self) -> str:
        """The canonical topic name."""
        return self._source.topic

    @property
    def closed(self) -> bool:
        return self._closed

    async def _start(self) -> None:
        """Attach the first segments (raises the typed refusal)."""
        raise NotImplementedError

    async def _first_attaches(self, segments: list[SegmentConsumer]) -> None:
        """Wait for the first attach of ``segments``; raise the first refusal among them.

        A segment this consumer let go of meanwhile (detached by a newer assignment, pruned
        from the layout) ends its attach with ``AlreadyClosedError``: not a failure of the
        subscribe call. Neither is a sealed segment found gone (garbage-collected): there is
        nothing left to read in it.
        """
        results = await asyncio.gather(*(seg.start() for seg in segments), return_exceptions=True)
        for seg, result in zip(segments, results, strict=True):
            if not isinstance(result, BaseException):
                continue
            if seg.closed and isinstance(result, AlreadyClosedError) and not self._closed:
                continue
            if isinstance(result, NotFoundError) and not self._source.current.is_active(
                seg.segment_id
            ):
                log.debug("sealed segment %d of %s is gone: %s", seg.segment_id, self.topic, result)
                continue
            raise result

    def _on_loop_thread(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def _share_delivery_with(self, owner: ConsumerBase) -> None:
        """Feed ``owner``'s receive queue under its delivery lock instead of an own one (a
        Queue consumer's retry-letter topic; call before starting). ``owner`` closes the
        queue."""
        self._queue = owner._queue
        self._owns_queue = False
        self._lock = owner._lock
        self._as_parent.delivery_lock = owner._lock

    def _new_segment(
        self,
        route: SegmentRoute,
        spec: SubscriptionSpec,
        key_shared: pb.KeySharedMeta | None = None,
    ) -> SegmentConsumer:
        """A per-segment consumer feeding this consumer (not started)."""
        return SegmentConsumer(self._as_parent, self._ctx, route, spec, key_shared)

    # -- receiving ----------------------------------------------------------------------------

    async def receive(self, timeout: float | None = None) -> Message | None:  # noqa: ASYNC109
        """The next message, or ``None`` if ``timeout`` seconds pass first (``None`` = wait).

        Raises:
            AlreadyClosedError: the consumer is closed.
        """
        if timeout is not None:
            check_receive_args(1, timeout)
        if self._closed:
            self._check_open()
        messages = await self._queue.get_many(1, timeout)
        self._delivered(messages)
        return messages[0] if messages else None

    async def receive_many(self, max_messages: int, timeout: float | None = None) -> list[Message]:  # noqa: ASYNC109
        """Up to ``max_messages`` messages: those queued now, else the first to arrive within
        ``timeout`` seconds (``[]`` if none)."""
        check_receive_args(max_messages, timeout)
        self._check_open()
        messages = await self._queue.get_many(max_messages, timeout)
        self._delivered(messages)
        return messages

    def receive_blocking(self, max_messages: int, timeout: float | None) -> list[Message]:
        """Blocking-facade receive, run on the caller's thread (no hop through the loop)."""
        check_receive_args(max_messages, timeout)
        self._check_open()
        messages = self._queue.get_many_blocking(max_messages, timeout)
        self._delivered(messages)
        return messages

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"{self.kind} on {self.topic} is closed")

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Message]:
        while not self._closed:
            try:
                message = await self.receive()
            except AlreadyClosedError:
                return
            if message is not None:
                yield message

    # -- fan-in -------------------------------------------------------------------------------

    def _enqueue(
        self, seg: SegmentSubscriber, messages: list[Message], *, counted: bool = False
    ) -> None:
        """Make ``messages`` receivable (``counted``: already in ``seg.queued``, as entries a
        segment held while it learnt their writer schema are)."""
        if not counted:
            with self._lock:
                seg.queued += len(messages)
        self._queue.put_many(messages)

    def _purge(self, seg: SegmentSubscriber) -> int:
        """Drop ``seg``'s messages the application has not taken yet; how many."""
        removed = self._queue.purge(lambda m: delivered_by(m) is seg)
        with self._lock:
            seg.queued -= len(removed)
        return len(removed)

    def _delivered(self, messages: list[Message]) -> None:
        """Bookkeeping for messages the application just took (any thread)."""
        if not messages:
            return
        flows: list[SegmentConsumer] = []
        drained: list[SegmentConsumer] = []
        with self._lock:
            self._record_deliveries(messages)
            if len(messages) == 1:
                seg: SegmentConsumer = delivered_by(messages[0])
                seg.queued -= 1
                if seg.count_delivered(1):
                    flows.append(seg)
                if seg.ended and seg.queued == 0:
                    drained.append(seg)
            else:
                for seg, count in count_by_owner(messages).items():
                    seg.queued -= count
                    if seg.count_delivered(count):
                        flows.append(seg)
                    if seg.ended and seg.queued == 0:
                        drained.append(seg)
        for seg in flows:
            self._call_in_loop(seg.send_flow)
        for seg in drained:
            self._call_in_loop(self._segment_drained, seg)

    def _record_deliveries(self, messages: list[Message]) -> None:
        """Subclass hook, under the delivery lock: ``messages`` reached the application, in
        this order."""

    def _segment_ended(self, seg: SegmentSubscriber) -> None:
        """The broker reported the end of a (terminated) segment; drained once emptied."""
        with self._lock:
            drained = seg.queued == 0
        if drained:
            self._segment_drained(seg)

    def _segment_drained(self, seg: SegmentSubscriber) -> None:
        """Subclass hook: every message of an ended segment reached the application."""

    def _ack_in_transaction(
        self,
        seg: SegmentSubscriber | None,
        txn: AsyncTransaction,
        position: tuple[int, int, int, int],
        *,
        cumulative: bool,
    ) -> None:
        """Acknowledge ``position`` on ``seg`` inside ``txn`` (an operation ``commit`` waits
        for; its failure puts the transaction in error). Any thread; never blocks.

        Raises:
            TransactionStateError: ``txn`` is not open.
        """
        txn.check_open("acknowledge in")
        if seg is None:
            raise IllegalStateError("the message's segment is no longer attached to this consumer")
        ack = acknowledge_in_transaction(seg, txn, position, cumulative=cumulative)
        self._call_in_loop(txn.track, ack)

    def _call_in_loop(self, fn: Any, *args: Any) -> None:
        if self._on_loop_thread():
            fn(*args)
        else:
            self._ctx.loop.call_soon_threadsafe(fn, *args)

    # -- readers ------------------------------------------------------------------------------

    def _reader_start(self, seg: SegmentSubscriber) -> ReaderStart:
        """Where a reader of ``seg`` starts (readers only)."""
        return ReaderStart("latest")

    def _latest_resolved(self, seg: SegmentSubscriber, cursor: SegmentCursor | None) -> None:
        """A reader started at "latest" now knows the position it started after."""

    # -- acknowledgment helpers ---------------------------------------------------------------

    def _segment_of(
        self, message: Message | MessageId
    ) -> tuple[SegmentConsumer | None, tuple[int, int, int, int]]:
        """The per-segment consumer a message (or id) belongs to, and its position."""
        if isinstance(message, Message):
            seg = delivered_by(message)
            if seg is None or seg.parent is not self._as_parent:
                raise InvalidConfigurationError("this message was not delivered by this consumer")
            if seg.closed:
                seg = self._segments.get(seg.segment_id)
            return seg, position_of(message)
        if isinstance(message, MessageId):
            position = message_position(message)
            if position is None:
                raise InvalidConfigurationError("cannot acknowledge the earliest/latest sentinel")
            seg = self._segments.get(position.segment_id)
            return seg, (
                position.ledger_id,
                position.entry_id,
                position.batch_index,
                position.batch_size,
            )
        raise InvalidConfigurationError(
            f"expected a Message or MessageId, got {type(message).__name__}"
        )

    # -- layout -------------------------------------------------------------------------------

    def _on_layout_event(self, layout: TopicLayout) -> None:
        if not self._closed:
            self._on_layout(layout)

    def _on_layout(self, layout: TopicLayout) -> None:
        """Subclass hook: a newer layout was applied."""

    # -- closing ------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every per-segment consumer and release the topic; idempotent.

        Nothing is acknowledged on the application's behalf: delivered but unacknowledged
        messages are redelivered to the subscription.
        """
        if self._close_task is None:
            self._close_task = asyncio.ensure_future(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        self._closed = True
        self._source.remove_listener(self._on_layout_event)
        await self._before_close()
        segments = list(self._segments.values())
        self._segments.clear()
        await asyncio.gather(*(seg.close() for seg in segments), return_exceptions=True)
        if self._owns_queue:
            self._queue.close()
        await self._sources.release(self._source)

    async def _unsubscribe(self) -> None:
        """Delete the (durable) subscription on every attached segment, then close."""
        self._check_open()
        segments = list(self._segments.values())
        self._segments.clear()
        await asyncio.gather(*(seg.close(unsubscribe=True) for seg in segments))
        await self.close()

    async def _before_close(self) -> None:
        """Subclass hook, first step of close (e.g. leave the controller session)."""

    async def __aenter__(self) -> ConsumerBase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _SegmentsParent:
    """What a :class:`ConsumerBase` lets its per-segment consumers ask of it (it implements
    :class:`~braid.client.segment_consumer.ConsumerParent`)."""

    __slots__ = ("_consumer", "decoder", "delivery_lock", "wire_schema")

    def __init__(self, consumer: ConsumerBase) -> None:
        self._consumer = consumer
        self.wire_schema = consumer.wire_schema
        self.decoder = consumer.decoder
        self.delivery_lock = consumer._lock

    @property
    def topic(self) -> str:
        return self._consumer.topic

    def on_loop_thread(self) -> bool:
        return self._consumer._on_loop_thread()

    def reader_start(self, seg: SegmentSubscriber) -> ReaderStart:
        return self._consumer._reader_start(seg)

    def latest_resolved(self, seg: SegmentSubscriber, cursor: SegmentCursor | None) -> None:
        self._consumer._latest_resolved(seg, cursor)

    def enqueue(
        self, seg: SegmentSubscriber, messages: list[Message], *, counted: bool = False
    ) -> None:
        self._consumer._enqueue(seg, messages, counted=counted)

    def purge(self, seg: SegmentSubscriber) -> None:
        self._consumer._purge(seg)

    def segment_ended(self, seg: SegmentSubscriber) -> None:
        self._consumer._segment_ended(seg)


__all__ = ["ConsumerBase", "check_receive_args"]
