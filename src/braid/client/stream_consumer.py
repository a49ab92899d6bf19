"""The Stream consumer: per-key ordered delivery, cumulative acks across segments (C7).

``docs/client.md#the-three-consumer-types``, ``docs/client.md#how-the-client-works-inside``. Two
ways to get segments, one code path after that:

* **managed layout** (a scalable-topic broker): an
  :class:`~braid.client.assignment_session.AssignmentSession` registers with the topic's controller,
  which assigns segments (its drain gating keeps a key's children behind its parents); each assigned
  segment is subscribed Exclusive, or Key_Shared with entry-bucket dispatch when the assignment
  lists bucket ranges (``docs/protocol.md#entry-buckets``). A segment leaving the assignment, or
  flipping mode, is drained first: no more permits, its undelivered messages dropped (except the
  rest of an entry the application has taken part of, which the broker could only hand over whole),
  and the detach waits until the application has acknowledged every delivered one. Its next owner
  retries its attach (``ConsumerBusy``) until then, so a key's messages are never delivered by two
  consumers at once;
* **legacy layout** (``persistent://`` topics - the migration bridge): every legacy segment is
  subscribed **Failover** (ADR 0022). A v4 Failover subscription is the broker-side equivalent
  of the controller's assignment: one active consumer per segment, the others on standby, load
  shared across partitions.

Cumulative acknowledgment goes through the
:class:`~braid.core.position_vector.PositionVector`: acknowledging a message acknowledges, in
every segment, everything delivered before it. Nothing is acknowledged on close.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from braid.client.assignment_session import AssignmentSession
from braid.client.consumer_base import ConsumerBase
from braid.client.context import ClientContext
from braid.client.errors import InvalidConfigurationError
from braid.client.layout_source import LayoutSource, LayoutSources
from braid.client.message import (
    Message,
    MessagePosition,
    delivered_by,
    delivery_token,
    position_of,
    stamp_delivery_tokens,
)
from braid.client.schema import Schema
from braid.client.segment_consumer import (
    ACK_GROUP_TIME,
    SegmentConsumer,
    SegmentSubscriber,
    SubscriptionSpec,
)
from braid.client.transaction import AsyncTransaction
from braid.core.consumer_assignment import AssignedSegment, AssignmentDiff
from braid.core.message_id import MessageId, message_position
from braid.core.position_vector import PositionVector
from braid.core.topic_layout import SegmentRoute, TopicLayout
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)


class AsyncStreamConsumer(ConsumerBase):
    """Receives messages in per-key order (create with ``AsyncClient.subscribe_stream``)."""

    kind = "stream consumer"

    def __init__(
        self,
        ctx: ClientContext,
        sources: LayoutSources,
        source: LayoutSource,
        subscription: str,
        consumer_name: str | None,
        initial_position: int,
        receiver_queue_size: int,
        schema: Schema | None = None,
    ) -> None:
        super().__init__(ctx, sources, source, consumer_name, schema)
        self.subscription = subscription
        self._initial = initial_position
        self._queue_size = receiver_queue_size
        self._vector: PositionVector[MessagePosition] = PositionVector()
        self._session: AssignmentSession | None = None
        self._assigned: dict[int, AssignedSegment] = {}
        self._draining: dict[int, SegmentConsumer] = {}
        self._detaching: set[asyncio.Task[None]] = set()
        self._drains: dict[SegmentConsumer, asyncio.Future[None]] = {}
        self._ack_token = -1
        self._ack_scheduled = False
        self._initial_ids: frozenset[int] = frozenset(source.current.dag.segments)

    def _spec(self, sub_type: int, sid: int | None = None) -> SubscriptionSpec:
        initial = self._initial
        if sid is not None and sid not in self._initial_ids:
            # A segment created after this consumer subscribed: everything in it is new to
            # the subscription (the controller gives it the cursor at its start anyway).
            initial = pb.CommandSubscribe.Earliest
        return SubscriptionSpec(
            self.subscription,
            sub_type,
            self.consumer_name,
            initial,
            durable=True,
            receiver_queue_size=self._queue_size,
            retry_busy=sid is not None,
        )

    async def _start(self) -> None:
        layout = self._source.current
        if layout.all_legacy:
            await self._first_attaches([self._attach_failover(sid) for sid in layout.active_ids])
            return
        self._session = AssignmentSession(
            self._ctx,
            self._source,
            self.subscription,
            self.consumer_name,
            pb.STREAM,
            self._apply_diff,
            initial_earliest=self._initial == pb.CommandSubscribe.Earliest,
            attach_ahead=True,
        )
        await self._session.start()
        await self._first_attaches(list(self._segments.values()))

    def _attach_failover(self, sid: int) -> SegmentConsumer:
        route = self._source.current.route(sid)
        seg = self._new_segment(route, self._spec(pb.CommandSubscribe.Failover))
        self._segments[sid] = seg
        return seg

    def _on_layout(self, layout: TopicLayout) -> None:
        if self._session is None and layout.all_legacy:
            for sid in layout.active_ids:
                if sid not in self._segments:
                    self._attach_failover(sid).start()
            return
        # Assigned segments follow the layout's routes (a segment moving to another broker).
        for sid, seg in self._segments.items():
            route = layout.routes.get(sid)
            if route is not None and route.topic == seg.route.topic:
                seg.route = route

    # -- controller assignment ----------------------------------------------------------------
    #
    # A segment leaving the assignment is *draining* until the application has acknowledged
    # everything delivered from it; only then is it closed, which lets its next owner in. If
    # the controller hands it back meanwhile, the new attach waits for that detach to finish:
    # one segment never has two per-segment consumers here, so acknowledgments (routed by
    # segment id) always reach the consumer that delivered the message.

    def _apply_diff(self, diff: AssignmentDiff) -> None:
        for sid in diff.detach:
            self._assigned.pop(sid, None)
            self._begin_detach(sid)
        for assigned in diff.reattach:
            self._assigned[assigned.segment_id] = assigned
            self._begin_detach(assigned.segment_id)
            self._attach_assigned(assigned)
        for assigned in diff.attach:
            self._assigned[assigned.segment_id] = assigned
            self._attach_assigned(assigned)
        for assigned in diff.resume:
            # Opened ahead, readable now: what it read meanwhile is delivered at once.
            self._assigned[assigned.segment_id] = assigned
            seg = self._segments.get(assigned.segment_id)
            if seg is not None:
                seg.resume()

    def _attach_assigned(self, assigned: AssignedSegment) -> None:
        sid = assigned.segment_id
        if sid in self._draining or sid in self._segments or self._closed:
            return  # attached once the previous consumer of the segment is gone
        # The layout names the brokers of active segments, the assignment those of the segments
        # it lists (sealed ones too, ADR 0073); a route without one is looked up.
        route = SegmentRoute(sid, assigned.segment_topic, broker_url=assigned.broker_url)
        layout_route = self._source.current.routes.get(sid)
        if layout_route is not None and layout_route.topic == assigned.segment_topic:
            route = layout_route
            if route.broker_url is None and assigned.broker_url is not None:
                route = dataclasses.replace(route, broker_url=assigned.broker_url)
        key_shared: pb.KeySharedMeta | None = None
        sub_type = pb.CommandSubscribe.Exclusive
        if assigned.shared:
            sub_type = pb.CommandSubscribe.Key_Shared
            key_shared = pb.KeySharedMeta(keySharedMode=pb.STICKY, entryBucketDispatch=True)
            for r in assigned.bucket_ranges:
                key_shared.hashRanges.add(start=r.start, end=r.end)
        seg = self._new_segment(route, self._spec(sub_type, sid), key_shared)
        if assigned.paused:
            # Attached ahead: subscribed and reading its first window, held until it is
            # readable, so the hand-over delivers at once (ADR 0075).
            seg.hold_ahead()
        self._segments[sid] = seg
        seg.start()

    def _begin_detach(self, sid: int) -> None:
        seg = self._segments.pop(sid, None)
        if seg is None:
            return
        self._draining[sid] = seg
        task = self._ctx.spawn(self._detach(seg), f"detaching segment {sid} of {self.topic}")
        self._detaching.add(task)
        task.add_done_callback(self._detaching.discard)

    async def _detach(self, seg: SegmentConsumer) -> None:
        """Drain ``seg`` (no more permits, undelivered messages dropped, wait until everything
        delivered is acknowledged), close it, then attach the segment again if it came back."""
        sid = seg.segment_id
        try:
            await self._drain(seg)
            with self._lock:
                self._vector.forget_segment(sid)
            await seg.close()
        finally:
            if self._draining.get(sid) is seg:
                del self._draining[sid]
        assigned = self._assigned.get(sid)
        if assigned is not None and not self._closed:
            self._attach_assigned(assigned)

    async def _drain(self, seg: SegmentConsumer) -> None:
        seg.pause()
        self._purge_but_partial_entry(seg)
        with self._lock:
            drained = self._drained(seg)
        if not drained and not self._closed:
            waiter: asyncio.Future[None] = self._ctx.loop.create_future()
            self._drains[seg] = waiter
            try:
                await waiter
            finally:
                self._drains.pop(seg, None)

    def _drained(self, seg: SegmentConsumer) -> bool:
        """Whether every message of ``seg`` still held here was delivered and acknowledged
        (call with the delivery lock held)."""
        return seg.queued == 0 and self._vector.pending(seg.segment_id) == 0

    def _purge_but_partial_entry(self, seg: SegmentConsumer) -> None:
        """Drop ``seg``'s undelivered messages, except the rest of an entry the application
        has taken part of.

        The broker acknowledges whole entries only (no batch-index acks), so an entry left
        half delivered would go, whole, to the segment's next owner - redelivering messages
        this consumer already had acknowledged. Delivering the rest of it first lets the
        application's cumulative ack cover the entire entry before the segment is handed over.
        """
        head = self._queue.first(lambda m: delivered_by(m) is seg)
        partial = None
        if head is not None:
            ledger, entry, index, _size = position_of(head)
            if index > 0:
                partial = (ledger, entry)
        removed = self._queue.purge(
            lambda m: delivered_by(m) is seg and position_of(m)[:2] != partial
        )
        with self._lock:
            seg.queued -= len(removed)

    def _check_drains(self, sids: list[int]) -> None:
        for seg, waiter in list(self._drains.items()):
            if seg.segment_id not in sids:
                continue
            with self._lock:
                drained = self._drained(seg)
            if drained and not waiter.done():
                waiter.set_result(None)

    # -- delivery and acknowledgment ----------------------------------------------------------

    def _record_deliveries(self, messages: list[Message]) -> None:
        stamp_delivery_tokens(messages, self._vector.delivered)

    def acknowledge_cumulative(
        self, message: Message | MessageId, txn: AsyncTransaction | None = None
    ) -> None:
        """Acknowledge this message and everything delivered before it, in every segment.

        Recorded at once and sent grouped (within 100 ms, and on close); never blocks. In
        ``txn``: one cumulative ack per segment goes out at once inside the transaction, held by
        the broker until it ends; a commit applies it (and ``txn.commit()`` waits for the
        answers); after an abort the segments' unacknowledged messages are delivered again.

        Raises:
            AlreadyClosedError: the consumer is closed.
            InvalidConfigurationError: not a message or id delivered by this consumer.
            TransactionStateError: ``txn`` is not open.
        """
        self._check_open()
        if txn is not None:
            self._acknowledge_in_transaction(message, txn)
            return
        with self._lock:
            token = self._token_of(message)
        if token is not None:
            self._acknowledge_token(token)

    def _acknowledge_in_transaction(
        self, message: Message | MessageId, txn: AsyncTransaction
    ) -> None:
        with self._lock:
            token = self._token_of(message)
            if token is None or token <= self._ack_token:
                return  # already covered by a cumulative ack
            covered = self._vector.last_up_to(token)
        txn.check_open("acknowledge in")
        for sid, position in covered.items():
            seg = self._segments.get(sid) or self._draining.get(sid)
            if seg is not None:
                self._ack_in_transaction(seg, txn, position, cumulative=True)
        # Committed: the broker moved the cursors; the plain ack updates the position vector
        # (and the drain bookkeeping) and repeats the same positions, which changes nothing.
        self._call_in_loop(txn.on_commit, lambda: self._acknowledge_token(token))
        # Aborted: those messages are unacknowledged again; have them delivered again.
        self._call_in_loop(txn.on_abort, lambda: self._redeliver_after_abort(set(covered)))

    def _redeliver_after_abort(self, sids: set[int]) -> None:
        """An abort released this consumer's cumulative acks on ``sids`` (loop only): drop
        their undelivered messages and the deliveries the position vector holds, and have the
        broker deliver every unacknowledged message of them again (as Pulsar's client does)."""
        for sid in sids:
            seg = self._segments.get(sid)
            if seg is None or self._closed:
                continue
            purged = self._purge(seg)
            with self._lock:
                self._vector.forget_segment(sid)
            seg.redeliver_unacknowledged(purged)

    def _acknowledge_token(self, token: int) -> None:
        with self._lock:
            if token <= self._ack_token:
                return  # already covered by a later cumulative ack
            self._ack_token = token
            urgent = self._ends_a_segment()
            if self._ack_scheduled and not urgent:
                return
            self._ack_scheduled = True
        self._call_in_loop(self._flush_cumulative if urgent else self._schedule_ack_flush)

    def _ends_a_segment(self) -> bool:
        """Whether an attached segment has reached the end of its sealed topic: then the next
        acknowledgment may be the one that drains it, and the controller hands its children
        over only once the broker has it. Such acks go out at once instead of within
        ``ACK_GROUP_TIME`` (ADR 0043); the window is short, since a drained segment leaves the
        assignment (call with the delivery lock held)."""
        return any(seg.ended for seg in self._segments.values())

    def _schedule_ack_flush(self) -> None:
        self._ctx.loop.call_later(ACK_GROUP_TIME, self._flush_cumulative)

    def _flush_cumulative(self) -> None:
        """Turn the latest cumulative ack into per-segment acks through the position vector."""
        with self._lock:
            self._ack_scheduled = False
            covered = self._vector.take_up_to(self._ack_token)
        for sid, positions in covered.items():
            seg = self._segments.get(sid) or self._draining.get(sid)
            if seg is None:
                continue  # detached since: the position vector skips its slice
            if seg.key_shared is not None:
                for position in positions:
                    seg.ack_individual(*position)
            else:
                seg.ack_cumulative(*positions[-1])
            seg.flush_acks()
        if self._drains:
            self._check_drains(list(covered))

    def _segment_drained(self, seg: SegmentSubscriber) -> None:
        """Every message of an ended segment reached the application: an acknowledgment
        waiting for its group timer may be the one that drains it, so send it now."""
        with self._lock:
            pending = self._ack_scheduled
        if pending:
            self._flush_cumulative()

    def _token_of(self, message: Message | MessageId) -> int | None:
        if isinstance(message, Message):
            owner = delivered_by(message)
            token = delivery_token(message)
            if token < 0 or owner is None or owner.parent is not self._as_parent:
                raise InvalidConfigurationError("this message was not delivered by this consumer")
            return token
        if isinstance(message, MessageId):
            position = message_position(message)
            if position is None:
                raise InvalidConfigurationError("cannot acknowledge the earliest/latest sentinel")
            key = (position.ledger_id, position.entry_id, position.batch_index, position.batch_size)
            return self._vector.token_of(position.segment_id, key)
        raise InvalidConfigurationError(
            f"expected a Message or MessageId, got {type(message).__name__}"
        )

    async def _before_close(self) -> None:
        self._flush_cumulative()
        for waiter in self._drains.values():
            if not waiter.done():
                waiter.set_result(None)
        if self._session is not None:
            await self._session.close()
        detaching = [t for t in self._detaching if not t.done()]
        if detaching:
            await asyncio.gather(*detaching, return_exceptions=True)
        self._detaching.clear()

    async def unsubscribe(self) -> None:
        """Delete the subscription on every attached segment, then close."""
        await self._unsubscribe()


__all__ = ["AsyncStreamConsumer"]
