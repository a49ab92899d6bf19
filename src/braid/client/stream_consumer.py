"""The Stream consumer: per-key ordered delivery, cumulative acks across segments (C7).

``client-api.md`` §4.1, ``client-behavior.md`` §6 and §8. Two ways to get segments, one code
path after that:

* **managed layout** (a scalable-topic broker): an
  :class:`~braid.client.assignment_session.AssignmentSession` registers with the topic's
  controller, which assigns segments (its drain gating keeps a key's children behind its
  parents); each assigned segment is subscribed Exclusive, or Key_Shared with entry-bucket
  dispatch when the assignment lists bucket ranges (``key-shared.md`` §4). A segment leaving the
  assignment, or flipping mode, is drained first: no more permits, its undelivered messages
  dropped, and the detach waits until the application has acknowledged every delivered one;
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
import logging

from braid.client.assignment_session import AssignmentSession
from braid.client.consumer_base import ConsumerBase
from braid.client.context import ClientContext
from braid.client.errors import InvalidConfigurationError
from braid.client.layout_source import LayoutSource, LayoutSources
from braid.client.message import Message
from braid.client.segment_consumer import ACK_GROUP_TIME, SegmentConsumer, SubscriptionSpec
from braid.core.consumer_assignment import AssignedSegment, AssignmentDiff
from braid.core.message_id import MessageId, message_position
from braid.core.position_vector import PositionVector
from braid.core.topic_layout import SegmentRoute, TopicLayout
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

_Position = tuple[int, int, int, int]


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
    ) -> None:
        super().__init__(ctx, sources, source, consumer_name)
        self.subscription = subscription
        self._initial = initial_position
        self._queue_size = receiver_queue_size
        self._vector: PositionVector[_Position] = PositionVector()
        self._session: AssignmentSession | None = None
        self._drains: dict[int, asyncio.Future[None]] = {}
        self._ack_token = -1
        self._ack_scheduled = False

    def _spec(self, sub_type: int) -> SubscriptionSpec:
        return SubscriptionSpec(
            self.subscription,
            sub_type,
            self.consumer_name,
            self._initial,
            durable=True,
            receiver_queue_size=self._queue_size,
        )

    async def _start(self) -> None:
        layout = self._source.current
        if layout.all_legacy:
            await asyncio.gather(*(self._attach_failover(sid).start() for sid in layout.active_ids))
            return
        self._session = AssignmentSession(
            self._ctx,
            self._source,
            self.subscription,
            self.consumer_name,
            pb.STREAM,
            self._apply_diff,
        )
        await self._session.start()
        firsts = [seg.start() for seg in self._segments.values()]
        await asyncio.gather(*firsts)

    def _attach_failover(self, sid: int) -> SegmentConsumer:
        route = self._source.current.route(sid)
        seg = SegmentConsumer(self, self._ctx, route, self._spec(pb.CommandSubscribe.Failover))
        self._segments[sid] = seg
        return seg

    def _on_layout(self, layout: TopicLayout) -> None:
        if self._session is None and layout.all_legacy:
            for sid in layout.active_ids:
                if sid not in self._segments:
                    self._attach_failover(sid).start()

    # -- controller assignment ----------------------------------------------------------------

    def _apply_diff(self, diff: AssignmentDiff) -> None:
        for sid in diff.detach:
            self._ctx.spawn(self._detach(sid), f"detaching segment {sid} of {self.topic}")
        for assigned in diff.reattach:
            self._ctx.spawn(
                self._reattach(assigned),
                f"re-attaching segment {assigned.segment_id} of {self.topic}",
            )
        for assigned in diff.attach:
            self._attach_assigned(assigned)

    def _attach_assigned(self, assigned: AssignedSegment) -> SegmentConsumer:
        route = SegmentRoute(assigned.segment_id, assigned.segment_topic)
        layout_route = self._source.current.routes.get(assigned.segment_id)
        if layout_route is not None and layout_route.topic == assigned.segment_topic:
            route = layout_route
        key_shared: pb.KeySharedMeta | None = None
        sub_type = pb.CommandSubscribe.Exclusive
        if assigned.shared:
            sub_type = pb.CommandSubscribe.Key_Shared
            key_shared = pb.KeySharedMeta(keySharedMode=pb.STICKY, entryBucketDispatch=True)
            for r in assigned.bucket_ranges:
                key_shared.hashRanges.add(start=r.start, end=r.end)
        seg = SegmentConsumer(self, self._ctx, route, self._spec(sub_type), key_shared)
        self._segments[assigned.segment_id] = seg
        seg.start()
        return seg

    async def _drain(self, sid: int) -> None:
        """Stop delivering ``sid`` and wait until its delivered messages are all acknowledged."""
        seg = self._segments.get(sid)
        if seg is None:
            return
        seg.pause()
        self._purge(seg)
        with self._lock:
            pending = self._vector.pending(sid)
        if pending:
            waiter: asyncio.Future[None] = self._ctx.loop.create_future()
            self._drains[sid] = waiter
            await waiter

    async def _detach(self, sid: int) -> None:
        await self._drain(sid)
        seg = self._segments.pop(sid, None)
        with self._lock:
            self._vector.forget_segment(sid)
        if seg is not None:
            await seg.close()

    async def _reattach(self, assigned: AssignedSegment) -> None:
        await self._detach(assigned.segment_id)
        self._attach_assigned(assigned).start()

    def _check_drains(self, sids: list[int]) -> None:
        for sid in sids:
            waiter = self._drains.get(sid)
            if waiter is not None and self._vector.pending(sid) == 0:
                del self._drains[sid]
                if not waiter.done():
                    waiter.set_result(None)

    # -- delivery and acknowledgment ----------------------------------------------------------

    def _record_delivery(self, seg: SegmentConsumer, message: Message) -> None:
        message._token = self._vector.delivered(
            seg.segment_id,
            (message._ledger_id, message._entry_id, message._batch_index, message._batch_size),
        )

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge this message and everything delivered before it, in every segment.

        Recorded at once and sent grouped (within 100 ms, and on close); never blocks.

        Raises:
            AlreadyClosedError: the consumer is closed.
            InvalidConfigurationError: not a message or id delivered by this consumer.
        """
        self._check_open()
        with self._lock:
            token = self._token_of(message)
            if token is None or token <= self._ack_token:
                return  # already covered by a later cumulative ack
            self._ack_token = token
            if self._ack_scheduled:
                return
            self._ack_scheduled = True
        self._call_in_loop(self._schedule_ack_flush)

    def _schedule_ack_flush(self) -> None:
        self._ctx.loop.call_later(ACK_GROUP_TIME, self._flush_cumulative)

    def _flush_cumulative(self) -> None:
        """Turn the latest cumulative ack into per-segment acks through the position vector."""
        with self._lock:
            self._ack_scheduled = False
            covered = self._vector.take_up_to(self._ack_token)
        for sid, positions in covered.items():
            seg = self._segments.get(sid)
            if seg is None:
                continue  # detached since: its slice is skipped (client-behavior.md §6)
            if seg.key_shared is not None:
                for position in positions:
                    seg.ack_individual(*position)
            else:
                seg.ack_cumulative(*positions[-1])
            seg.flush_acks()
        if self._drains:
            self._check_drains(list(covered))

    def _token_of(self, message: Message | MessageId) -> int | None:
        if isinstance(message, Message):
            owner = message._owner
            if message._token < 0 or owner is None or owner.parent is not self:
                raise InvalidConfigurationError("this message was not delivered by this consumer")
            return message._token
        if isinstance(message, MessageId):
            position = message_position(message)
            if position is None:
                raise InvalidConfigurationError("cannot acknowledge the earliest/latest sentinel")
            key = (position.ledger_id, position.entry_id, position.batch_index, position.batch_size)
            token = self._vector.token_of(position.segment_id, key)
            return token
        raise InvalidConfigurationError(
            f"expected a Message or MessageId, got {type(message).__name__}"
        )

    async def _before_close(self) -> None:
        self._flush_cumulative()
        for waiter in self._drains.values():
            if not waiter.done():
                waiter.set_result(None)
        self._drains.clear()
        if self._session is not None:
            await self._session.close()

    async def unsubscribe(self) -> None:
        """Delete the subscription on every attached segment, then close."""
        await self._unsubscribe()


__all__ = ["AsyncStreamConsumer"]
