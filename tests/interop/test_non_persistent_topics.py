"""``non-persistent://`` topics with the official client (ADR 0062): produce and consume with every
subscription type, drops when no consumer has room (counted in the topic's stats), regex
subscriptions over persistent and non-persistent topics, and Pulsar's refusals of what needs
stored messages."""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from typing import Any

import pulsar
import pytest

from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for

TYPES = {
    "exclusive": pulsar.ConsumerType.Exclusive,
    "failover": pulsar.ConsumerType.Failover,
    "shared": pulsar.ConsumerType.Shared,
    "key-shared": pulsar.ConsumerType.KeyShared,
}


@pytest.fixture
def np_topic(topic: str) -> str:
    """A non-persistent topic name no other test uses."""
    return "non-" + topic


def _receive(consumer: pulsar.Consumer, count: int) -> list[pulsar.Message]:
    got = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(msg)
        got.append(msg)
    return got


def _nothing_more(consumer: pulsar.Consumer) -> None:
    # Proving absence needs a bounded wait; half a second covers a dispatch round trip.
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)


def _stats(broker: BackgroundBroker, topic: str) -> dict[str, Any]:
    stats: dict[str, Any] = broker.run(broker.service.topic_stats, topic)
    return stats


@pytest.mark.parametrize("kind", list(TYPES))
def test_a_connected_consumer_of_each_subscription_type_gets_every_message_in_order(
    client: pulsar.Client, np_topic: str, kind: str
) -> None:
    consumer = client.subscribe(np_topic, f"sub-{kind}", consumer_type=TYPES[kind])
    producer = client.create_producer(np_topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"m{i}".encode(), partition_key=f"k{i % 3}")
    got = _receive(consumer, 20)
    assert [m.data() for m in got] == [f"m{i}".encode() for i in range(20)]
    assert {m.topic_name() for m in got} == {np_topic}
    _nothing_more(consumer)


def test_a_consumer_that_connects_later_gets_only_later_messages(
    client: pulsar.Client, np_topic: str
) -> None:
    producer = client.create_producer(np_topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"early{i}".encode())  # acknowledged at once, delivered to nobody
    consumer = client.subscribe(np_topic, "late", initial_position=pulsar.InitialPosition.Earliest)
    producer.send(b"late")
    assert consumer.receive(timeout_millis=10_000).data() == b"late"
    _nothing_more(consumer)


