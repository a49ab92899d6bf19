"""The migration executor on a real broker, storage and metadata store (ADR 0063).

A 4-partition topic with two subscriptions is migrated: segment topics are created with both
cursors; while the controller cannot serve legacy roots the executor stops before terminating
anything and ``status`` says why; an executor allowed to go on terminates every partition and
publishes the recorded layout and subscription modes. A prepared migration rolls back leaving the
partitions writable and no segment topic behind. A migration to another name copies the schema.
"""

from __future__ import annotations

import pytest

from braid.broker.schemas.model import SchemaCompatibilityStrategy, SchemaData, SchemaType
from braid.clock import SystemClock
from braid.core.layout import SegmentLayout
from braid.core.migration import MigrationPastNoReturn, MigrationPhase
from braid.core.names import SegmentTopicName, TopicName
from braid.scalable.migration import (
    LocalClassicTopics,
    MigrationExecutor,
    MigrationExists,
    MigrationNotServable,
)
from braid.scalable.resources import SubscriptionType
from tests.support.scalable_stack import ScalableStack

pytestmark = pytest.mark.timeout(120)

SOURCE = "persistent://public/default/orders"
TARGET = "topic://public/default/orders"
PARTITIONS = [f"{SOURCE}-partition-{i}" for i in range(4)]


def executor(stack: ScalableStack, *, servable: bool = False) -> MigrationExecutor:
    service = stack.scalable
    return MigrationExecutor(
        stack.broker.metadata,
        service.resources,
        service.segments,
        LocalClassicTopics(stack.broker.service),
        SystemClock(),
        legacy_roots_servable=servable,
    )


async def _partitioned_topic_with_two_subscriptions(stack: ScalableStack) -> None:
    broker = stack.broker.service
    await broker.create_partitioned_topic(SOURCE, 4)
    for name in PARTITIONS:
        topic = await broker.get_or_create_topic(name, create=True)
        await topic.create_subscription("failover-sub", earliest=True)
        await topic.create_subscription("shared-sub", earliest=True)


def _segment_names() -> list[SegmentTopicName]:
    layout = SegmentLayout.migrated(PARTITIONS, 2)
    return [
        SegmentTopicName.of(TopicName.parse(TARGET), s.hash_range, s.segment_id)
        for s in layout.active_segments
    ]


async def test_a_partitioned_topic_is_migrated_up_to_publication_then_published(
    stack: ScalableStack,
) -> None:
    await _partitioned_topic_with_two_subscriptions(stack)
    guarded = executor(stack)
    state = await guarded.request(SOURCE, segments=2, modes={"shared-sub": "QUEUE"})
    assert state.phase is MigrationPhase.RECORDED
    assert state.partitions == 4 and state.target == TARGET
    with pytest.raises(MigrationExists, match="already has a migration"):
        await guarded.request(SOURCE, segments=2)

    with pytest.raises(MigrationNotServable, match="left untouched"):
        await guarded.run(SOURCE)
    status = await guarded.status(SOURCE)
    assert status["phase"] == "SEGMENTS_CREATED"
    assert status["canRollBack"] is True
    assert "MigrationNotServable" in str(status["failure"])
    for name in PARTITIONS:
        topic = await stack.broker.service.get_or_create_topic(name, create=False)
        assert not topic.is_terminated
    for segment in _segment_names():
        assert sorted(await stack.scalable.segments.list_subscriptions(segment)) == [
            "failover-sub",
            "shared-sub",
        ]
    assert await stack.scalable.resources.get_layout(TopicName.parse(TARGET)) is None

    done = await executor(stack, servable=True).run(SOURCE)
    assert done.phase is MigrationPhase.DONE and done.failure is None
    assert sorted(done.terminated) == [0, 1, 2, 3]
    for name in PARTITIONS:
        assert (await stack.broker.service.get_or_create_topic(name, create=False)).is_terminated
    with pytest.raises(MigrationPastNoReturn):
        await guarded.rollback(SOURCE)
    done = await executor(stack, servable=True).run(SOURCE)
    assert done.phase is MigrationPhase.DONE and done.failure is None
    target = TopicName.parse(TARGET)
    published = await stack.scalable.resources.require_layout(target)
    assert published.layout == SegmentLayout.migrated(PARTITIONS, 2, state.now_ms)
    subs = await stack.scalable.resources.list_subscriptions(target)
    assert {name: meta.type for name, meta in subs.items()} == {
        "failover-sub": SubscriptionType.STREAM,
        "shared-sub": SubscriptionType.QUEUE,
    }
    # Running a finished migration again changes nothing.
    assert (await executor(stack, servable=True).run(SOURCE)) == done


async def test_a_prepared_migration_rolls_back_leaving_the_partitions_writable(
    stack: ScalableStack,
) -> None:
    await _partitioned_topic_with_two_subscriptions(stack)
    runner = executor(stack)
    await runner.request(SOURCE, segments=2)
    prepared = await runner.run(SOURCE, until=MigrationPhase.SEGMENTS_CREATED)
    assert prepared.phase is MigrationPhase.SEGMENTS_CREATED
    assert all([await stack.scalable.segments.segment_exists(s) for s in _segment_names()])

    rolled_back = await runner.rollback(SOURCE)
    assert rolled_back.phase is MigrationPhase.ROLLED_BACK
    assert not any([await stack.scalable.segments.segment_exists(s) for s in _segment_names()])
    for name in PARTITIONS:
        topic = await stack.broker.service.get_or_create_topic(name, create=False)
        assert not topic.is_terminated
    # A rolled-back migration can be asked for again.
    again = await runner.request(SOURCE, segments=3)
    assert again.phase is MigrationPhase.RECORDED and again.segments == 3


async def test_a_migration_to_another_name_carries_the_schema_versions(
    stack: ScalableStack,
) -> None:
    await _partitioned_topic_with_two_subscriptions(stack)
    registry = stack.broker.service.schemas.registry
    first = SchemaData(SchemaType.JSON, b'{"type": "record", "name": "A", "fields": []}')
    second = SchemaData(SchemaType.STRING, b"")
    for schema in (first, second):
        await registry.put_if_absent(
            "public/default/orders", schema, SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE
        )
    done_state = executor(stack, servable=True)
    await done_state.request(SOURCE, segments=1, target="topic://public/default/orders-v2")
    assert (await done_state.run(SOURCE)).phase is MigrationPhase.DONE
    copied = await registry.get_all("public/default/orders-v2")
    assert [(s.version, s.schema.type, s.schema.data) for s in copied] == [
        (0, SchemaType.JSON, first.data),
        (1, SchemaType.STRING, b""),
    ]
