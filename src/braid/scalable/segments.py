"""The Segments admin seam (PIP-468 "Segment Topic Management"): what the controller asks of the
broker that owns a ``segment://`` topic.

The controller never touches a segment's managed ledger itself. It creates segment topics with
their subscription cursors, terminates (seals) them, deletes them, propagates subscriptions, seeks
them and asks whether a subscription has drained a sealed segment — always through
:class:`SegmentAdmin`. A legacy root of a migrated topic (ADR 0063) is addressed by the
``persistent://`` partition it wraps (:data:`SegmentTopic`). Upstream routes these calls over the
Segments REST API to whichever broker owns the segment; :class:`LocalSegmentAdmin` calls the
in-process :class:`~braid.broker.service.BrokerService` (``braid standalone``) and
``segment_routing.RoutedSegmentAdmin`` routes to the owner (``braid broker``).

Drained (per subscription, ``SegmentDrainChecker`` upstream): the segment is terminated and the
subscription's cursor on it has nothing left — no backlog. A sealed segment on which the
subscription has no cursor yet is *not* drained (its consumer creates the cursor when it attaches);
a segment whose topic is gone (pruned after retention) counts as drained.

Deduplication state across a split or merge (ADR 0055): once the parents are sealed the
controller reads each one's final state (:meth:`SegmentAdmin.sequence_ids`) and hands every child
what it inherits (:meth:`SegmentAdmin.inherit_sequence_ids`) before the layout names the child.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, TypeAlias

from braid.broker.errors import SubscriptionNotFound, TopicNotFound
from braid.core.inherited_sequence_ids import InheritedSequenceIds, SegmentSequenceIds
from braid.core.names import SegmentTopicName, TopicName

if TYPE_CHECKING:
    from braid.broker.service import BrokerService

log = logging.getLogger(__name__)

#: The topic serving a segment: its ``segment://`` topic, or for a legacy root of a migrated topic
#: (ADR 0063) the classic ``persistent://`` partition it wraps.
SegmentTopic: TypeAlias = SegmentTopicName | TopicName


class SegmentAdmin(Protocol):
    """Operations on segment topics, wherever they are served."""

    async def create_segment(self, segment: SegmentTopic, subscriptions: Iterable[str]) -> None:
        """Create the segment topic (if missing) with a cursor at its start for each subscription.

        Idempotent: an existing topic keeps its data; missing cursors are added at the earliest
        position (the topic of a segment that is not yet published is empty).
        """
        ...

    async def terminate_segment(self, segment: SegmentTopic) -> None:
        """Seal the segment: producers get ``TopicTerminated``. Idempotent.

        Raises:
            TopicNotFound: the segment topic does not exist.
        """
        ...

    async def delete_segment(self, segment: SegmentTopic) -> None:
        """Delete the segment topic and its data; a missing topic is not an error."""
        ...

    async def segment_exists(self, segment: SegmentTopic) -> bool: ...

    async def is_terminated(self, segment: SegmentTopic) -> bool:
        """Whether the segment topic exists and is sealed."""
        ...

    async def list_subscriptions(self, segment: SegmentTopic) -> list[str]:
        """The subscriptions (durable cursors) on the segment; ``[]`` if it does not exist."""
        ...

    async def create_subscription(
        self, segment: SegmentTopic, subscription: str, *, earliest: bool
    ) -> None:
        """Create a durable cursor (idempotent: an existing one keeps its position)."""
        ...

    async def delete_subscription(self, segment: SegmentTopic, subscription: str) -> None:
        """Delete the subscription's cursor; missing topic or cursor is fine."""
        ...

    async def is_drained(self, segment: SegmentTopic, subscription: str) -> bool:
        """Whether ``subscription`` has consumed all of the sealed segment (see module doc)."""
        ...

    async def seek_subscription(
        self, segment: SegmentTopic, subscription: str, timestamp_ms: int
    ) -> None:
        """Move the cursor to the first entry published at or after ``timestamp_ms``; a missing
        cursor is created there."""
        ...

    async def stats(self, segment: SegmentTopic) -> dict[str, object] | None:
        """The segment topic's stats, or ``None`` if it does not exist."""
        ...

    async def broker_url(self, segment: SegmentTopic) -> str:
        """The service URL of the broker that serves the segment (what DAG watchers are told)."""
        ...

    async def sequence_ids(self, segment: SegmentTopic) -> SegmentSequenceIds:
        """The sealed segment's deduplication state (empty without deduplication or topic)."""
        ...

    async def inherit_sequence_ids(
        self, segment: SegmentTopic, inherited: InheritedSequenceIds
    ) -> None:
        """Store, durably, what the segment inherits from its parents (idempotent; nothing to do
        when the segment does not deduplicate).

        Raises:
            TopicNotFound: the segment topic does not exist.
        """
        ...

    async def last_confirmed(self, segment: SegmentTopic) -> tuple[int, int] | None:
        """``(ledger, entry)`` of the segment's last stored entry - where a reader started at
        "latest" starts after (its cursor's mark-delete position) - or ``None`` when nothing is
        stored or the segment topic does not exist."""
        ...


