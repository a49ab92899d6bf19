"""The Checkpoint consumer: ordered reading with a client-held position (C9).

``docs/client.md#the-three-consumer-types``, ``docs/protocol.md#consumer-assignment``. No broker
cursor: one non-durable reader per segment, started from the consumer's
:class:`~braid.core.checkpoint.Checkpoint` (:func:`~braid.core.checkpoint.start_for`), and the read
position of every segment kept here. :meth:`AsyncCheckpointConsumer.checkpoint` snapshots those
positions atomically (under the delivery lock, so it sits exactly between two delivered messages)
with no broker round trip.

* **ungrouped** (default): every segment of the layout is read. Per-key order across splits and
  merges comes from gating: a segment's reader starts only once each of its ancestors still in
  the layout is *drained* - sealed, its end reported by the broker, and every message of it
  delivered - so a key's messages in a child never overtake those in its parents. A segment the
  restored checkpoint does not mention (created by a later split or merge) starts at its
  beginning.
* **grouped** (``group=...``, what PIP-460 describes: a group identifier coordinates the
  parallel instances): the topic's controller assigns segments among the group's members
  (consumer type CHECKPOINT). Each member reads its segments from its own start position and
  *reports* to the controller the sealed segments it has delivered whole (with its
  registration, and again whenever that set grows: ADR 0057); the controller hands out a child
  only once every ancestor was reported, so a key's messages are delivered parent before child
  across the whole group, as within one member. A member reports only segments it was
  assigned (a segment its checkpoint marks drained included). Needs a scalable-topic broker.

A ``persistent://`` topic is a single legacy segment: one reader, the same code.
"""

from __future__ import annotations

import logging
import uuid

from braid.client.assignment_session import AssignmentSession
from braid.client.consumer_base import ConsumerBase
from braid.client.context import ClientContext
from braid.client.errors import FeatureNotSupportedError
from braid.client.layout_source import LayoutSource, LayoutSources
from braid.client.message import Message, last_positions
from braid.client.schema import Schema
from braid.client.segment_consumer import ReaderStart, SegmentSubscriber, SubscriptionSpec
from braid.core.checkpoint import (
    DRAINED,
    LATEST_CURSOR,
    Checkpoint,
    CursorKind,
    SegmentCursor,
    StartKind,
    checkpoint_of,
    start_for,
)
from braid.core.consumer_assignment import AssignmentDiff
from braid.core.topic_layout import TopicLayout
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)


