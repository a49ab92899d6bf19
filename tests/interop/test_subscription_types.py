"""Exclusive, Failover and Shared subscriptions with the official client; Key_Shared is refused."""

from __future__ import annotations

import re
import time

import pulsar
import pytest

from tests.support.broker_stack import BackgroundBroker


def _send(producer: pulsar.Producer, count: int, prefix: str = "m") -> None:
    for i in range(count):
        producer.send_async(f"{prefix}{i}".encode(), None)
    producer.flush()


def _drain(consumer: pulsar.Consumer, *, idle_ms: int = 300) -> list[bytes]:
    """Receive until nothing arrives for ``idle_ms``; ack everything received."""
    got: list[bytes] = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=idle_ms)
        except pulsar.Timeout:
            return got
        got.append(msg.data())
        consumer.acknowledge(msg)


def test_exclusive_subscription_refuses_a_second_consumer(
    client: pulsar.Client, topic: str
) -> None:
    first = client.subscribe(topic, "excl", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "excl", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = client.create_producer(topic)
    producer.send(b"hello")
    assert first.receive(timeout_millis=10_000).data() == b"hello"


def test_subscription_refuses_a_consumer_of_another_type(client: pulsar.Client, topic: str) -> None:
    client.subscribe(topic, "typed", consumer_type=pulsar.ConsumerType.Shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "typed", consumer_type=pulsar.ConsumerType.Failover)


def test_exclusive_subscription_accepts_a_new_consumer_after_the_first_closes(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    first = client.subscribe(topic, "handover", consumer_type=pulsar.ConsumerType.Exclusive)
    _send(producer, 10)
    received = first.receive(timeout_millis=10_000)
    first.acknowledge(received)
    first.close()
    second = client.subscribe(topic, "handover", consumer_type=pulsar.ConsumerType.Exclusive)
    # Everything the first did not acknowledge comes to the second, in order.
    assert _drain(second) == [f"m{i}".encode() for i in range(1, 10)]


def test_failover_switches_to_the_standby_when_the_active_consumer_closes(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    # Failover's active consumer is the first by consumer name.
    active = client.subscribe(
        topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a-active"
    )
    standby = client.subscribe(
        topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b-standby"
    )
    _send(producer, 20, "first-")
    got_active = _drain(active)
    assert got_active == [f"first-{i}".encode() for i in range(20)]
    with pytest.raises(pulsar.Timeout):
        standby.receive(timeout_millis=200)
    stats = broker.run(broker.service.topic_stats, topic)
    assert stats["subscriptions"]["fo"]["activeConsumerName"] == "a-active"

    active.close()
    _send(producer, 20, "second-")
    assert _drain(standby) == [f"second-{i}".encode() for i in range(20)]
    stats = broker.run(broker.service.topic_stats, topic)
    assert stats["subscriptions"]["fo"]["activeConsumerName"] == "b-standby"


def test_failover_standby_gets_what_the_active_left_unacknowledged(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    active = client.subscribe(
        topic, "fo2", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a"
    )
    standby = client.subscribe(
        topic, "fo2", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b"
    )
    _send(producer, 10)
    for _ in range(10):
        active.receive(timeout_millis=10_000)  # received, never acknowledged
    active.close()
    assert _drain(standby) == [f"m{i}".encode() for i in range(10)]


def test_shared_subscription_spreads_messages_and_delivers_each_once(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumers = [
        client.subscribe(
            topic,
            "shared",
            consumer_type=pulsar.ConsumerType.Shared,
            receiver_queue_size=10,
            consumer_name=f"c{i}",
        )
        for i in range(3)
    ]
    count = 300
    _send(producer, count)
    received: dict[int, list[bytes]] = {i: [] for i in range(3)}
    deadline = time.monotonic() + 30
    while sum(len(v) for v in received.values()) < count and time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            try:
                msg = c.receive(timeout_millis=20)
            except pulsar.Timeout:
                continue
            received[i].append(msg.data())
            c.acknowledge(msg)
    everything = [m for v in received.values() for m in v]
    assert sorted(everything) == sorted(f"m{i}".encode() for i in range(count))
    assert len(everything) == len(set(everything)), "a message was delivered twice"
    assert all(len(v) > 0 for v in received.values()), {k: len(v) for k, v in received.items()}


def test_unsubscribe_deletes_the_subscription(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "gone")
    _send(producer, 3)
    consumer.unsubscribe()
    assert "gone" not in broker.run(broker.service.topic_stats, topic)["subscriptions"]
    # A new subscription of that name starts afresh at the latest position.
    again = client.subscribe(topic, "gone")
    with pytest.raises(pulsar.Timeout):
        again.receive(timeout_millis=300)


def test_pattern_subscription_finds_the_namespace_topics(client: pulsar.Client, topic: str) -> None:
    for suffix in ("a", "b", "other"):
        client.create_producer(f"{topic}-{suffix}").send(suffix.encode())
    consumer = client.subscribe(
        re.compile(re.escape(topic) + r"-[ab]"),
        "pattern",
        initial_position=pulsar.InitialPosition.Earliest,
    )
    got = sorted(consumer.receive(timeout_millis=10_000).data() for _ in range(2))
    assert got == [b"a", b"b"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)
