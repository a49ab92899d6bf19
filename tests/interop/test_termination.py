"""Topic termination as the official client sees it: sends and new producers fail with
TopicTerminated; consumers still drain what was published, and are not sent REACHED_END_OF_TOPIC
(which C++ clients up to 4.2 answer by closing the connection)."""

from __future__ import annotations

import pulsar
import pytest

from tests.support.broker_stack import BackgroundBroker


def test_send_after_termination_fails_with_topic_terminated(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    last_sent = producer.send(b"before")
    last = broker.call(broker.service.terminate_topic(topic))
    assert (last.ledger_id, last.entry_id) == (last_sent.ledger_id(), last_sent.entry_id())
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"after")


def test_new_producer_on_a_terminated_topic_is_refused(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    client.create_producer(topic).send(b"only")
    broker.call(broker.service.terminate_topic(topic))
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)


def test_consumer_drains_a_terminated_topic_and_its_connection_stays_up(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "drain", initial_position=pulsar.InitialPosition.Earliest)
    for i in range(5):
        producer.send(f"m{i}".encode())
    broker.call(broker.service.terminate_topic(topic))
    got = []
    for _ in range(5):
        msg = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(msg)
        got.append(msg.data())
    assert got == [f"m{i}".encode() for i in range(5)]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)
    # The client was not sent REACHED_END_OF_TOPIC: its connection still serves other work.
    assert consumer.is_connected()
    other = f"{topic}-other"
    client.create_producer(other).send(b"still working")
    stats = broker.run(broker.service.topic_stats, topic)
    assert stats["terminated"] is True
