"""Wire <-> model conversion of the scalable-topic structures the client receives.

``ScalableTopicDAG`` -> :class:`~braid.core.topic_layout.TopicLayout` and
``ScalableConsumerAssignment`` -> :class:`~braid.core.consumer_assignment.Assignment`. The DAG is
read by the one codec broker and client share (:class:`braid.protocol.dag.ScalableTopicDag`);
this module only adds the client's view of it, a :class:`~braid.core.topic_layout.SegmentRoute`
per segment. The model types validate everything (tiling, DAG edges, epochs, names), so a broker
that sends a broken layout is refused here with :class:`~braid.core.layout.CorruptLayout` (an
``InvalidInputError``) instead of being routed on.
"""

from __future__ import annotations

from braid.core.consumer_assignment import AssignedSegment, Assignment
from braid.core.errors import InvalidInputError
from braid.core.ranges import HashRange
from braid.core.segment_info import CorruptLayout
from braid.core.topic_layout import SegmentRoute, TopicLayout, segment_topic_name
from braid.protocol.dag import ScalableTopicDag
from braid.protocol.generated import PulsarApi_pb2 as pb


def layout_from_dag(topic: str, dag: pb.ScalableTopicDAG, *, tls: bool = False) -> TopicLayout:
    """The :class:`TopicLayout` of ``topic`` that ``dag`` describes.

    A managed segment routes to its ``segment://`` name, a legacy one to the ``persistent://``
    topic it wraps. A TLS client (``tls``) routes to the DAG's ``pulsar+ssl://`` URLs; a segment
    whose broker has none gets no URL (it is looked up, and the lookup insists on TLS).

    Raises:
        CorruptLayout: the DAG breaks a layout invariant or a name does not fit.
    """
    try:
        model = ScalableTopicDag.from_proto(dag)
        layout = model.layout
        brokers = model.brokers
        routes: dict[int, SegmentRoute] = {}
        for segment in model.segments:
            sid = segment.info.segment_id
            legacy = segment.legacy_topic_name
            broker = brokers.get(sid)
            routes[sid] = SegmentRoute(
                sid,
                legacy if legacy is not None else segment_topic_name(topic, layout, sid),
                legacy=legacy is not None,
                broker_url=_url(broker.broker_url, broker.broker_url_tls, tls)
                if broker is not None
                else None,
                entry_bucket_splits=segment.entry_bucket_splits,
            )
        controller = _url(model.controller_broker_url, model.controller_broker_url_tls, tls)
        return TopicLayout(topic, layout, routes, controller_broker_url=controller)
    except CorruptLayout:
        raise
    except InvalidInputError as exc:
        raise CorruptLayout(f"layout of {topic} (epoch {dag.epoch}) is invalid: {exc}") from exc


def _url(plain: str | None, secure: str | None, tls: bool) -> str | None:
    return secure if tls else plain


def assignment_from_pb(assignment: pb.ScalableConsumerAssignment, tls: bool = False) -> Assignment:
    """The :class:`Assignment` a controller sent; a TLS client (``tls``) takes the segments'
    ``pulsar+ssl://`` broker URLs, and a segment whose broker has none gets no URL (looked up).

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
                s.paused,
                _url(
                    s.broker_url if s.HasField("broker_url") else None,
                    s.broker_url_tls if s.HasField("broker_url_tls") else None,
                    tls,
                ),
            )
            for s in assignment.segments
        ],
    )


def dag_from_layout(layout: TopicLayout) -> pb.ScalableTopicDAG:
    """The wire form of ``layout`` (tests and tools; the inverse of :func:`layout_from_dag`)."""
    routes = layout.routes.values()
    return ScalableTopicDag.of_layout(
        layout.dag,
        segment_brokers={r.segment_id: r.broker_url for r in routes if r.broker_url},
        controller_broker_url=layout.controller_broker_url,
        legacy_topic_names={r.segment_id: r.topic for r in routes if r.legacy},
        entry_bucket_splits={r.segment_id: r.entry_bucket_splits for r in routes},
    ).to_proto()


__all__ = ["assignment_from_pb", "dag_from_layout", "layout_from_dag"]
