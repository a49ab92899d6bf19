"""GET_TOPICS_OF_NAMESPACE with a pattern and a hash, and the topic-list watch
(WATCH_TOPIC_LIST / WATCH_TOPIC_UPDATE / WATCH_TOPIC_LIST_CLOSE), over a raw connection to a real
broker: a watcher sees topics created and deleted after it started, and only matching ones."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from braid.core.topic_list import topics_hash
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BrokerStack
from tests.support.raw_client import RawClient, request

pytestmark = pytest.mark.integration

NS = "public/default"


def _topics_of_namespace(
    request_id: int, pattern: str | None = None, topics_hash: str | None = None
) -> pb.BaseCommand:
    inner = pb.CommandGetTopicsOfNamespace(request_id=request_id, namespace=NS)
    if pattern is not None:
        inner.topics_pattern = pattern
    if topics_hash is not None:
        inner.topics_hash = topics_hash
    return commands.wrap(inner)


async def _create(stack: BrokerStack, *local_names: str) -> None:
    for name in local_names:
        await stack.service.get_or_create_topic(f"persistent://{NS}/{name}", create=True)


async def test_pattern_filters_the_namespace_and_an_unchanged_hash_sends_nothing(
    broker_stack: BrokerStack, raw: Callable[[], Awaitable[RawClient]]
) -> None:
    await _create(broker_stack, "orders-eu", "orders-us", "payments")
    await broker_stack.service.create_partitioned_topic(f"persistent://{NS}/orders-asia", 2)
    client = await raw()
    everything = (await request(client, _topics_of_namespace(1), 1)).getTopicsOfNamespaceResponse
    assert not everything.filtered
    assert len(everything.topics) == 5

    answer = (
        await request(client, _topics_of_namespace(2, f"persistent://{NS}/orders-.*"), 2)
    ).getTopicsOfNamespaceResponse
    expected = [
        f"persistent://{NS}/orders-asia-partition-0",
        f"persistent://{NS}/orders-asia-partition-1",
        f"persistent://{NS}/orders-eu",
        f"persistent://{NS}/orders-us",
    ]
    assert answer.filtered and answer.changed
    assert sorted(answer.topics) == expected
    assert answer.topics_hash == topics_hash(expected)

    again = (
        await request(
            client, _topics_of_namespace(3, f"persistent://{NS}/orders-.*", answer.topics_hash), 3
        )
    ).getTopicsOfNamespaceResponse
    assert not again.changed
    assert list(again.topics) == []


async def test_watcher_sees_matching_topics_created_and_deleted_after_it_started(
    broker_stack: BrokerStack, raw: Callable[[], Awaitable[RawClient]]
) -> None:
    await _create(broker_stack, "events-1", "other")
    client = await raw()
    assert client.connected is not None
    assert client.connected.feature_flags.supports_topic_watchers
    watch = commands.wrap(
        pb.CommandWatchTopicList(
            request_id=10, watcher_id=7, namespace=NS, topics_pattern=f"{NS}/events-.*"
        )
    )
    success = (await request(client, watch, 10)).watchTopicListSuccess
    assert list(success.topic) == [f"persistent://{NS}/events-1"]
    assert success.topics_hash == topics_hash(success.topic)

    await _create(broker_stack, "unrelated", "events-2")
    update = (await client.next_command(lambda c: c.HasField("watchTopicUpdate"))).watchTopicUpdate
    assert update.watcher_id == 7
    assert list(update.new_topics) == [f"persistent://{NS}/events-2"]
    assert update.topics_hash == topics_hash(
        [f"persistent://{NS}/events-1", f"persistent://{NS}/events-2"]
    )

    await broker_stack.service.delete_topic(f"persistent://{NS}/events-1")
    update = (await client.next_command(lambda c: c.HasField("watchTopicUpdate"))).watchTopicUpdate
    assert list(update.deleted_topics) == [f"persistent://{NS}/events-1"]
    assert update.topics_hash == topics_hash([f"persistent://{NS}/events-2"])

    closed = await request(
        client,
        commands.wrap(pb.CommandWatchTopicListClose(request_id=11, watcher_id=7)),
        11,
    )
    assert closed.type == pb.BaseCommand.SUCCESS
    await _create(broker_stack, "events-3")
    await client.send(_topics_of_namespace(12, f"{NS}/events-.*"))
    first = await client.next_command()  # nothing else may come first: the watcher is closed
    assert first.HasField("getTopicsOfNamespaceResponse")


async def test_watch_on_a_missing_namespace_is_refused(
    broker_stack: BrokerStack, raw: Callable[[], Awaitable[RawClient]]
) -> None:
    client = await raw()
    watch = commands.wrap(
        pb.CommandWatchTopicList(
            request_id=1, watcher_id=1, namespace="public/nope", topics_pattern="public/nope/.*"
        )
    )
    answer = await request(client, watch, 1)
    assert answer.type == pb.BaseCommand.ERROR
    assert answer.error.error == pb.TopicNotFound
