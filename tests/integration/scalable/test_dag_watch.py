"""DAG-watch and namespace-watch sessions over the wire (``docs/protocol.md#dag-watch``,
``docs/protocol.md#namespace-watch``)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from braid.broker.resources import AutoTopicCreationOverride
from braid.core.names import TopicName
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.polling import eventually
from tests.support.raw_client import RawClient
from tests.support.scalable_stack import ScalableStack

TOPIC = TopicName.parse("topic://public/default/orders")


def is_update(session_id: int) -> object:
    return lambda c: (
        c.type == pb.BaseCommand.SCALABLE_TOPIC_UPDATE
        and c.scalableTopicUpdate.session_id == session_id
    )


@pytest.fixture
async def raw(stack: ScalableStack) -> AsyncIterator[RawClient]:
    client = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        yield client
    finally:
        await client.close()


async def lookup(raw: RawClient, session_id: int, topic: str) -> pb.CommandScalableTopicUpdate:
    await raw.send(commands.scalable_topic_lookup(session_id, topic))
    return (await raw.next_command(is_update(session_id))).scalableTopicUpdate  # type: ignore[arg-type]


async def test_connected_advertises_scalable_topics(stack: ScalableStack) -> None:
    client = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        assert client.connected is not None
        assert client.connected.feature_flags.supports_scalable_topics
    finally:
        await client.close()


async def test_first_update_carries_the_whole_dag_brokers_and_controller(
    stack: ScalableStack, raw: RawClient
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.split(TOPIC, 0)
    update = await lookup(raw, 5, "topic://public/default/orders")
    assert not update.HasField("error")
    assert update.resolved_topic_name == "topic://public/default/orders"
    dag = update.dag
    assert dag.epoch == 1
    assert sorted(s.segment_id for s in dag.segments) == [0, 1, 2, 3]
    url = stack.broker.service.service_url
    assert {b.segment_id: b.broker_url for b in dag.segment_brokers} == {1: url, 2: url, 3: url}
    assert dag.controller_broker_url == url


async def test_a_short_name_resolves_to_its_canonical_topic(
    stack: ScalableStack, raw: RawClient
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    update = await lookup(raw, 1, "orders")
    assert update.resolved_topic_name == "topic://public/default/orders"


async def test_every_layout_change_is_pushed_with_a_higher_epoch(
    stack: ScalableStack, raw: RawClient
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    assert (await lookup(raw, 1, str(TOPIC))).dag.epoch == 0
    await stack.scalable.split(TOPIC, 0)
    pushed = (await raw.next_command(is_update(1))).scalableTopicUpdate  # type: ignore[arg-type]
    assert pushed.dag.epoch == 1
    assert sorted(b.segment_id for b in pushed.dag.segment_brokers) == [1, 2]
    await stack.scalable.merge(TOPIC, [1, 2])
    pushed = (await raw.next_command(is_update(1))).scalableTopicUpdate  # type: ignore[arg-type]
    assert pushed.dag.epoch == 2
    assert [b.segment_id for b in pushed.dag.segment_brokers] == [3]


async def test_changes_to_other_topics_and_property_edits_push_nothing(
    stack: ScalableStack, raw: RawClient
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    other = TopicName.parse("topic://public/default/other")
    await stack.scalable.create_topic(other, 1)
    await lookup(raw, 1, str(TOPIC))
    await stack.scalable.split(other, 0)
    await stack.scalable.set_properties(TOPIC, {"team": "x"})  # same epoch
    await stack.scalable.split(TOPIC, 0)
    pushed = (await raw.next_command(is_update(1))).scalableTopicUpdate  # type: ignore[arg-type]
    assert pushed.dag.epoch == 1  # the first push is the split of this topic


async def test_closed_sessions_get_no_more_updates(stack: ScalableStack, raw: RawClient) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    await lookup(raw, 1, str(TOPIC))
    await lookup(raw, 2, str(TOPIC))
    await raw.send(commands.scalable_topic_close(1))
    await raw.send(commands.scalable_topic_close(1))  # idempotent
    await stack.scalable.split(TOPIC, 0)
    pushed = await raw.next_command(lambda c: c.type == pb.BaseCommand.SCALABLE_TOPIC_UPDATE)
    assert pushed.scalableTopicUpdate.session_id == 2


async def test_a_missing_topic_is_created_with_one_segment_when_policy_allows(
    stack: ScalableStack, raw: RawClient
) -> None:
    update = await lookup(raw, 1, "topic://public/default/fresh")
    assert [s.segment_id for s in update.dag.segments] == [0]
    assert await stack.scalable.list_topics("public", "default") == ["topic://public/default/fresh"]


async def test_a_missing_topic_is_an_error_in_the_first_update_when_creation_is_off(
    stack: ScalableStack, raw: RawClient
) -> None:
    await stack.broker.resources.update_namespace_policies(
        "public",
        "default",
        lambda p: dataclasses.replace(p, auto_topic_creation=AutoTopicCreationOverride(False)),
    )
    update = await lookup(raw, 1, "topic://public/default/absent")
    assert update.error == pb.TopicNotFound
    assert "auto topic creation is disabled" in update.message
    assert not update.HasField("dag")
    update = await lookup(raw, 2, "topic://nope/ns/absent")
    assert update.error == pb.TopicNotFound


async def test_an_invalid_name_is_an_error_in_the_first_update(raw: RawClient) -> None:
    update = await lookup(raw, 1, "topic://public/default/a b")
    assert update.error == pb.InvalidTopicName
    update = await lookup(raw, 2, "segment://public/default/a/0000-ffff-0")
    assert update.error == pb.InvalidTopicName


async def test_a_persistent_topic_resolves_to_a_synthetic_legacy_segment(
    stack: ScalableStack, raw: RawClient
) -> None:
    update = await lookup(raw, 1, "persistent://public/default/legacy")
    (segment,) = update.dag.segments
    assert segment.legacy_topic_name == "persistent://public/default/legacy"
    assert update.resolved_topic_name == "persistent://public/default/legacy"


async def test_namespace_watch_sends_a_snapshot_then_diffs(
    stack: ScalableStack, raw: RawClient
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    await raw.send(
        commands.wrap(pb.CommandWatchScalableTopics(watch_id=4, namespace="public/default"))
    )

    def watch_update(c: pb.BaseCommand) -> bool:
        return c.type == pb.BaseCommand.WATCH_SCALABLE_TOPICS_UPDATE

    first = (await raw.next_command(watch_update)).watchScalableTopicsUpdate
    assert list(first.snapshot.topics) == [str(TOPIC)]
    await stack.scalable.create_topic(TopicName.parse("topic://public/default/b"), 1)
    diff = (await raw.next_command(watch_update)).watchScalableTopicsUpdate
    assert list(diff.diff.added) == ["topic://public/default/b"] and not diff.diff.removed
    await stack.scalable.delete_topic(TOPIC)
    diff = (await raw.next_command(watch_update)).watchScalableTopicsUpdate
    assert list(diff.diff.removed) == [str(TOPIC)]


async def test_namespace_watch_of_a_missing_namespace_fails_in_its_first_update(
    raw: RawClient,
) -> None:
    await raw.send(commands.wrap(pb.CommandWatchScalableTopics(watch_id=1, namespace="no/such")))
    update = await raw.next_command(lambda c: c.type == pb.BaseCommand.WATCH_SCALABLE_TOPICS_UPDATE)
    assert update.watchScalableTopicsUpdate.error == pb.TopicNotFound


async def subscribe_stream(
    raw: RawClient, request_id: int, consumer_id: int, name: str
) -> pb.CommandScalableTopicSubscribeResponse:
    await raw.send(
        commands.scalable_topic_subscribe(
            request_id, str(TOPIC), "sub", name, consumer_id, pb.STREAM, initial_earliest=True
        )
    )
    answer = await raw.next_command(
        lambda c: (
            c.type == pb.BaseCommand.SCALABLE_TOPIC_SUBSCRIBE_RESPONSE
            and c.scalableTopicSubscribeResponse.request_id == request_id
        )
    )
    return answer.scalableTopicSubscribeResponse


async def test_stream_consumers_register_get_pushed_updates_and_leave_cleanly(
    stack: ScalableStack, raw: RawClient
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    first = await subscribe_stream(raw, 1, 10, "c1")
    assert not first.HasField("error")
    assert first.assignment.layout_epoch == 0
    assert [s.segment_id for s in first.assignment.segments] == [0, 1]
    assert first.assignment.segments[0].segment_topic == (
        "segment://public/default/orders/0000-7fff-0"
    )
    other = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        second = await subscribe_stream(other, 2, 20, "c2")
        assert [s.segment_id for s in second.assignment.segments] == [1]
        pushed = await raw.next_command(
            lambda c: c.type == pb.BaseCommand.SCALABLE_TOPIC_ASSIGNMENT_UPDATE
        )
        update = pushed.scalableTopicAssignmentUpdate
        assert update.consumer_id == 10 and [s.segment_id for s in update.assignment.segments] == [
            0
        ]
        await other.send(commands.scalable_topic_unsubscribe(3, 20))
        ok = await other.next_command(lambda c: c.type == pb.BaseCommand.SUCCESS)
        assert ok.success.request_id == 3
        pushed = await raw.next_command(
            lambda c: c.type == pb.BaseCommand.SCALABLE_TOPIC_ASSIGNMENT_UPDATE
        )
        assert [s.segment_id for s in pushed.scalableTopicAssignmentUpdate.assignment.segments] == [
            0,
            1,
        ]
    finally:
        await other.close()


async def test_a_dropped_connection_keeps_the_registration_for_the_grace_period(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    client = await RawClient.open("127.0.0.1", stack.broker.service.port)
    await subscribe_stream(client, 1, 10, "c1")
    await client.close()
    controller = stack.scalable.local_controller(TOPIC)
    assert controller is not None
    coordinator = controller.coordinator("sub")
    assert coordinator is not None

    def in_grace() -> bool:
        session = coordinator.session("c1")
        return session is not None and not session.connected and session.in_grace_period

    await eventually(in_grace, message="c1 disconnected and in its grace period")
    back = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        again = await subscribe_stream(back, 2, 11, "c1")
        assert [s.segment_id for s in again.assignment.segments] == [0, 1]
    finally:
        await back.close()


async def test_registration_errors_come_back_in_the_response(
    stack: ScalableStack, raw: RawClient
) -> None:
    # Registration does not create topics: the client's DAG lookup (which may) comes first.
    answer = await subscribe_stream(raw, 1, 1, "c1")
    assert answer.HasField("error")
    assert answer.error == pb.TopicNotFound
