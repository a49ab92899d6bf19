"""Batch-index acknowledgement (PIP-54) with the official client: a partly acknowledged batch is
redelivered with its ack set, and the client hands out only the messages still unacknowledged."""

from __future__ import annotations

import pulsar
import pytest

from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for


def _batch_producer(client: pulsar.Client, topic: str) -> pulsar.Producer:
    # Three messages per batch, sent together: one entry holding m0, m1, m2.
    return client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=3,
        batching_max_publish_delay_ms=60_000,
    )


def _consumer(
    client: pulsar.Client, topic: str, *, batch_index_ack: bool = True
) -> pulsar.Consumer:
    return client.subscribe(
        topic,
        "sub",
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
        batch_index_ack_enabled=batch_index_ack,
    )


def _send_batch(producer: pulsar.Producer) -> None:
    for i in range(3):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()


def _remaining(broker: BackgroundBroker, topic: str) -> list[tuple[str, tuple[int, ...]]]:
    def read() -> list[tuple[str, tuple[int, ...]]]:
        cursor = broker.service.topics[topic].subscriptions["sub"].cursor
        entries = broker.service.topics[topic].ledger.last_confirmed_position
        words = cursor.batch_deleted_indexes(entries)
        return [(str(entries), words)] if words is not None else []

    return broker.run(read)  # type: ignore[no-any-return]


def _drain(consumer: pulsar.Consumer) -> list[bytes]:
    got = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=500)
        except pulsar.Timeout:
            return got
        got.append(msg.data())


def test_a_batch_whose_middle_message_is_acked_redelivers_only_the_others(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = _batch_producer(client, topic)
    consumer = _consumer(client, topic)
    _send_batch(producer)
    msgs = [consumer.receive(timeout_millis=10_000) for _ in range(3)]
    assert [m.data() for m in msgs] == [b"m0", b"m1", b"m2"]
    assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in msgs}) == 1
    consumer.acknowledge(msgs[1])
    # The client groups acks; wait until the broker holds the batch's remaining ack set.
    wait_for(lambda: _remaining(broker, topic) != [], message="the batch-index ack to land")
    assert _remaining(broker, topic)[0][1] == (0b101,)
    consumer.close()

    again = _consumer(client, topic)
    assert _drain(again) == [b"m0", b"m2"]


def test_acking_every_message_of_a_batch_acknowledges_the_entry(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = _batch_producer(client, topic)
    consumer = _consumer(client, topic)
    _send_batch(producer)
    for msg in [consumer.receive(timeout_millis=10_000) for _ in range(3)]:
        consumer.acknowledge(msg)

    def backlog() -> int:
        stats = broker.run(broker.service.topic_stats, topic)
        return int(stats["subscriptions"]["sub"]["msgBacklog"])

    wait_for(lambda: backlog() == 0, message="the entry to be acknowledged")
    consumer.close()
    assert _drain(_consumer(client, topic)) == []


def test_without_batch_index_acks_the_client_redelivers_the_whole_batch(
    client: pulsar.Client, topic: str
) -> None:
    producer = _batch_producer(client, topic)
    consumer = _consumer(client, topic, batch_index_ack=False)
    _send_batch(producer)
    msgs = [consumer.receive(timeout_millis=10_000) for _ in range(3)]
    consumer.acknowledge(msgs[1])  # the client keeps it: the entry is not complete
    consumer.close()
    assert _drain(_consumer(client, topic, batch_index_ack=False)) == [b"m0", b"m1", b"m2"]


def test_negative_ack_of_a_partly_acked_batch_brings_back_only_unacked_messages(
    client: pulsar.Client, topic: str
) -> None:
    producer = _batch_producer(client, topic)
    consumer = client.subscribe(
        topic,
        "sub",
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
        batch_index_ack_enabled=True,
        negative_ack_redelivery_delay_ms=100,
    )
    _send_batch(producer)
    msgs = [consumer.receive(timeout_millis=10_000) for _ in range(3)]
    consumer.acknowledge(msgs[0])
    consumer.acknowledge(msgs[2])
    consumer.negative_acknowledge(msgs[1])
    again = consumer.receive(timeout_millis=10_000)
    assert again.data() == b"m1"
    assert again.redelivery_count() >= 1
    consumer.acknowledge(again)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)
