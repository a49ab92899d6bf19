"""The scalable-topic code paths that wait for a broker advertising ``supports_scalable_topics``
(phase 2): DAG conversion, the DAG-watch session's handling of pushed layouts, and the
controller registration's handling of assignments. Each is driven here with real wire commands
(``braid.protocol.commands``) through the handler methods a connection calls; no socket."""

from __future__ import annotations

import pytest

from braid.client.assignment_session import AssignmentSession
from braid.client.context import ClientContext
from braid.client.dag import assignment_from_pb, dag_from_layout, layout_from_dag
from braid.client.errors import InvalidTopicNameError, NotFoundError
from braid.client.layout_source import DagWatchLayoutSource, parse_topic
from braid.client.settings import ClientSettings, parse_service_url
from braid.core.consumer_assignment import AssignmentDiff
from braid.core.layout import SegmentLayout
from braid.core.routing import SegmentRouter
from braid.core.segment_info import CorruptLayout
from braid.core.topic_layout import SegmentRoute, TopicLayout, segment_topic_name
from braid.protocol import commands, pb
from braid.scalable.coordinator import AssignedSegment as ControllerSegment
from braid.scalable.coordinator import ConsumerAssignmentView
from braid.scalable.handlers import assignment_to_proto
from braid.scalable.segment_brokers import SegmentBroker

TOPIC = "topic://public/default/orders"


def _managed(dag: SegmentLayout, broker: str | None = "pulsar://b1:6650") -> TopicLayout:
    routes = {
        sid: SegmentRoute(sid, segment_topic_name(TOPIC, dag, sid), broker_url=broker)
        for sid in dag.segments
    }
    return TopicLayout(TOPIC, dag, routes, controller_broker_url="pulsar://ctl:6650")


def test_dag_round_trip_keeps_segments_routes_and_controller() -> None:
    layout = _managed(SegmentLayout.initial(2).split_segment(0, now_ms=5).merge_segments([2, 3]))
    back = layout_from_dag(TOPIC, dag_from_layout(layout))
    assert back == layout
    assert back.routes == layout.routes and back.controller_broker_url == "pulsar://ctl:6650"
    assert back.route(4).topic == "segment://public/default/orders/0000-7fff-4"


def test_a_legacy_dag_routes_to_the_wrapped_topic_with_mod_n() -> None:
    synthetic = TopicLayout.synthetic("persistent://public/default/old", 3)
    back = layout_from_dag("persistent://public/default/old", dag_from_layout(synthetic))
    assert back.all_legacy and back.route(1).topic.endswith("old-partition-1")
    assert SegmentRouter(back).route("key-0") == 2  # murmur3("key-0") & 0x7fffffff % 3


def test_a_dag_that_does_not_tile_the_ring_is_refused() -> None:
    dag = pb.ScalableTopicDAG(epoch=1)
    dag.segments.add(
        segment_id=0,
        hash_start=0,
        hash_end=0x7FFF,
        state=pb.ACTIVE,
        created_at_epoch=0,
        created_at_ms=0,
    )
    with pytest.raises(CorruptLayout):
        layout_from_dag(TOPIC, dag)


def test_assignment_from_the_wire() -> None:
    wire = pb.ScalableConsumerAssignment(layout_epoch=4)
    seg = wire.segments.add(
        segment_id=2, hash_start=0, hash_end=0x3FFF, segment_topic="segment://x"
    )
    seg.bucket_ranges.add(start=0, end=0x7FFF)
    seg.bucket_ranges.add(start=0x8000, end=0xFFFF)
    assignment = assignment_from_pb(wire)
    assert assignment.layout_epoch == 4 and assignment.segments[2].shared


def test_an_assignment_names_each_segments_broker_for_the_clients_scheme() -> None:
    # ADR 0073: what the controller sends (its own builder), over the wire bytes.
    view = ConsumerAssignmentView(
        7,
        (
            ControllerSegment(1, 0, 0x7FFF, "segment://a", broker=SegmentBroker("pulsar://b1:1")),
            ControllerSegment(
                2, 0x8000, 0xFFFF, "segment://b", True, (), SegmentBroker("pulsar://b2:1", "x")
            ),
            ControllerSegment(3, 0, 0x7FFF, "segment://c"),
        ),
    )
    wire = pb.ScalableConsumerAssignment.FromString(assignment_to_proto(view).SerializeToString())
    plain, tls = assignment_from_pb(wire), assignment_from_pb(wire, tls=True)
    assert [s.broker_url for _, s in sorted(plain.segments.items())] == [
        "pulsar://b1:1",
        "pulsar://b2:1",
        None,
    ]
    # A TLS client takes the pulsar+ssl:// URL; a broker without one is looked up.
    assert [s.broker_url for _, s in sorted(tls.segments.items())] == [None, "x", None]
    assert tls.segments[2].paused and plain == tls  # the URL is advice, not what is assigned


