"""Partitioned topics with the official client: the client learns the partition count from
PARTITIONED_METADATA and routes over ``-partition-N`` topics itself - round-robin by default, or
with a custom message router - and auto-creation makes partitioned topics when the namespace's
policy says so."""

from __future__ import annotations

import collections
import dataclasses

import pulsar
import pytest

from braid.broker.resources import AutoTopicCreationOverride, NamespacePolicies
from braid.core.names import TopicName
from tests.support.broker_stack import BackgroundBroker


def _receive_all(consumer: pulsar.Consumer, count: int) -> list[pulsar.Message]:
    messages = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(msg)
        messages.append(msg)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=200)
    return messages


@pytest.mark.interop
def test_round_robin_spreads_messages_over_four_partitions(
    client: pulsar.Client, broker: BackgroundBroker, topic: str
) -> None:
    broker.call(broker.service.create_partitioned_topic(topic, 4))
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(4)]
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(
        topic,
        batching_enabled=False,
        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
    )
    for i in range(40):
        producer.send(b"m-%d" % i)
    messages = _receive_all(consumer, 40)
    assert sorted(m.data() for m in messages) == sorted(b"m-%d" % i for i in range(40))
    per_partition = collections.Counter(m.topic_name() for m in messages)
    assert per_partition == {f"{topic}-partition-{i}": 10 for i in range(4)}


@pytest.mark.interop
def test_custom_message_router_chooses_where_each_message_goes(
    client: pulsar.Client, broker: BackgroundBroker, topic: str
) -> None:
    broker.call(broker.service.create_partitioned_topic(topic, 4))
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(
        topic,
        batching_enabled=False,
        message_router=lambda msg, partitions: int(msg.partition_key()) % partitions,
    )
    for i in range(20):
        producer.send(b"m-%d" % i, partition_key=str(i))
    for msg in _receive_all(consumer, 20):
        expected = int(msg.partition_key()) % 4
        assert msg.topic_name() == f"{topic}-partition-{expected}"
        # The broker stamps the partition on the message id, as Pulsar's does (the official
        # suite's test_message_router reads it): -1 here used to hide partition 0.
        assert msg.message_id().partition() == expected


@pytest.mark.interop
@pytest.mark.parametrize(
    "consumer_type",
    [pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared],
)
def test_message_ids_name_their_partition_for_every_subscription_type(
    client: pulsar.Client, broker: BackgroundBroker, topic: str, consumer_type: object
) -> None:
    broker.call(broker.service.create_partitioned_topic(topic, 3))
    consumer = client.subscribe(topic, "sub", consumer_type=consumer_type)
    producer = client.create_producer(
        topic,
        message_router=lambda msg, partitions: 0 if msg.data().startswith(b"hello") else 1,
    )
    for i in range(5):
        producer.send(b"hello-%d" % i)
        producer.send(b"world-%d" % i)
    by_partition = collections.defaultdict(list)
    for msg in _receive_all(consumer, 10):
        by_partition[msg.message_id().partition()].append(msg.data())
    assert sorted(by_partition) == [0, 1]
    assert by_partition[0] == [b"hello-%d" % i for i in range(5)]
    assert by_partition[1] == [b"world-%d" % i for i in range(5)]


@pytest.mark.interop
def test_last_message_id_carries_the_partition_index(
    client: pulsar.Client, broker: BackgroundBroker, topic: str
) -> None:
    broker.call(broker.service.create_partitioned_topic(topic, 2))
    producer = client.create_producer(f"{topic}-partition-1")
    sent = producer.send(b"last")
    consumer = client.subscribe(f"{topic}-partition-1", "sub")
    last = consumer.get_last_message_id()
    assert (last.partition(), last.ledger_id(), last.entry_id()) == (
        1,
        sent.ledger_id(),
        sent.entry_id(),
    )


@pytest.mark.interop
def test_growing_partitions_reaches_new_partitions(
    client: pulsar.Client, broker: BackgroundBroker, topic: str
) -> None:
    broker.call(broker.service.create_partitioned_topic(topic, 2))
    broker.call(broker.service.update_partitioned_topic(topic, 3))
    assert len(client.get_topic_partitions(topic)) == 3
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(
        topic,
        batching_enabled=False,
        message_router=lambda msg, partitions: partitions - 1,
    )
    producer.send(b"last")
    msg = consumer.receive(timeout_millis=10_000)
    assert msg.topic_name() == f"{topic}-partition-2"


@pytest.mark.interop
def test_namespace_policy_auto_creates_partitioned_topics(
    client: pulsar.Client, broker: BackgroundBroker
) -> None:
    resources = broker.stack.resources
    policies = NamespacePolicies(
        auto_topic_creation=AutoTopicCreationOverride(True, "partitioned", 3)
    )
    broker.call(resources.create_namespace("public", "auto-partitioned", policies))
    topic = "persistent://public/auto-partitioned/orders"
    producer = client.create_producer(topic)
    producer.send(b"x")
    assert broker.call(broker.service.partitioned.partitions(_name(topic))) == 3
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    # A plain topic is still plain.
    broker.call(
        resources.update_namespace_policies(
            "public",
            "auto-partitioned",
            lambda p: dataclasses.replace(p, auto_topic_creation=AutoTopicCreationOverride(True)),
        )
    )
    client.create_producer("persistent://public/auto-partitioned/plain").send(b"y")
    assert broker.call(broker.service.partitioned.partitions(_name(f"{topic}-plain"))) == 0


def _name(topic: str) -> TopicName:
    return TopicName.parse(topic)
