"""The Queue consumer: parallel, no key affinity, individual and negative acks (C8).

``docs/client.md#the-three-consumer-types``, ``docs/protocol.md#consumer-assignment``: a Shared
subscription on **every** segment of the layout, active and sealed, reconciled as the layout changes
(new segments attached, segments pruned from the layout detached). Each acknowledgment is routed to
the segment the message came from (the message remembers its per-segment consumer; a bare
:class:`MessageId` carries the segment id). A sealed segment's consumer stays attached until the
segment leaves the layout, so a late acknowledgment or a redelivery of one of its messages always
has somewhere to go. A segment created after the consumer subscribed (a split or merge child) is
read from its start, so nothing written to it before the attach is lost for a new subscription.

What a ``persistent://`` Shared subscription gives the official clients, this consumer gives on
``topic://`` and ``persistent://`` alike
(``docs/client.md#queue-parity-with-shared-subscriptions``): negative acks, an **ack timeout**
(:mod:`braid.client.ack_timeout`), redelivery counts (the broker's, per segment),
**dead-letter and retry-letter topics** (:mod:`braid.client.dead_letter`; the retry topic is
read by an inner Queue consumer feeding this one's receive queue), and delayed delivery (the
producer's ``deliver_after`` / ``deliver_at``, held by each segment's broker-side dispatcher).
"""

from __future__ import annotations

import dataclasses
import logging