class AsyncCheckpointConsumer(ConsumerBase):
    """Reads a topic from a checkpoint (create with ``AsyncClient.create_checkpoint_consumer``)."""

    kind = "checkpoint consumer"

    def __init__(
        self,
        ctx: ClientContext,
        sources: LayoutSources,
        source: LayoutSource,
        start: Checkpoint,
        group: str | None,
        consumer_name: str | None,
        receiver_queue_size: int,
        schema: Schema | None = None,
    ) -> None:
        super().__init__(ctx, sources, source, consumer_name, schema)
        self.group = group
        self._start_checkpoint = start
        # Per segment: the position reading resumes after (None = from the beginning),
        # DRAINED, or LATEST_CURSOR until a reader started at "latest" resolves it.
        self._cursors: dict[int, SegmentCursor | None] = {}
        self._delivered_at: dict[int, tuple[int, int, int]] = {}
        self._drained: set[int] = set()
        self._assigned: set[int] | None = None
        #: Grouped: every segment ever assigned here, and the drained set last reported.
        self._ever_assigned: set[int] = set()
        self._reported: frozenset[int] = frozenset()
        self._session: AssignmentSession | None = None
        self._spec = SubscriptionSpec(
            f"braid-reader-{uuid.uuid4().hex[:12]}",
            pb.CommandSubscribe.Exclusive,
            self.consumer_name,
            durable=False,
            receiver_queue_size=receiver_queue_size,
        )

    async def _start(self) -> None:
        layout = self._source.current
        if self.group is not None:
            if layout.all_legacy:
                raise FeatureNotSupportedError(
                    f"grouped checkpoint consumers need a scalable topic; {self.topic} is a "
                    "classic topic (or the broker does not support scalable topics)"
                )
            self._assigned = set()
            self._session = AssignmentSession(
                self._ctx,
                self._source,
                self.group,
                self.consumer_name,
                pb.CHECKPOINT,
                self._apply_diff,
                drained=self._reportable,
            )
            await self._session.start()
        self._reconcile(layout)
        await self._first_attaches(list(self._segments.values()))

    # -- which segments to read ---------------------------------------------------------------

    def _plan(self, layout: TopicLayout, sid: int) -> None:
        if sid in self._cursors or sid in self._drained:
            return
        start = start_for(self._start_checkpoint, layout.dag, sid)
        if start.kind is StartKind.DRAINED:
            self._drained.add(sid)
        elif start.kind is StartKind.LATEST:
            self._cursors[sid] = LATEST_CURSOR
        elif start.kind is StartKind.AFTER:
            self._cursors[sid] = start.cursor
        else:
            self._cursors[sid] = None

    def _reconcile(self, layout: TopicLayout) -> None:
        """Attach every readable segment, detach those that left the layout or were drained."""
        dag = layout.dag
        with self._lock:
            for sid in dag.segments:
                self._plan(layout, sid)
            for sid in [s for s in self._cursors if s not in dag.segments]:
                del self._cursors[sid]
                self._delivered_at.pop(sid, None)
            self._drained &= set(dag.segments)
        for sid in dag.segments:
            if sid in self._segments or sid in self._drained:
                continue
            if self._assigned is not None and sid not in self._assigned:
                continue
            ancestors = {a for a in dag.ancestors(sid) if a in dag.segments}
            if self._assigned is not None:
                # Grouped: the controller hands out a segment once the group drained its
                # ancestors; those this member holds are gated here as ungrouped.
                ancestors &= self._assigned
            if ancestors <= self._drained:
                seg = self._new_segment(layout.route(sid), self._spec)
                self._segments[sid] = seg
                seg.start()
        for sid in [s for s in self._segments if s not in dag.segments or s in self._drained]:
            seg = self._segments.pop(sid)
            self._ctx.spawn(seg.close(), f"closing the reader of segment {sid} of {self.topic}")
        self._maybe_report()

    def _reportable(self) -> frozenset[int]:
        """Grouped: the drained segments this member may report (it was assigned them)."""
        with self._lock:
            return frozenset(self._drained & self._ever_assigned)

    def _maybe_report(self) -> None:
        """Grouped: tell the controller when the reportable drained set grew."""
        session = self._session
        if session is None:
            return
        reportable = self._reportable()
        if reportable <= self._reported:
            return
        self._reported = reportable
        self._ctx.spawn(session.report(), f"reporting drained segments of {self.topic}")

    def _on_layout(self, layout: TopicLayout) -> None:
        self._reconcile(layout)

    def _apply_diff(self, diff: AssignmentDiff) -> None:
        assert self._assigned is not None
        for sid in diff.detach:
            self._assigned.discard(sid)
            seg = self._segments.pop(sid, None)
            if seg is not None:
                self._purge(seg)
                self._ctx.spawn(seg.close(), f"closing the reader of segment {sid}")
        for assigned in diff.attach + diff.reattach:
            self._assigned.add(assigned.segment_id)
            self._ever_assigned.add(assigned.segment_id)
        if self._source.current is not None:
            self._reconcile(self._source.current)

    # -- reader positions ---------------------------------------------------------------------

    def _reader_start(self, seg: SegmentSubscriber) -> ReaderStart:
        sid = seg.segment_id
        with self._lock:
            delivered = self._delivered_at.get(sid)
            if delivered is not None:
                return ReaderStart("after", SegmentCursor.after(*delivered))
            cursor = self._cursors.get(sid)
        if cursor is None:
            return ReaderStart("beginning")
        if cursor.kind is CursorKind.LATEST:
            return ReaderStart("latest")
        return ReaderStart("after", cursor)

    def _latest_resolved(self, seg: SegmentSubscriber, cursor: SegmentCursor | None) -> None:
        with self._lock:
            if self._cursors.get(seg.segment_id) is LATEST_CURSOR:
                self._cursors[seg.segment_id] = cursor

    def _record_deliveries(self, messages: list[Message]) -> None:
        self._delivered_at.update(last_positions(messages))

    def _segment_drained(self, seg: SegmentSubscriber) -> None:
        layout = self._source.current
        sid = seg.segment_id
        if layout.is_active(sid) or self._segments.get(sid) is not seg:
            return  # the end of an active segment is not final (e.g. a terminated classic topic)
        with self._lock:
            self._drained.add(sid)
        self._reconcile(layout)

    def checkpoint(self) -> Checkpoint:
        """An atomic snapshot of the read position across every segment (no broker round trip).

        Restoring it (``create_checkpoint_consumer(topic, start=cp)``) resumes with exactly the
        messages after the ones delivered so far, also after later splits and merges.
        """
        self._check_open()
        layout = self._source.current
        cursors: dict[int, SegmentCursor] = {}
        with self._lock:
            for sid in layout.dag.segments:
                if sid in self._drained:
                    cursors[sid] = DRAINED
                    continue
                delivered = self._delivered_at.get(sid)
                if delivered is not None:
                    cursors[sid] = SegmentCursor.after(*delivered)
                    continue
                planned = self._cursors.get(sid)
                if planned is not None:
                    cursors[sid] = planned
        return checkpoint_of(layout.epoch, cursors)

    async def _before_close(self) -> None:
        if self._session is not None:
            await self._session.close()


__all__ = ["AsyncCheckpointConsumer"]
