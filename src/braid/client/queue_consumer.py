"""The Queue consumer: parallel, no key affinity, individual and negative acks (C8).

``docs/client.md#the-three-consumer-types``, ``docs/protocol.md#consumer-assignment``: a Shared
subscription on **every** segment of the layout, active and sealed, reconciled as the layout changes
(new segments attached, segments pruned from the layout detached). Each acknowledgment is routed to
the segment the message came from (the message remembers its per-segment consumer; a bare
:class:`MessageId` carries the segment id). A sealed segment's consumer stays attached until the
segment leaves the layout, so a late acknowledgment or a redelivery of one of its messages always
has somewhere to go. A segment created after the consumer subscribed (a split or merge child) is
read from its start, so nothing written to it before the attach is lost for a new subscription.
"""

from __future__ import annotations

import dataclasses
import logging

from braid.client.consumer_base import ConsumerBase
from braid.client.context import ClientContext
from braid.client.layout_source import LayoutSource, LayoutSources
from braid.client.message import Message
from braid.client.schema import Schema
from braid.client.segment_consumer import SegmentConsumer, SubscriptionSpec
from braid.core.message_id import MessageId
from braid.core.topic_layout import TopicLayout
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)


class AsyncQueueConsumer(ConsumerBase):
    """Receives messages for parallel processing (create with ``AsyncClient.subscribe_queue``)."""

    kind = "queue consumer"

    def __init__(
        self,
        ctx: ClientContext,
        sources: LayoutSources,
        source: LayoutSource,
        subscription: str,
        consumer_name: str | None,
        initial_position: int,
        receiver_queue_size: int,
        negative_ack_delay: float,
        schema: Schema | None = None,
    ) -> None:
        super().__init__(ctx, sources, source, consumer_name, schema)
        self.subscription = subscription
        self._spec = SubscriptionSpec(
            subscription,
            pb.CommandSubscribe.Shared,
            self.consumer_name,
            initial_position,
            durable=True,
            receiver_queue_size=receiver_queue_size,
            negative_ack_delay=negative_ack_delay,
        )
        self._earliest_spec = dataclasses.replace(
            self._spec, initial_position=pb.CommandSubscribe.Earliest
        )
        self._initial_ids: frozenset[int] | None = None

    async def _start(self) -> None:
        layout = self._source.current
        self._initial_ids = frozenset(layout.dag.segments)
        await self._first_attaches([self._attach(sid) for sid in layout.dag.segments])

    def _attach(self, sid: int) -> SegmentConsumer:
        spec = self._spec
        if self._initial_ids is not None and sid not in self._initial_ids:
            # A segment created after this consumer subscribed (a split or merge child) holds
            # only messages newer than the subscription: read it from its start. "Latest"
            # would lose what was written between its creation and this attach whenever the
            # controller created it before this subscription's cursor reached its parents.
            spec = self._earliest_spec
        seg = self._new_segment(self._source.current.route(sid), spec)
        self._segments[sid] = seg
        return seg

    def _on_layout(self, layout: TopicLayout) -> None:
        for sid in layout.dag.segments:
            seg = self._segments.get(sid)
            if seg is None:
                self._attach(sid).start()
            else:
                seg.route = layout.route(sid)
        for sid in [s for s in self._segments if s not in layout.dag.segments]:
            seg = self._segments.pop(sid)
            self._ctx.spawn(seg.close(), f"detaching pruned segment {sid} of {self.topic}")

    def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge one message (grouped and sent shortly; never blocks).

        Raises:
            AlreadyClosedError: the consumer is closed.
            InvalidConfigurationError: not a message or id of this consumer.
        """
        self._check_open()
        seg, (ledger, entry, index, size) = self._segment_of(message)
        if seg is not None:
            seg.ack_individual(ledger, entry, index, size)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Ask for the message to be redelivered (after the negative-ack delay)."""
        self._check_open()
        seg, (ledger, entry, _index, _size) = self._segment_of(message)
        if seg is not None:
            seg.negative_ack(ledger, entry)

    async def unsubscribe(self) -> None:
        """Delete the subscription on every segment, then close."""
        await self._unsubscribe()


__all__ = ["AsyncQueueConsumer"]
