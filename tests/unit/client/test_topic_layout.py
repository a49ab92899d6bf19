"""TopicLayout (the client's view of a DAG), the synthetic layout and epoch monotonicity (C1)."""

from __future__ import annotations

import pytest

from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.names import TopicName
from braid.core.segment_info import CorruptLayout
from braid.core.topic_layout import (
    LayoutTracker,
    SegmentRoute,
    TopicLayout,
    partition_index,
    segment_topic_name,
)

TOPIC = "topic://t/ns/orders"


def managed(dag: SegmentLayout) -> TopicLayout:
    return TopicLayout(
        TOPIC, dag, {s: SegmentRoute(s, segment_topic_name(TOPIC, dag, s)) for s in dag.segments}
    )


def test_synthetic_layout_wraps_the_persistent_topic_in_one_legacy_segment() -> None:
    layout = TopicLayout.synthetic("orders")
    assert layout.topic == "persistent://public/default/orders"
    assert layout.active_ids == (0,)
    route = layout.route(0)
    assert route.legacy and route.topic == "persistent://public/default/orders"
    assert layout.all_legacy and layout.legacy_order == (0,)
    seg = layout.dag.segments[0]
    assert (seg.hash_range.start, seg.hash_range.end) == (0, 0xFFFF)


def test_synthetic_partitioned_layout_orders_partitions() -> None:
    layout = TopicLayout.synthetic("persistent://t/ns/p", 4)
    assert [layout.route(s).topic for s in layout.legacy_order] == [
        f"persistent://t/ns/p-partition-{i}" for i in range(4)
    ]
    assert partition_index("persistent://t/ns/p-partition-12") == 12
    assert partition_index("persistent://t/ns/p") is None


def test_synthetic_layout_needs_a_persistent_name() -> None:
    with pytest.raises(InvalidInputError) as domain:
        TopicLayout.synthetic(TOPIC)
    assert str(domain.value) == (
        "only a persistent:// topic has a synthetic layout: topic://t/ns/orders"
    )
    for bad in (-1, True, 2.0):
        with pytest.raises(InvalidInputError) as count:
            TopicLayout.synthetic("x", bad)  # type: ignore[arg-type]
        assert str(count.value) == f"partitions must be a non-negative integer: {bad!r}"


def test_a_synthetic_layout_starts_at_epoch_zero_unless_told() -> None:
    assert TopicLayout.synthetic("x").epoch == 0
    assert TopicLayout.synthetic("x", 2, epoch=7).epoch == 7


def _legacy(routes: dict[int, str]) -> TopicLayout:
    dag = SegmentLayout.initial(len(routes))
    name = "persistent://t/ns/p"
    return TopicLayout(
        name, dag, {sid: SegmentRoute(sid, topic, legacy=True) for sid, topic in routes.items()}
    )


def test_legacy_segments_are_put_in_partition_order_whatever_their_ring_order() -> None:
    # The broker may hand out partitions in any ring order: mod-N routing follows the suffix.
    layout = _legacy({0: "persistent://t/ns/p-partition-1", 1: "persistent://t/ns/p-partition-0"})
    assert layout.legacy_order == (1, 0)
    reverse = _legacy({i: f"persistent://t/ns/p-partition-{2 - i}" for i in range(3)})
    assert reverse.legacy_order == (2, 1, 0)


@pytest.mark.parametrize(
    "topics",
    [
        # one route is not a partition's: ring order
        ("persistent://t/ns/p-partition-1", "persistent://t/ns/q"),
        # two routes claim one partition: ring order
        ("persistent://t/ns/p-partition-1", "persistent://t/ns/r-partition-1"),
    ],
)
def test_legacy_segments_without_distinct_partition_suffixes_keep_ring_order(
    topics: tuple[str, str],
) -> None:
    assert _legacy(dict(enumerate(topics))).legacy_order == (0, 1)


def test_managed_segments_are_named_by_descriptor() -> None:
    layout = managed(SegmentLayout.initial(2).split_segment(1))
    assert layout.route(2).topic == "segment://t/ns/orders/8000-bfff-2"
    assert layout.route(0).topic == "segment://t/ns/orders/0000-7fff-0"
    assert not layout.all_legacy and layout.legacy_order == ()
    assert layout.active_ids == (0, 2, 3)
    assert not layout.is_active(1) and layout.is_active(3)