def test_shared_consumers_split_the_messages_and_each_gets_some(
    client: pulsar.Client, np_topic: str
) -> None:
    first = client.subscribe(np_topic, "split", consumer_type=pulsar.ConsumerType.Shared)
    second = client.subscribe(np_topic, "split", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(np_topic, batching_enabled=False)
    for i in range(40):
        producer.send(f"m{i}".encode())
    received: dict[str, list[bytes]] = {"first": [], "second": []}
    for name, consumer in (("first", first), ("second", second)):
        while True:
            try:
                msg = consumer.receive(timeout_millis=1_000)
            except pulsar.Timeout:
                break
            received[name].append(msg.data())
    assert received["first"] and received["second"]
    assert sorted(received["first"] + received["second"]) == sorted(
        f"m{i}".encode() for i in range(40)
    )


def test_key_shared_consumers_each_own_their_keys(client: pulsar.Client, np_topic: str) -> None:
    consumers = [
        client.subscribe(
            np_topic, "keys", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=f"c{i}"
        )
        for i in range(2)
    ]
    producer = client.create_producer(np_topic, batching_enabled=False)
    for i in range(60):
        producer.send(f"{i}".encode(), partition_key=f"key-{i % 6}")
    owners: dict[str, set[int]] = defaultdict(set)
    order: dict[str, list[int]] = defaultdict(list)
    for index, consumer in enumerate(consumers):
        while True:
            try:
                msg = consumer.receive(timeout_millis=1_000)
            except pulsar.Timeout:
                break
            owners[msg.partition_key()].add(index)
            order[msg.partition_key()].append(int(msg.data()))
    assert sum(len(v) for v in order.values()) == 60
    assert all(len(who) == 1 for who in owners.values()), owners
    assert all(seq == sorted(seq) for seq in order.values())


def test_failover_delivers_to_the_active_consumer_only(
    client: pulsar.Client, np_topic: str
) -> None:
    active = client.subscribe(
        np_topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a"
    )
    standby = client.subscribe(
        np_topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b"
    )
    producer = client.create_producer(np_topic, batching_enabled=False)
    for i in range(10):
        producer.send(f"m{i}".encode())
    assert [m.data() for m in _receive(active, 10)] == [f"m{i}".encode() for i in range(10)]
    _nothing_more(standby)
    active.close()
    producer.send(b"after")
    assert standby.receive(timeout_millis=10_000).data() == b"after"


def test_messages_no_consumer_has_room_for_are_dropped_and_counted(
    client: pulsar.Client, broker: BackgroundBroker, np_topic: str
) -> None:
    # A queue of 5: the client grants 5 permits and, receiving nothing, grants no more.
    consumer = client.subscribe(np_topic, "small", receiver_queue_size=5)
    producer = client.create_producer(np_topic, batching_enabled=False)
    for i in range(12):
        producer.send(f"m{i}".encode())  # every send is acknowledged, delivered or not
    got = [m.data() for m in _receive(consumer, 5)]
    assert got == [f"m{i}".encode() for i in range(5)]
    stats = _stats(broker, np_topic)
    sub = stats["subscriptions"]["small"]
    assert sub["msgDropCount"] == 7
    assert sub["msgOutCounter"] == 5
    assert stats["msgInCounter"] == 12
    assert stats["storageSize"] == 0 and sub["msgBacklog"] == 0
    # Once the consumer has room again, new messages reach it.
    wait_for(
        lambda: (
            _stats(broker, np_topic)["subscriptions"]["small"]["consumers"][0]["availablePermits"]
            > 0
        ),
        message="the consumer granting permits again",
    )
    producer.send(b"fresh")
    assert consumer.receive(timeout_millis=10_000).data() == b"fresh"


def test_a_durable_subscription_without_consumers_drops_and_counts(
    client: pulsar.Client, broker: BackgroundBroker, np_topic: str
) -> None:
    client.subscribe(np_topic, "gone").close()
    producer = client.create_producer(np_topic, batching_enabled=False)
    for i in range(4):
        producer.send(f"m{i}".encode())
    sub = _stats(broker, np_topic)["subscriptions"]["gone"]
    assert sub["msgDropCount"] == 4 and sub["consumers"] == []
    again = client.subscribe(np_topic, "gone")
    _nothing_more(again)  # nothing was kept for it


def test_a_reader_gets_what_is_published_while_it_reads(
    client: pulsar.Client, np_topic: str
) -> None:
    reader = client.create_reader(np_topic, pulsar.MessageId.earliest)
    producer = client.create_producer(np_topic, batching_enabled=False)
    producer.send(b"one")
    assert reader.read_next(timeout_millis=10_000).data() == b"one"


def test_batched_messages_reach_the_consumer(client: pulsar.Client, np_topic: str) -> None:
    consumer = client.subscribe(np_topic, "batches")
    producer = client.create_producer(
        np_topic, batching_enabled=True, batching_max_messages=10, batching_max_publish_delay_ms=50
    )
    for i in range(30):
        producer.send_async(f"b{i}".encode(), None)
    producer.flush()
    assert [m.data() for m in _receive(consumer, 30)] == [f"b{i}".encode() for i in range(30)]


def test_a_regex_subscription_takes_persistent_and_non_persistent_topics(
    client: pulsar.Client, topic: str
) -> None:
    persistent = f"{topic}-regex-p"
    non_persistent = f"non-{topic}-regex-np"
    producers = [client.create_producer(t) for t in (persistent, non_persistent)]
    local = topic.rsplit("/", 1)[1]
    modes = pulsar.RegexSubscriptionMode
    every = client.subscribe(
        re.compile(f"public/default/{local}-regex-.*"),
        "regex-all",
        regex_subscription_mode=modes.AllTopics,
    )
    only_np = client.subscribe(
        re.compile(f"public/default/{local}-regex-.*"),
        "regex-np",
        regex_subscription_mode=modes.NonPersistentOnly,
    )
    for i, producer in enumerate(producers):
        for j in range(5):
            producer.send(f"{i}-{j}".encode())
    got = _receive(every, 10)
    assert {m.topic_name() for m in got} == {persistent, non_persistent}
    assert {m.topic_name() for m in _receive(only_np, 5)} == {non_persistent}
    _nothing_more(every)
    _nothing_more(only_np)


def test_seek_and_last_message_id_are_refused_on_a_non_persistent_topic(
    client: pulsar.Client, np_topic: str
) -> None:
    consumer = client.subscribe(np_topic, "no-seek")
    with pytest.raises(pulsar.PulsarException):
        consumer.seek(pulsar.MessageId.earliest)
    with pytest.raises(pulsar.PulsarException):
        consumer.get_last_message_id()
    # The consumer keeps working.
    producer = client.create_producer(np_topic)
    producer.send(b"still here")
    assert consumer.receive(timeout_millis=10_000).data() == b"still here"


def test_read_compacted_is_refused_on_a_non_persistent_topic(
    client: pulsar.Client, np_topic: str
) -> None:
    with pytest.raises(pulsar.PulsarException):
        client.subscribe(np_topic, "compacted", is_read_compacted=True)


def test_producing_while_consumers_come_and_go_never_blocks_the_producer(
    client: pulsar.Client, np_topic: str
) -> None:
    producer = client.create_producer(np_topic, batching_enabled=False)
    stop = threading.Event()
    sent = [0]

    def produce() -> None:
        while not stop.is_set():
            producer.send(b"x")
            sent[0] += 1

    worker = threading.Thread(target=produce)
    worker.start()
    try:
        for i in range(5):
            consumer = client.subscribe(
                np_topic, f"churn-{i}", consumer_type=pulsar.ConsumerType.Shared
            )
            consumer.receive(timeout_millis=10_000)
            consumer.close()
    finally:
        stop.set()
        worker.join(timeout=30)
    assert not worker.is_alive() and sent[0] > 0
