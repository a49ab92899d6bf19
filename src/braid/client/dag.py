"""Wire <-> model conversion of the scalable-topic structures the client receives.

``ScalableTopicDAG`` -> :class:`~braid.core.topic_layout.TopicLayout` and
``ScalableConsumerAssignment`` -> :class:`~braid.core.consumer_assignment.Assignment`. The model
types validate everything (tiling, DAG edges, epochs, names), so a broker that sends a broken
layout is refused here with :class:`~braid.core.layout.CorruptLayout` (an ``InvalidInputError``)
instead of being routed on.
"""

from __future__ import annotations

from braid.core.consumer_assignment import AssignedSegment, Assignment
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.ranges import HashRange
from braid.core.segment_info import CorruptLayout, SegmentInfo, SegmentState
from braid.core.topic_layout import SegmentRoute, TopicLayout, segment_topic_name
from braid.protocol.generated import PulsarApi_pb2 as pb


def layout_from_dag(topic: str, dag: pb.ScalableTopicDAG) -> TopicLayout:
    """The :class:`TopicLayout` of ``topic`` that ``dag`` describes.

    Raises:
        CorruptLayout: the DAG breaks a layout invariant or a name does not fit.
    """
    try:
        segments: dict[int, SegmentInfo] = {}
        for s in dag.segments:
            sealed = s.state == pb.SEALED
            segments[s.segment_id] = SegmentInfo(
                segment_id=s.segment_id,
                hash_range=HashRange(s.hash_start, s.hash_end),
                state=SegmentState.SEALED if sealed else SegmentState.ACTIVE,
                parent_ids=tuple(s.parent_ids),
                child_ids=tuple(s.child_ids),
                created_at_epoch=s.created_at_epoch,
                sealed_at_epoch=s.sealed_at_epoch if sealed else 0,
                created_at_ms=s.created_at_ms,
                sealed_at_ms=s.sealed_at_ms if sealed else 0,
            )
        next_id = max(segments) + 1 if segments else 0
        layout = SegmentLayout(dag.epoch, next_id, segments)
        brokers = {b.segment_id: b.broker_url for b in dag.segment_brokers}
        routes: dict[int, SegmentRoute] = {}
        for s in dag.segments:
            legacy = s.HasField("legacy_topic_name") and bool(s.legacy_topic_name)
            sid = s.segment_id
            name = s.legacy_topic_name if legacy else segment_topic_name(topic, layout, sid)
            routes[s.segment_id] = SegmentRoute(
                s.segment_id,
                name,
                legacy=legacy,
                broker_url=brokers.get(s.segment_id) or None,
                entry_bucket_splits=tuple(s.entry_bucket_splits),
            )
        controller = dag.controller_broker_url if dag.HasField("controller_broker_url") else None
        return TopicLayout(topic, layout, routes, controller_broker_url=controller or None)
    except CorruptLayout:
        raise
    except InvalidInputError as exc:
        raise CorruptLayout(f"layout of {topic} (epoch {dag.epoch}) is invalid: {exc}") from exc


def assignment_from_pb(assignment: pb.ScalableConsumerAssignment) -> Assignment:
    """The :class:`Assignment` a controller sent.

    Raises:
        InvalidInputError: a range is invalid or a segment is listed twice.
    """
    return Assignment.of(
        assignment.layout_epoch,
        [
            AssignedSegment(
                s.segment_id,
                HashRange(s.hash_start, s.hash_end),
                s.segment_topic,
                tuple(HashRange(r.start, r.end) for r in s.bucket_ranges),
            )
            for s in assignment.segments
        ],
    )


def dag_from_layout(layout: TopicLayout) -> pb.ScalableTopicDAG:
    """The wire form of ``layout`` (tests and tools; the inverse of :func:`layout_from_dag`)."""
    dag = pb.ScalableTopicDAG(epoch=layout.epoch)
    for sid, info in layout.dag.segments.items():
        route = layout.routes[sid]
        seg = dag.segments.add(
            segment_id=sid,
            hash_start=info.hash_range.start,
            hash_end=info.hash_range.end,
            state=pb.ACTIVE if info.is_active else pb.SEALED,
            parent_ids=list(info.parent_ids),
            child_ids=list(info.child_ids),
            created_at_epoch=info.created_at_epoch,
            created_at_ms=info.created_at_ms,
            entry_bucket_splits=list(route.entry_bucket_splits),
        )
        if not info.is_active:
            seg.sealed_at_epoch = info.sealed_at_epoch
            seg.sealed_at_ms = info.sealed_at_ms
        if route.legacy:
            seg.legacy_topic_name = route.topic
        if route.broker_url:
            dag.segment_brokers.add(segment_id=sid, broker_url=route.broker_url)
    if layout.controller_broker_url:
        dag.controller_broker_url = layout.controller_broker_url
    return dag


__all__ = ["assignment_from_pb", "dag_from_layout", "layout_from_dag"]
