"""DAG-watch and namespace-watch sessions: the wire DAG (and that a client reads it back),
epoch monotonicity, snapshots and diffs."""

from __future__ import annotations

import crc32c

from braid.client.dag import layout_from_dag
from braid.core.layout import SegmentLayout
from braid.core.names import TopicName
from braid.core.topic_layout import SegmentRoute
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.scalable.dag_watch import (
    DagWatchSession,
    NamespaceWatchSession,
    layout_to_dag,
    legacy_dag,
    topics_hash,
)


class Recorder:
    """Collects what a session would send to its connection."""

    def __init__(self) -> None:
        self.closed = False
        self.dags: list[tuple[int, pb.ScalableTopicDAG, str]] = []
        self.topic_updates: list[dict[str, object]] = []

    def send_dag_update(self, session_id: int, dag: pb.ScalableTopicDAG, resolved: str) -> None:
        self.dags.append((session_id, dag, resolved))

    def send_topics_update(self, watch_id: int, **kwargs: object) -> None:
        self.topic_updates.append({"watch_id": watch_id, **kwargs})


def test_dag_lists_every_segment_and_brokers_for_the_active_ones_only() -> None:
    layout = SegmentLayout.initial(2, now_ms=10).split_segment(0, now_ms=20)
    brokers = {s.segment_id: "pulsar://b:6650" for s in layout.active_segments}
    dag = layout_to_dag(layout, brokers, "pulsar://leader:6650")
    assert dag.epoch == 1
    by_id = {s.segment_id: s for s in dag.segments}
    assert sorted(by_id) == [0, 1, 2, 3]
    assert by_id[0].state == pb.SEALED and list(by_id[0].child_ids) == [2, 3]
    assert by_id[0].sealed_at_epoch == 1 and by_id[0].sealed_at_ms == 20
    assert (by_id[2].hash_start, by_id[2].hash_end) == (0x0000, 0x3FFF)
    assert list(by_id[2].parent_ids) == [0] and by_id[2].created_at_ms == 20
    assert not by_id[1].HasField("sealed_at_epoch")
    assert sorted(b.segment_id for b in dag.segment_brokers) == [1, 2, 3]
    assert dag.controller_broker_url == "pulsar://leader:6650"


def test_legacy_dag_wraps_the_persistent_topic_in_one_full_range_segment() -> None:
    dag = legacy_dag("persistent://public/default/t", "pulsar://b:6650")
    (segment,) = dag.segments
    assert (segment.hash_start, segment.hash_end) == (0, 0xFFFF)
    assert segment.legacy_topic_name == "persistent://public/default/t"
    assert dag.segment_brokers[0].broker_url == "pulsar://b:6650"
    assert not dag.HasField("controller_broker_url")


def test_a_client_reads_the_dag_a_broker_sends_as_the_same_layout() -> None:
    layout = SegmentLayout.initial(2, now_ms=10).split_segment(0, now_ms=20)
    brokers = {s.segment_id: f"pulsar://b{s.segment_id}:6650" for s in layout.active_segments}
    wire = pb.ScalableTopicDAG.FromString(
        layout_to_dag(layout, brokers, "pulsar://leader:6650").SerializeToString()
    )
    seen = layout_from_dag("topic://t/ns/orders", wire)
    assert seen.epoch == 1 and seen.dag.segments == layout.segments
    assert seen.controller_broker_url == "pulsar://leader:6650"
    assert {sid: r.broker_url for sid, r in seen.routes.items()} == {0: None, **brokers}
    assert seen.route(2).topic == "segment://t/ns/orders/0000-3fff-2" and not seen.route(2).legacy


def test_a_client_routes_a_legacy_dag_to_the_persistent_topic_on_its_broker() -> None:
    wire = legacy_dag("persistent://t/ns/old", "pulsar://b:6650")
    seen = layout_from_dag("persistent://t/ns/old", wire)
    assert seen.all_legacy and seen.controller_broker_url is None
    assert seen.route(0) == SegmentRoute(
        0, "persistent://t/ns/old", legacy=True, broker_url="pulsar://b:6650"
    )


