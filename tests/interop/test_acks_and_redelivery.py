"""Acknowledgements move the durable cursor; negative acks and unacknowledged messages come back."""

from __future__ import annotations

import pulsar
import pytest

from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for


def _send(producer: pulsar.Producer, count: int) -> None:
    for i in range(count):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()


def _receive(consumer: pulsar.Consumer, count: int) -> list[pulsar.Message]:
    return [consumer.receive(timeout_millis=10_000) for _ in range(count)]


def _backlog(broker: BackgroundBroker, topic: str, subscription: str) -> int:
    stats = broker.run(broker.service.topic_stats, topic)
    return int(stats["subscriptions"][subscription]["msgBacklog"])


def _wait_backlog(broker: BackgroundBroker, topic: str, subscription: str, expected: int) -> None:
    """Acks are grouped by the client (100 ms); poll the broker until they landed."""
    wait_for(
        lambda: _backlog(broker, topic, subscription) == expected,
        message=lambda: f"backlog {expected} (it is {_backlog(broker, topic, subscription)})",
    )


def test_individual_acks_are_not_redelivered_after_resubscribe(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(
        topic, "ind", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=100
    )
    _send(producer, 10)
    msgs = _receive(consumer, 10)
    for msg in msgs:
        if int(msg.data()[1:]) % 2 == 0:
            consumer.acknowledge(msg)
    _wait_backlog(broker, topic, "ind", 5)
    consumer.close()
    again = client.subscribe(topic, "ind", consumer_type=pulsar.ConsumerType.Shared)
    got = sorted(int(m.data()[1:]) for m in _receive(again, 5))
    assert got == [1, 3, 5, 7, 9]
    with pytest.raises(pulsar.Timeout):
        again.receive(timeout_millis=300)


def test_cumulative_ack_acknowledges_everything_before(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "cum", consumer_type=pulsar.ConsumerType.Exclusive)
    _send(producer, 10)
    msgs = _receive(consumer, 10)
    consumer.acknowledge_cumulative(msgs[6])
    _wait_backlog(broker, topic, "cum", 3)
    consumer.close()
    again = client.subscribe(topic, "cum", consumer_type=pulsar.ConsumerType.Exclusive)
    assert [m.data() for m in _receive(again, 3)] == [b"m7", b"m8", b"m9"]


def test_negative_ack_causes_redelivery(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(
        topic,
        "nack",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
    )
    _send(producer, 5)
    first = _receive(consumer, 5)
    nacked = first[2]
    for msg in first:
        if msg.message_id() == nacked.message_id():
            consumer.negative_acknowledge(msg)
        else:
            consumer.acknowledge(msg)
    again = consumer.receive(timeout_millis=10_000)
    assert again.data() == nacked.data()
    assert again.redelivery_count() == 1
    consumer.acknowledge(again)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=400)


def test_negative_ack_on_exclusive_redelivers_in_order(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(
        topic,
        "nack-excl",
        consumer_type=pulsar.ConsumerType.Exclusive,
        negative_ack_redelivery_delay_ms=100,
    )
    _send(producer, 3)
    msgs = _receive(consumer, 3)
    consumer.acknowledge(msgs[0])
    consumer.negative_acknowledge(msgs[1])
    consumer.acknowledge(msgs[2])
    again = consumer.receive(timeout_millis=10_000)
    assert again.data() == b"m1"
    assert again.redelivery_count() >= 1


def test_unacked_messages_of_a_closed_shared_consumer_go_to_the_others(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    leaving = client.subscribe(
        topic, "leave", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=50
    )
    _send(producer, 20)
    taken = _receive(leaving, 20)
    assert len(taken) == 20
    staying = client.subscribe(topic, "leave", consumer_type=pulsar.ConsumerType.Shared)
    leaving.close()
    got = sorted(int(m.data()[1:]) for m in _receive(staying, 20))
    assert got == list(range(20))


def test_redeliver_unacknowledged_messages_resends_everything_unacked(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "redeliver", consumer_type=pulsar.ConsumerType.Failover)
    _send(producer, 4)
    first = _receive(consumer, 4)
    consumer.acknowledge(first[0])
    consumer.redeliver_unacknowledged_messages()
    again = [m.data() for m in _receive(consumer, 3)]
    assert again == [b"m1", b"m2", b"m3"]


def test_redelivery_counts_drive_the_clients_dead_letter_topic(
    client: pulsar.Client, topic: str
) -> None:
    dead = f"{topic}-dlq"
    watcher = client.subscribe(dead, "watch", initial_position=pulsar.InitialPosition.Earliest)
    consumer = client.subscribe(
        topic,
        "work",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
            max_redeliver_count=2, dead_letter_topic=dead
        ),
    )
    client.create_producer(topic, batching_enabled=False).send(b"poison")
    for expected_count in range(3):
        msg = consumer.receive(timeout_millis=10_000)
        assert msg.redelivery_count() == expected_count
        consumer.negative_acknowledge(msg)
    assert watcher.receive(timeout_millis=10_000).data() == b"poison"