class LocalSegmentAdmin:
    """:class:`SegmentAdmin` over the broker running in this process."""

    def __init__(self, broker: BrokerService) -> None:
        self._broker = broker

    async def create_segment(self, segment: SegmentTopic, subscriptions: Iterable[str]) -> None:
        topic = await self._broker.get_or_create_topic(str(segment), create=True)
        for name in subscriptions:
            await topic.create_subscription(name, earliest=True)

    async def terminate_segment(self, segment: SegmentTopic) -> None:
        await self._broker.terminate_topic(str(segment))

    async def delete_segment(self, segment: SegmentTopic) -> None:
        # The layer above decides whether clients may be disconnected (the scalable topic's
        # delete refuses while in use; pruning removes segments nobody reads any more).
        try:
            await self._broker.delete_topic(str(segment), force=True)
        except TopicNotFound:
            pass

    async def segment_exists(self, segment: SegmentTopic) -> bool:
        return await self._broker.topic_exists(str(segment))

    async def is_terminated(self, segment: SegmentTopic) -> bool:
        try:
            topic = await self._broker.get_or_create_topic(str(segment), create=False)
        except TopicNotFound:
            return False
        return topic.is_terminated

    async def list_subscriptions(self, segment: SegmentTopic) -> list[str]:
        try:
            topic = await self._broker.get_or_create_topic(str(segment), create=False)
        except TopicNotFound:
            return []
        return sorted(name for name, sub in topic.subscriptions.items() if sub.durable)

    async def create_subscription(
        self, segment: SegmentTopic, subscription: str, *, earliest: bool
    ) -> None:
        topic = await self._broker.get_or_create_topic(str(segment), create=False)
        await topic.create_subscription(subscription, earliest=earliest)

    async def delete_subscription(self, segment: SegmentTopic, subscription: str) -> None:
        try:
            topic = await self._broker.get_or_create_topic(str(segment), create=False)
            await topic.delete_subscription(subscription)
        except (TopicNotFound, SubscriptionNotFound):
            pass

    async def is_drained(self, segment: SegmentTopic, subscription: str) -> bool:
        try:
            topic = await self._broker.get_or_create_topic(str(segment), create=False)
        except TopicNotFound:
            return True
        if not topic.is_terminated:
            return False
        sub = topic.subscriptions.get(subscription)
        if sub is None:
            # No cursor: drained only if there is nothing at all to read.
            return topic.ledger.number_of_entries == 0
        if sub.cursor.backlog() > 0:
            return False
        # Drained means drained on disk: the last acknowledgement counts in memory before its
        # write lands, and children handed out before it would come first after a crash that
        # takes the write with it (the parent's tail redelivered after them).
        await sub.cursor.write_state()
        return sub.cursor.backlog() == 0

    async def seek_subscription(
        self, segment: SegmentTopic, subscription: str, timestamp_ms: int
    ) -> None:
        topic = await self._broker.get_or_create_topic(str(segment), create=False)
        position = await topic.find_position_by_publish_time(timestamp_ms)
        if subscription not in topic.subscriptions:
            await topic.create_subscription(subscription, earliest=True)
        await topic.subscriptions[subscription].reset_cursor(position)

    async def stats(self, segment: SegmentTopic) -> dict[str, object] | None:
        try:
            topic = await self._broker.get_or_create_topic(str(segment), create=False)
        except TopicNotFound:
            return None
        return topic.stats()

    async def broker_url(self, segment: SegmentTopic) -> str:
        # What a LOOKUP of the segment answers (the first advertised listener, if any).
        return self._broker.lookup_url()

    async def sequence_ids(self, segment: SegmentTopic) -> SegmentSequenceIds:
        try:
            topic = await self._broker.get_or_create_topic(str(segment), create=False)
        except TopicNotFound:
            return SegmentSequenceIds()
        return topic.dedup.export() if topic.dedup is not None else SegmentSequenceIds()

    async def inherit_sequence_ids(
        self, segment: SegmentTopic, inherited: InheritedSequenceIds
    ) -> None:
        topic = await self._broker.get_or_create_topic(str(segment), create=False)
        if topic.dedup is not None:
            await topic.dedup.inherit(inherited)

    async def last_confirmed(self, segment: SegmentTopic) -> tuple[int, int] | None:
        try:
            topic = await self._broker.get_or_create_topic(str(segment), create=False)
        except TopicNotFound:
            return None
        last = topic.ledger.last_confirmed_position
        return None if last.ledger_id < 0 or last.entry_id < 0 else (last.ledger_id, last.entry_id)


__all__ = ["LocalSegmentAdmin", "SegmentAdmin", "SegmentTopic"]