def test_a_session_never_pushes_an_epoch_it_already_sent() -> None:
    recorder = Recorder()
    session = DagWatchSession(7, TopicName.parse("topic://a/b/c"), "topic://a/b/c", recorder)
    layout = SegmentLayout.initial(1)
    split = layout.split_segment(0)
    assert session.push(layout_to_dag(split, {}, None))
    assert not session.push(layout_to_dag(layout, {}, None))  # an older read raced the newer
    assert not session.push(layout_to_dag(split, {}, None))  # same epoch again
    assert [d.epoch for _, d, _ in recorder.dags] == [1]
    assert recorder.dags[0][0] == 7 and recorder.dags[0][2] == "topic://a/b/c"
    session.close()
    assert not session.push(layout_to_dag(split.split_segment(1), {}, None))


def test_topics_hash_is_crc32c_over_the_sorted_names() -> None:
    expected = crc32c.crc32c(b"b", crc32c.crc32c(b"a"))
    assert topics_hash(["b", "a"]) == str(expected)


def test_namespace_watch_sends_a_snapshot_then_removed_and_added_diffs() -> None:
    recorder = Recorder()
    watch = NamespaceWatchSession(3, "t", "ns", {}, recorder)
    watch.publish({"topic://t/ns/a", "topic://t/ns/b"})
    watch.publish({"topic://t/ns/a", "topic://t/ns/b"})  # no change: nothing sent
    watch.publish({"topic://t/ns/b", "topic://t/ns/c"})
    assert recorder.topic_updates == [
        {"watch_id": 3, "snapshot": ["topic://t/ns/a", "topic://t/ns/b"]},
        {"watch_id": 3, "added": ["topic://t/ns/c"], "removed": ["topic://t/ns/a"]},
    ]


def test_a_reconnecting_watch_with_the_current_hash_gets_no_snapshot() -> None:
    recorder = Recorder()
    names = {"topic://t/ns/a"}
    watch = NamespaceWatchSession(1, "t", "ns", {}, recorder)
    watch.publish(names, client_hash=topics_hash(names))
    assert recorder.topic_updates == []
    watch.publish(names | {"topic://t/ns/b"})
    assert recorder.topic_updates == [{"watch_id": 1, "added": ["topic://t/ns/b"], "removed": []}]


def test_property_filters_are_anded() -> None:
    watch = NamespaceWatchSession(1, "t", "ns", {"team": "x", "tier": "1"}, Recorder())
    assert watch.matches(SegmentLayout.initial(1, properties={"team": "x", "tier": "1", "o": "k"}))
    assert not watch.matches(SegmentLayout.initial(1, properties={"team": "x"}))


def test_a_session_resends_its_epoch_when_a_segment_or_the_controller_moves() -> None:
    recorder = Recorder()
    session = DagWatchSession(1, TopicName.parse("topic://a/b/c"), "topic://a/b/c", recorder)
    layout = SegmentLayout.initial(2)
    assert session.push(
        layout_to_dag(layout, {0: "pulsar://a:1", 1: "pulsar://a:1"}, "pulsar://a:1")
    )
    assert not session.push(
        layout_to_dag(layout, {0: "pulsar://a:1", 1: "pulsar://a:1"}, "pulsar://a:1")
    )
    assert session.push(
        layout_to_dag(layout, {0: "pulsar://b:1", 1: "pulsar://a:1"}, "pulsar://a:1")
    )
    assert session.push(
        layout_to_dag(layout, {0: "pulsar://b:1", 1: "pulsar://a:1"}, "pulsar://c:1")
    )
    sent = [(d.epoch, d.controller_broker_url) for _, d, _ in recorder.dags]
    assert sent == [(0, "pulsar://a:1"), (0, "pulsar://a:1"), (0, "pulsar://c:1")]
    assert layout_from_dag("topic://a/b/c", recorder.dags[1][1]).routes[0].broker_url == (
        "pulsar://b:1"
    )