def test_routes_must_match_segments() -> None:
    dag = SegmentLayout.initial(2)
    with pytest.raises(CorruptLayout) as missing:
        TopicLayout(TOPIC, dag, {0: SegmentRoute(0, "segment://t/ns/orders/0000-7fff-0")})
    assert str(missing.value) == (
        "layout of topic://t/ns/orders: segments without a route [1], routes without a segment []"
    )
    one = SegmentLayout.initial(1)
    with pytest.raises(CorruptLayout) as extra:
        TopicLayout(
            TOPIC,
            one,
            {
                0: SegmentRoute(0, "segment://t/ns/orders/0000-ffff-0"),
                5: SegmentRoute(5, "segment://t/ns/orders/0000-ffff-5"),
            },
        )
    assert str(extra.value) == (
        "layout of topic://t/ns/orders: segments without a route [], routes without a segment [5]"
    )
    with pytest.raises(CorruptLayout) as keyed:
        TopicLayout(TOPIC, one, {0: SegmentRoute(3, "segment://t/ns/orders/0000-ffff-3")})
    assert str(keyed.value) == "route keyed 0 names segment 3"
    with pytest.raises(CorruptLayout) as legacy:
        TopicLayout(TOPIC, one, {0: SegmentRoute(0, "topic://x/y/z", legacy=True)})
    assert str(legacy.value) == (
        "legacy segment 0 of topic://t/ns/orders wraps 'topic://x/y/z', "
        "which is not a persistent:// topic"
    )
    with pytest.raises(CorruptLayout) as neither:
        TopicLayout(TOPIC, one, {0: SegmentRoute(0, "persistent://x/y/z")})
    assert str(neither.value) == (
        "segment 0 of topic://t/ns/orders is neither legacy nor a segment:// topic"
    )


def test_a_layouts_routes_cannot_be_changed_after_construction() -> None:
    routes = {0: SegmentRoute(0, "segment://t/ns/orders/0000-ffff-0")}
    layout = TopicLayout(TOPIC, SegmentLayout.initial(1), routes)
    routes[1] = SegmentRoute(1, "segment://t/ns/orders/0000-ffff-1")
    assert set(layout.routes) == {0}  # a copy, not the caller's dict
    with pytest.raises(TypeError):
        layout.routes[1] = routes[1]  # type: ignore[index]


def test_unknown_segments_are_refused_by_name() -> None:
    layout = managed(SegmentLayout.initial(1))
    with pytest.raises(CorruptLayout) as route:
        layout.route(9)
    assert str(route.value) == "segment 9 is not in the layout of topic://t/ns/orders"
    with pytest.raises(CorruptLayout) as name:
        segment_topic_name(TOPIC, SegmentLayout.initial(1), 9)
    assert str(name.value) == "segment 9 is not in the layout of topic://t/ns/orders"
    with pytest.raises(CorruptLayout) as bad:
        segment_topic_name("persistent://t/ns/orders", SegmentLayout.initial(1), 0)
    assert str(bad.value).startswith(
        "segment 0 of persistent://t/ns/orders has no segment:// name: "
    )


def test_a_synthetic_layout_takes_a_parsed_name_too() -> None:
    parsed = TopicName.parse("persistent://t/ns/p")
    assert TopicLayout.synthetic(parsed, 3) == TopicLayout.synthetic("persistent://t/ns/p", 3)


def test_tracker_applies_only_strictly_newer_epochs() -> None:
    base = SegmentLayout.initial(1)
    e0, e1 = managed(base), managed(base.split_segment(0))
    e2 = managed(base.split_segment(0).split_segment(1))
    tracker = LayoutTracker()
    assert tracker.offer(e1) and tracker.current is e1
    assert not tracker.offer(e0)  # reordered, stale push
    assert not tracker.offer(managed(base.split_segment(0)))  # same epoch again
    assert tracker.offer(e2) and tracker.current is e2


def test_tracker_refuses_another_topics_layout() -> None:
    tracker = LayoutTracker(TopicLayout.synthetic("a"))
    with pytest.raises(InvalidInputError) as other:
        tracker.offer(TopicLayout.synthetic("b", epoch=5))
    assert str(other.value) == (
        "layout for persistent://public/default/b offered to the tracker of "
        "persistent://public/default/a"
    )


def test_entry_buckets_are_advertised_only_by_a_managed_segment_with_boundaries() -> None:
    dag = SegmentLayout.initial(2)
    plain = managed(dag)
    assert not plain.entry_buckets
    assert not TopicLayout.synthetic("orders").entry_buckets
    routes = dict(plain.routes)
    routes[1] = SegmentRoute(1, routes[1].topic, entry_bucket_splits=(0x8000,))
    assert TopicLayout(TOPIC, dag, routes).entry_buckets


def test_tracker_applies_the_same_epoch_placed_elsewhere_but_never_another_dag() -> None:
    dag = SegmentLayout.initial(2)
    names = {s: segment_topic_name(TOPIC, dag, s) for s in dag.segments}

    def placed(owner: str, controller: str) -> TopicLayout:
        routes = {s: SegmentRoute(s, names[s], broker_url=owner) for s in dag.segments}
        return TopicLayout(TOPIC, dag, routes, controller_broker_url=controller)

    first = placed("pulsar://a:1", "pulsar://a:1")
    tracker = LayoutTracker(first)
    assert not tracker.offer(placed("pulsar://a:1", "pulsar://a:1"))  # nothing new
    moved = placed("pulsar://b:1", "pulsar://a:1")  # a segment owner failed over
    assert tracker.offer(moved) and tracker.current is moved
    led = placed("pulsar://b:1", "pulsar://c:1")  # the controller leader moved
    assert tracker.offer(led) and tracker.current is led
    # Another DAG under the same epoch is a broker bug: never applied.
    other = SegmentLayout.initial(3)
    assert other.epoch == dag.epoch
    assert not tracker.offer(managed(other))
