"""ScalableTopicController on a real broker: leadership, split, merge, subscriptions, GC, stats.

Mirrors the scenarios Apache Pulsar's own controller tests pin, in Braid's
additions: merges of three segments, splits at an explicit hash, and subscriptions carried to every
child.
"""

from __future__ import annotations

import pytest

from braid.broker.errors import SubscriptionNotFound
from braid.core.errors import InvalidInputError
from braid.core.layout import InvalidLayoutOperation, SegmentNotFound
from braid.core.names import InvalidTopicName, SegmentTopicName, TopicName
from braid.core.ranges import HashRange
from braid.metadata.election import read_leader
from braid.scalable.errors import NotLeader, OperationInProgress
from braid.scalable.resources import (
    ScalableTopicAlreadyExists,
    ScalableTopicNotFound,
    SubscriptionType,
    SubscriptionTypeMismatch,
)
from tests.support.polling import eventually
from tests.support.scalable_stack import ScalableStack, second_service

TOPIC = TopicName.parse("topic://public/default/orders")


def segment_name(layout_segment_id: int, start: int, end: int) -> str:
    return str(SegmentTopicName.of(TOPIC, HashRange(start, end), layout_segment_id))


async def segment_exists(stack: ScalableStack, name: str) -> bool:
    return await stack.broker.service.topic_exists(name)


async def cursors_of(stack: ScalableStack, name: str) -> set[str]:
    topic = await stack.broker.service.get_or_create_topic(name, create=False)
    return {s for s, sub in topic.subscriptions.items() if sub.durable}


@pytest.mark.parametrize("n", [1, 2, 4])
async def test_create_makes_n_segment_topics_that_tile_the_ring(
    stack: ScalableStack, n: int
) -> None:
    layout = await stack.scalable.create_topic(TOPIC, n)
    assert layout.epoch == 0 and len(layout.active_segments) == n
    for segment in layout.active_segments:
        name = str(SegmentTopicName.of(TOPIC, segment.hash_range, segment.segment_id))
        assert await segment_exists(stack, name)
    assert await stack.scalable.list_topics("public", "default") == [str(TOPIC)]


