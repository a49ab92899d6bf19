"""Seek (by message id, by publish time, to earliest) and get_last_message_id with the official
client."""

from __future__ import annotations

import time

import pulsar
import pytest

from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for


def _send(producer: pulsar.Producer, start: int, count: int) -> list[pulsar.MessageId]:
    return [producer.send(f"m{i}".encode()) for i in range(start, start + count)]


def _receive_data(consumer: pulsar.Consumer, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(msg)
        out.append(msg.data())
    return out


def test_seek_to_a_message_id_redelivers_what_follows_it(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "seek-id")
    ids = _send(producer, 0, 10)
    assert _receive_data(consumer, 10) == [f"m{i}".encode() for i in range(10)]
    consumer.seek(ids[3])
    # The broker resets the cursor to m3; the client skips the seek position itself unless
    # start_message_id_inclusive is set (its default is exclusive).
    assert _receive_data(consumer, 6) == [f"m{i}".encode() for i in range(4, 10)]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)


def test_seek_with_inclusive_start_redelivers_the_seek_message_itself(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "seek-incl", start_message_id_inclusive=True)
    ids = _send(producer, 0, 5)
    _receive_data(consumer, 5)
    consumer.seek(ids[2])
    assert _receive_data(consumer, 3) == [b"m2", b"m3", b"m4"]


def test_seek_to_earliest_replays_everything(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "seek-earliest")
    _send(producer, 0, 5)
    _receive_data(consumer, 5)
    consumer.seek(pulsar.MessageId.earliest)
    assert _receive_data(consumer, 5) == [f"m{i}".encode() for i in range(5)]


def test_seek_by_publish_time_starts_at_the_first_later_message(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "seek-time")
    _send(producer, 0, 5)
    # Publish times have millisecond resolution: make sure the next batch is strictly later.
    boundary = int(time.time() * 1000) + 5
    while int(time.time() * 1000) <= boundary:
        time.sleep(0.001)
    _send(producer, 5, 5)
    _receive_data(consumer, 10)
    consumer.seek(boundary)
    assert _receive_data(consumer, 5) == [f"m{i}".encode() for i in range(5, 10)]


def test_seek_by_a_time_after_every_message_delivers_only_new_ones(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "seek-future")
    _send(producer, 0, 3)
    _receive_data(consumer, 3)
    consumer.seek(int(time.time() * 1000) + 60_000)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)
    producer.send(b"new")
    assert _receive_data(consumer, 1) == [b"new"]


def test_get_last_message_id_is_the_last_published_message(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "last-id")
    ids = _send(producer, 0, 4)
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())


def test_get_last_message_id_of_a_batch_names_its_last_message(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=50
    )
    consumer = client.subscribe(topic, "last-batch")
    for i in range(5):
        producer.send_async(f"b{i}".encode(), None)
    producer.flush()
    last = consumer.get_last_message_id()
    assert last.batch_index() == 4
    received = [consumer.receive(timeout_millis=10_000) for _ in range(5)]
    tail = received[-1].message_id()
    assert (last.ledger_id(), last.entry_id()) == (tail.ledger_id(), tail.entry_id())


def test_reader_reads_from_earliest_and_leaves_no_subscription_behind(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    _send(producer, 0, 5)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = [reader.read_next(timeout_millis=10_000).data() for _ in range(5)]
    assert got == [f"m{i}".encode() for i in range(5)]
    assert not reader.has_message_available()
    assert len(broker.run(broker.service.topic_stats, topic)["subscriptions"]) == 1
    reader.close()

    def gone() -> bool:
        return not broker.run(broker.service.topic_stats, topic)["subscriptions"]

    wait_for(gone, message="the reader's subscription to be removed")


def test_reader_starts_after_a_message_id_or_at_it_when_inclusive(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = _send(producer, 0, 5)
    after = client.create_reader(topic, ids[1])
    assert after.read_next(timeout_millis=10_000).data() == b"m2"
    at = client.create_reader(topic, ids[1], start_message_id_inclusive=True)
    assert at.read_next(timeout_millis=10_000).data() == b"m1"
    latest = client.create_reader(topic, pulsar.MessageId.latest)
    producer.send(b"new")
    assert latest.read_next(timeout_millis=10_000).data() == b"new"


def test_reader_seek_rewinds_it(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    _send(producer, 0, 4)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [reader.read_next(timeout_millis=10_000).data() for _ in range(4)] == [
        b"m0",
        b"m1",
        b"m2",
        b"m3",
    ]
    reader.seek(pulsar.MessageId.earliest)
    assert reader.read_next(timeout_millis=10_000).data() == b"m0"