from braid.client.ack_timeout import Key, UnackedTracker
from braid.client.consumer_base import ConsumerBase
from braid.client.context import ClientContext
from braid.client.dead_letter import DeadLetters
from braid.client.errors import InvalidConfigurationError
from braid.client.layout_source import LayoutSource, LayoutSources
from braid.client.message import Message, delivered_by, position_of
from braid.client.schema import Schema
from braid.client.segment_consumer import SegmentConsumer, SubscriptionSpec
from braid.client.transaction import AsyncTransaction
from braid.core.errors import BraidError
from braid.core.message_id import MessageId, message_position
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
        *,
        ack_timeout: float = 0.0,
        dead_letters: DeadLetters | None = None,
    ) -> None:
        super().__init__(ctx, sources, source, consumer_name, schema)
        self.subscription = subscription
        self._tracker = (
            UnackedTracker(ctx.loop, ack_timeout, self._on_ack_timeout) if ack_timeout else None
        )
        self._dead_letters = dead_letters
        #: Delivered messages redelivered ``max_redeliver_count`` times (dead-lettered next).
        self._exhausted: dict[Key, Message] = {}
        #: The consumer of the retry-letter topic (``retry_enable``), feeding this one.
        self._retry: AsyncQueueConsumer | None = None
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
        if self._tracker is not None:
            self._tracker.start()

    async def _start_retry(self, retry: AsyncQueueConsumer) -> None:
        """Read the retry-letter topic with ``retry`` (not started), into this consumer."""
        retry._share_delivery_with(self)
        try:
            await retry._start()
        except BaseException:
            await retry.close()
            raise
        self._retry = retry

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

    def acknowledge(
        self, message: Message | MessageId, txn: AsyncTransaction | None = None
    ) -> None:
        """Acknowledge one message (grouped and sent shortly; never blocks). In ``txn``: held
        by the broker until the transaction ends (a commit applies it, an abort delivers the
        message again); sent at once, and ``txn.commit()`` waits for its answer.

        Raises:
            AlreadyClosedError: the consumer is closed.
            InvalidConfigurationError: not a message or id of this consumer.
            TransactionStateError: ``txn`` is not open.
        """
        self._check_open()
        if txn is not None:
            if self._retry is not None and self._retry_owns(message, self._key(message)):
                self._retry.acknowledge(message, txn)
                return
            seg, position = self._segment_of(message)
            self._ack_in_transaction(seg, txn, position, cumulative=False)
            self._forget(message)
            return
        key = self._forget(message)
        if key is not None and self._exhausted:
            self._exhausted.pop(key, None)
        retry = self._retry
        if retry is not None and self._retry_owns(message, key):
            retry.acknowledge(message)
            return
        seg, (ledger, entry, index, size) = self._segment_of(message)
        if seg is not None:
            seg.ack_individual(ledger, entry, index, size)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Ask for the message to be redelivered (after the negative-ack delay); one that was
        redelivered ``max_redeliver_count`` times goes to the dead-letter topic instead."""
        self._check_open()
        key = self._forget(message)
        exhausted = self._exhausted.pop(key, None) if key is not None else None
        if exhausted is not None:
            self._spawn_dead_letter(exhausted)
            return
        retry = self._retry
        if retry is not None and self._retry_owns(message, key):
            retry.negative_acknowledge(message)
            return
        seg, (ledger, entry, _index, _size) = self._segment_of(message)
        if seg is not None:
            seg.negative_ack(ledger, entry)

    async def reconsume_later(self, message: Message, delay: float) -> None:
        """Have ``message`` delivered again after ``delay`` seconds through the retry-letter
        topic (``retry_enable=True``); after ``max_redeliver_count`` times it goes to the
        dead-letter topic. The original is acknowledged once the copy is stored.

        Raises:
            InvalidConfigurationError: retry is not enabled, or ``delay`` < 0.
            BraidError: the copy could not be stored (the original stays unacknowledged).
        """
        self._check_open()
        if self._retry is None or self._dead_letters is None:
            raise InvalidConfigurationError(
                "reconsume_later needs subscribe_queue(retry_enable=True)"
            )
        if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
            raise InvalidConfigurationError(f"delay must be seconds >= 0: {delay!r}")
        if not isinstance(message, Message):
            raise InvalidConfigurationError("reconsume_later takes a received Message")
        await self._dead_letters.retry_later(message, float(delay))
        self.acknowledge(message)

    # -- ack timeout and dead letters ---------------------------------------------------------

    @staticmethod
    def _key(message: Message | MessageId) -> Key | None:
        if isinstance(message, Message):
            ledger, entry, index, _size = position_of(message)
            return (ledger, entry, index)
        position = message_position(message) if isinstance(message, MessageId) else None
        if position is None:
            return None
        return (position.ledger_id, position.entry_id, position.batch_index)

    def _forget(self, message: Message | MessageId) -> Key | None:
        key = self._key(message)
        if key is not None and self._tracker is not None:
            self._tracker.forget(key)
        return key

    def _retry_owns(self, message: Message | MessageId, key: Key | None) -> bool:
        retry = self._retry
        assert retry is not None
        if isinstance(message, Message):
            seg = delivered_by(message)
            return seg is not None and seg.parent is retry._as_parent
        return False

    def _record_deliveries(self, messages: list[Message]) -> None:
        tracker, dead = self._tracker, self._dead_letters
        if tracker is None and dead is None:
            return
        keyed = [(self._key(m), m) for m in messages]
        if tracker is not None:
            tracker.add((k, m) for k, m in keyed if k is not None)
        if dead is not None:
            for key, message in keyed:
                if key is not None and dead.exhausted(message):
                    self._exhausted[key] = message

    def _on_ack_timeout(self, messages: list[Message]) -> None:
        """Messages whose ack timeout passed: redeliver them now (or dead-letter them)."""
        by_segment: dict[SegmentConsumer, dict[tuple[int, int], None]] = {}
        for message in messages:
            key = self._key(message)
            exhausted = self._exhausted.pop(key, None) if key is not None else None
            if exhausted is not None:
                self._spawn_dead_letter(exhausted)
                continue
            seg = delivered_by(message)
            if seg is None:
                continue
            if seg.closed:  # re-attached since: the same segment's current consumer
                owner = self._retry if self._retry_owns(message, key) else self
                seg = owner._segments.get(seg.segment_id) if owner is not None else None
                if seg is None:
                    continue
            ledger, entry, _index, _size = position_of(message)
            by_segment.setdefault(seg, {})[(ledger, entry)] = None  # an entry once per batch
        for seg, entries in by_segment.items():
            log.debug("ack timeout: redelivering %d entries of %s", len(entries), seg.route.topic)
            seg.redeliver(list(entries))

    def _spawn_dead_letter(self, message: Message) -> None:
        """Dead-letter ``message`` in the background (from any thread)."""
        self._call_in_loop(self._ctx.spawn, self._dead_letter(message), "dead-lettering")

    async def _dead_letter(self, message: Message) -> None:
        dead = self._dead_letters
        assert dead is not None
        try:
            await dead.dead_letter(message)
        except BraidError as exc:
            log.warning(
                "dead-lettering %s of %s failed (%s): redelivering it",
                message.message_id,
                self.topic,
                exc,
            )
            retry = self._retry
            owner = retry if retry is not None and self._retry_owns(message, None) else self
            if not self.closed:
                seg, (ledger, entry, _i, _s) = owner._segment_of(message)
                if seg is not None:
                    seg.negative_ack(ledger, entry)
            return
        if not self.closed:
            self.acknowledge(message)

    async def _before_close(self) -> None:
        if self._tracker is not None:
            self._tracker.close()
        retry, self._retry = self._retry, None
        if retry is not None:
            await retry.close()
        if self._dead_letters is not None:
            await self._dead_letters.close()

    async def unsubscribe(self) -> None:
        """Delete the subscription on every segment (and of the retry-letter topic), then
        close."""
        retry = self._retry
        if retry is not None:
            self._retry = None
            await retry.unsubscribe()
        await self._unsubscribe()


__all__ = ["AsyncQueueConsumer"]