async def test_creating_twice_or_with_zero_segments_is_refused(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    with pytest.raises(ScalableTopicAlreadyExists):
        await stack.scalable.create_topic(TOPIC, 2)
    with pytest.raises(ValueError, match="between 1 and 65536"):
        await stack.scalable.create_topic(TopicName.parse("topic://public/default/x"), 0)


async def test_a_load_report_written_before_the_layout_does_not_take_the_topic_name(
    stack: ScalableStack,
) -> None:
    # A migration creates its segment topics before it publishes the layout (ADR 0063); a load
    # report of one of them makes the store create the topic's node, empty, as its parent.
    resources = stack.scalable.resources
    await stack.broker.metadata.put(resources.segment_load_path(TOPIC, 3), b"{}")
    parent = await stack.broker.metadata.get(resources.topic_path(TOPIC))
    assert parent is not None and parent[0] == b""
    assert await resources.get_layout(TOPIC) is None
    await stack.scalable.create_topic(TOPIC, 2)
    found = await resources.get_layout(TOPIC)
    assert found is not None and len(found.layout.active_segments) == 2
    with pytest.raises(ScalableTopicAlreadyExists):
        await stack.scalable.create_topic(TOPIC, 2)


async def test_creating_in_a_missing_namespace_is_not_found(stack: ScalableStack) -> None:
    with pytest.raises(ScalableTopicNotFound, match="nope/ns"):
        await stack.scalable.create_topic(TopicName.parse("topic://nope/ns/t"), 1)


async def test_the_first_controller_becomes_leader_and_stores_its_url(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    controller = await stack.scalable.controller(TOPIC)
    assert controller.is_leader
    value = await read_leader(stack.broker.metadata, "/topics/public/default/orders/controller")
    assert value == stack.broker.service.service_url.encode()


async def test_a_missing_topic_has_no_controller(stack: ScalableStack) -> None:
    with pytest.raises(ScalableTopicNotFound):
        await stack.scalable.controller(TOPIC)


async def test_split_creates_two_children_terminates_the_parent_and_bumps_the_epoch(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.create_subscription(TOPIC, "audit", SubscriptionType.QUEUE)
    layout = await stack.scalable.split(TOPIC, 1)
    assert layout.epoch == 1
    assert [s.segment_id for s in layout.active_segments] == [0, 2, 3]
    assert len(layout.segments) == 4 and layout.next_segment_id == 4
    assert layout.segment(2).hash_range == HashRange(0x8000, 0xBFFF)
    assert layout.segment(3).hash_range == HashRange(0xC000, 0xFFFF)
    parent = await stack.broker.service.get_or_create_topic(
        segment_name(1, 0x8000, 0xFFFF), create=False
    )
    assert parent.is_terminated
    for child in (segment_name(2, 0x8000, 0xBFFF), segment_name(3, 0xC000, 0xFFFF)):
        assert await cursors_of(stack, child) == {"audit"}


async def test_split_at_an_explicit_hash(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    layout = await stack.scalable.split(TOPIC, 0, split_hash=0x0100)
    assert layout.segment(1).hash_range == HashRange(0x0000, 0x00FF)
    assert layout.segment(2).hash_range == HashRange(0x0100, 0xFFFF)


async def test_children_inherit_subscriptions_found_only_on_the_parent(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    parent = await stack.broker.service.get_or_create_topic(
        segment_name(0, 0, 0xFFFF), create=False
    )
    # A queue consumer subscribes on the segment directly: the metadata store never hears of it.
    await parent.create_subscription("direct", earliest=True)
    layout = await stack.scalable.split(TOPIC, 0)
    for child in layout.active_segments:
        name = str(SegmentTopicName.of(TOPIC, child.hash_range, child.segment_id))
        assert await cursors_of(stack, name) == {"direct"}


@pytest.mark.parametrize("ids", [[2, 3], [3, 2]])
async def test_merge_of_two_creates_one_child_and_terminates_both_parents(
    stack: ScalableStack, ids: list[int]
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.split(TOPIC, 1)
    layout = await stack.scalable.merge(TOPIC, ids)
    assert layout.epoch == 2
    child = layout.segment(4)
    assert child.parent_ids == (2, 3) and child.hash_range == HashRange(0x8000, 0xFFFF)
    for name in (segment_name(2, 0x8000, 0xBFFF), segment_name(3, 0xC000, 0xFFFF)):
        topic = await stack.broker.service.get_or_create_topic(name, create=False)
        assert topic.is_terminated


async def test_merge_of_three_adjacent_segments(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 4)
    layout = await stack.scalable.merge(TOPIC, [1, 2, 3])
    child = layout.segment(4)
    assert child.parent_ids == (1, 2, 3)
    assert child.hash_range == HashRange(0x4000, 0xFFFF)
    assert [s.segment_id for s in layout.active_segments] == [0, 4]


async def test_invalid_operations_are_refused_without_side_effects(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 4)
    with pytest.raises(InvalidLayoutOperation, match="not adjacent"):
        await stack.scalable.merge(TOPIC, [0, 2])
    with pytest.raises(SegmentNotFound):
        await stack.scalable.split(TOPIC, 99)
    await stack.scalable.split(TOPIC, 0)
    with pytest.raises(InvalidLayoutOperation, match="sealed"):
        await stack.scalable.split(TOPIC, 0)
    layout = await stack.scalable.get_layout(TOPIC)
    assert layout.epoch == 1
    assert await stack.scalable.resources.get_operation(TOPIC) is None


async def test_a_recorded_operation_blocks_another(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.controller(TOPIC)
    # Another leader's record, as if it were still running (a new leader would resume it).
    await stack.scalable.resources.begin_operation(
        TOPIC, {"type": "split", "segmentIds": [0], "nowMs": 1}
    )
    with pytest.raises(OperationInProgress):
        await stack.scalable.split(TOPIC, 1)


async def test_subscriptions_are_created_on_every_segment_idempotently_and_deleted(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.split(TOPIC, 0)
    layout = await stack.scalable.get_layout(TOPIC)
    names = [
        str(SegmentTopicName.of(TOPIC, s.hash_range, s.segment_id))
        for s in layout.segments.values()
    ]
    for _ in range(2):
        await stack.scalable.create_subscription(TOPIC, "s", SubscriptionType.STREAM)
    for name in names:
        assert "s" in await cursors_of(stack, name)
    with pytest.raises(SubscriptionTypeMismatch):
        await stack.scalable.create_subscription(TOPIC, "s", SubscriptionType.QUEUE)
    await stack.scalable.delete_subscription(TOPIC, "s")
    for name in names:
        assert "s" not in await cursors_of(stack, name)
    assert await stack.scalable.resources.list_subscriptions(TOPIC) == {}


async def test_a_follower_refuses_mutations_and_the_service_forwards_nothing_without_admin(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.controller(TOPIC)  # leader here
    other_broker = await second_service(stack)
    other = other_broker.scalable
    try:
        follower = await other.controller(TOPIC)
        assert not follower.is_leader
        with pytest.raises(NotLeader, match="not the controller leader"):
            await follower.split(0)
        with pytest.raises(NotLeader):
            await follower.create_subscription("s", SubscriptionType.STREAM)
        # The follower's service would forward to the leader's admin API, which this
        # in-process leader does not run: a retriable NotLeader, never a wrong answer.
        with pytest.raises(NotLeader, match="admin address is not registered"):
            await other.split(TOPIC, 0)
        assert (await other.get_layout(TOPIC)).epoch == 0
    finally:
        await other_broker.close()


async def test_closing_the_leader_hands_leadership_to_the_other_broker(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    await stack.scalable.controller(TOPIC)
    other_broker = await second_service(stack)
    other = other_broker.scalable
    try:
        follower = await other.controller(TOPIC)
        await stack.scalable.release_controller(TOPIC)
        await eventually(lambda: follower.is_leader, message="the follower to take over")
        layout = await other.split(TOPIC, 0)
        assert layout.epoch == 1
    finally:
        await other_broker.close()


async def test_take_over_recreates_missing_active_segment_topics(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.create_subscription(TOPIC, "s", SubscriptionType.STREAM)
    await stack.scalable.release_controller(TOPIC)
    missing = segment_name(1, 0x8000, 0xFFFF)
    await stack.broker.service.delete_topic(missing)
    assert not await segment_exists(stack, missing)
    controller = await stack.scalable.controller(TOPIC)
    await controller.wait_ready()
    assert await segment_exists(stack, missing)
    assert await cursors_of(stack, missing) == {"s"}


async def test_no_segment_is_recreated_by_a_follower(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    await stack.scalable.controller(TOPIC)
    missing = segment_name(0, 0, 0xFFFF)
    await stack.broker.service.delete_topic(missing)
    other = await second_service(stack)
    try:
        await other.scalable.controller(TOPIC)
        assert not await segment_exists(stack, missing)
    finally:
        await other.close()


async def test_stats_show_the_dag_the_subscriptions_and_the_leader(stack: ScalableStack) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.create_subscription(TOPIC, "q", SubscriptionType.QUEUE)
    await stack.scalable.split(TOPIC, 0)
    stats = await stack.scalable.stats(TOPIC)
    assert (stats["epoch"], stats["activeSegments"], stats["sealedSegments"]) == (1, 3, 1)
    assert stats["segments"]["0"]["state"] == "SEALED"
    assert stats["segments"]["0"]["childIds"] == [2, 3]
    assert stats["segments"]["2"]["segmentTopic"] == segment_name(2, 0x0000, 0x3FFF)
    assert stats["subscriptions"]["q"]["type"] == "QUEUE"
    assert stats["controller"]["leaderBrokerUrl"] == stack.broker.service.service_url
    assert stats["controller"]["isLeader"] is True
    assert stats["controller"]["operationInFlight"] is None


async def test_delete_removes_segments_and_metadata_and_releases_the_controller(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.split(TOPIC, 0)
    names = [
        str(SegmentTopicName.of(TOPIC, s.hash_range, s.segment_id))
        for s in (await stack.scalable.get_layout(TOPIC)).segments.values()
    ]
    await stack.scalable.delete_topic(TOPIC)
    for name in names:
        assert not await segment_exists(stack, name)
    assert await stack.scalable.list_topics("public", "default") == []
    assert stack.scalable.local_controller(TOPIC) is None
    assert await stack.broker.metadata.get("/topics/public/default/orders/controller") is None


async def test_a_name_whose_segments_could_not_be_stored_is_refused_up_front(
    stack: ScalableStack,
) -> None:
    # The naming rule (core/names.py) caps local names so that every segment name fits: such a
    # name is refused before any service sees it.
    with pytest.raises(InvalidTopicName, match="too long"):
        await stack.scalable.create_topic(TopicName.parse("topic://public/default/" + "x" * 470), 1)
    assert await stack.scalable.list_topics("public", "default") == []


async def test_more_initial_segments_than_max_segments_is_refused(stack: ScalableStack) -> None:
    with pytest.raises(InvalidInputError, match="at most 64 segments"):
        await stack.scalable.create_topic(TOPIC, 65)
    assert await stack.scalable.list_topics("public", "default") == []


async def test_seek_or_delete_of_an_unknown_subscription_is_not_found(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    with pytest.raises(SubscriptionNotFound):
        await stack.scalable.seek_subscription(TOPIC, "nope", 0)
    with pytest.raises(SubscriptionNotFound):
        await stack.scalable.delete_subscription(TOPIC, "nope")
    name = segment_name(0, 0, 0xFFFF)
    assert await cursors_of(stack, name) == set()


async def test_a_split_refused_for_good_by_the_broker_leaves_no_record(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    controller = await stack.scalable.controller(TOPIC)
    real = controller._segments

    class RefusingChildren:
        """The segments seam, with the broker refusing to create one child for good."""

        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        async def create_segment(self, segment: SegmentTopicName, subs: object) -> None:
            if segment.segment_id == 2:
                raise InvalidInputError("the storage refuses this name")
            await real.create_segment(segment, subs)  # type: ignore[arg-type]

    controller._segments = RefusingChildren()  # type: ignore[assignment]
    with pytest.raises(InvalidInputError, match="refuses"):
        await stack.scalable.split(TOPIC, 0)
    controller._segments = real
    assert await stack.scalable.resources.get_operation(TOPIC) is None
    assert not await segment_exists(stack, segment_name(1, 0, 0x7FFF))
    parent = await stack.broker.service.get_or_create_topic(segment_name(0, 0, 0xFFFF))
    assert not parent.is_terminated
    assert (await stack.scalable.split(TOPIC, 0)).epoch == 1  # nothing stuck