def _ctx() -> ClientContext:
    return ClientContext(ClientSettings(parse_service_url("pulsar://127.0.0.1:1")))


async def test_dag_watch_applies_pushed_layouts_by_epoch_only() -> None:
    ctx = _ctx()
    source = DagWatchLayoutSource(ctx, parse_topic(TOPIC))
    source._first = ctx.loop.create_future()
    seen: list[int] = []
    source.add_listener(lambda layout: seen.append(layout.epoch))
    base = SegmentLayout.initial(1)
    e1 = dag_from_layout(_managed(base.split_segment(0)))
    e2 = dag_from_layout(_managed(base.split_segment(0).split_segment(1)))
    resolved = "topic://public/default/orders"
    source.on_layout_update(
        commands.scalable_topic_update(7, e1, resolved_topic_name=resolved).scalableTopicUpdate
    )
    assert source._first.done() and source.current.epoch == 1
    source.on_layout_update(commands.scalable_topic_update(7, e2).scalableTopicUpdate)
    source.on_layout_update(commands.scalable_topic_update(7, e1).scalableTopicUpdate)  # stale
    assert seen == [1, 2] and source.current.epoch == 2
    newer = await source.wait_newer(1, 0)
    assert newer is not None and newer.epoch == 2
    assert await source.wait_newer(2, 0.01) is None
    bad = pb.ScalableTopicDAG(epoch=3)  # no segments: refused, the current layout stays
    source.on_layout_update(commands.scalable_topic_update(7, bad).scalableTopicUpdate)
    assert source.current.epoch == 2
    await ctx.close()


async def test_dag_watch_establishment_error_fails_the_first_wait() -> None:
    ctx = _ctx()
    source = DagWatchLayoutSource(ctx, parse_topic(TOPIC))
    source._first = ctx.loop.create_future()
    update = commands.scalable_topic_update(1, error=pb.TopicNotFound, message="no such topic")
    source.on_layout_update(update.scalableTopicUpdate)
    with pytest.raises(NotFoundError):
        await source._first
    await ctx.close()


async def test_assignment_updates_apply_by_layout_epoch_and_leave_is_clean() -> None:
    ctx = _ctx()
    source = DagWatchLayoutSource(ctx, parse_topic(TOPIC))
    source.apply(_managed(SegmentLayout.initial(2)))
    diffs: list[AssignmentDiff] = []
    session = AssignmentSession(ctx, source, "sub", "c1", pb.STREAM, diffs.append)
    session.state.registering()
    first = pb.ScalableConsumerAssignment(layout_epoch=1)
    first.segments.add(segment_id=0, hash_start=0, hash_end=0x7FFF, segment_topic="segment://a")
    diff = session.state.registered(assignment_from_pb(first))
    assert diff is not None and [s.segment_id for s in diff.attach] == [0]
    update = pb.ScalableConsumerAssignment(layout_epoch=2)
    update.segments.add(
        segment_id=1, hash_start=0x8000, hash_end=0xFFFF, segment_topic="segment://b"
    )
    session.on_assignment_update(
        commands.scalable_topic_assignment_update(
            session.consumer_id, update
        ).scalableTopicAssignmentUpdate
    )
    session.on_assignment_update(
        commands.scalable_topic_assignment_update(
            session.consumer_id, first
        ).scalableTopicAssignmentUpdate
    )  # stale
    assert len(diffs) == 1 and diffs[0].detach == (0,) and diffs[0].attach[0].segment_id == 1
    await session.close()  # not connected: no unsubscribe to send, still closes
    assert session.state.phase.value == "closed"
    await ctx.close()


def test_braids_client_refuses_a_non_persistent_topic_with_a_clear_error() -> None:
    with pytest.raises(InvalidTopicNameError, match="non-persistent topic"):
        parse_topic("non-persistent://public/default/ticks")
