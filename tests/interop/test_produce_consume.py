"""The official client produces and consumes through Braid: volume, batching, compression, keys,
properties - every message arrives once, in order, with its key and properties intact."""

from __future__ import annotations

import threading

import pulsar
import pytest

from braid.broker.resources import NamespacePolicies
from tests.support.broker_stack import BackgroundBroker

# Without batching every message is its own fsync'd entry and its own round trip through the
# in-process broker: the unbatched run is the slow one of this tier (~50 s on 2 shared cores).
_UNBATCHED_COUNT = 100_000
_BATCHED_COUNT = 100_000


def _produce(
    producer: pulsar.Producer, count: int, *, with_keys: bool = True
) -> list[pulsar.MessageId]:
    """Send ``count`` numbered messages asynchronously; fail on any error callback.

    Callbacks run in receipt order, so the returned ids are in the order the broker stored them.
    """
    errors: list[pulsar.Result] = []
    ids: list[pulsar.MessageId] = []
    lock = threading.Lock()

    def done(result: pulsar.Result, msg_id: pulsar.MessageId) -> None:
        with lock:
            if result != pulsar.Result.Ok:
                errors.append(result)
            else:
                ids.append(msg_id)

    send = producer.send_async
    for i in range(count):
        if with_keys:
            send(
                b"message-%d" % i,
                done,
                properties={"i": str(i), "parity": str(i % 2)},
                partition_key=f"key-{i % 97}",
            )
        else:
            send(b"message-%d" % i, done, properties={"i": str(i), "parity": str(i % 2)})
    producer.flush()
    assert not errors, f"{len(errors)} sends failed, first: {errors[0]}"
    assert len(ids) == count
    return ids


def _consume_all(consumer: pulsar.Consumer, count: int) -> None:
    """Receive ``count`` messages, checking order, content, key and properties, then ack."""
    last = None
    for i in range(count):
        msg = consumer.receive(timeout_millis=20_000)
        assert msg.data() == b"message-%d" % i
        assert msg.partition_key() == f"key-{i % 97}"
        assert msg.properties() == {"i": str(i), "parity": str(i % 2)}
        last = msg
    assert last is not None
    consumer.acknowledge_cumulative(last)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=200)


@pytest.mark.parametrize(
    ("batching", "compression", "count"),
    [
        (False, pulsar.CompressionType.NONE, _UNBATCHED_COUNT),
        (True, pulsar.CompressionType.NONE, _BATCHED_COUNT),
        (True, pulsar.CompressionType.LZ4, _BATCHED_COUNT),
        (True, pulsar.CompressionType.ZSTD, _BATCHED_COUNT),
    ],
    ids=["unbatched", "batched", "batched-lz4", "batched-zstd"],
)
def test_messages_arrive_in_order_with_keys_and_properties(
    client: pulsar.Client,
    topic: str,
    batching: bool,
    compression: pulsar.CompressionType,
    count: int,
) -> None:
    consumer = client.subscribe(
        topic,
        "all",
        initial_position=pulsar.InitialPosition.Earliest,
        receiver_queue_size=2000,
    )
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        compression_type=compression,
        max_pending_messages=2000,
        block_if_queue_full=True,
        batching_max_messages=1000,
    )
    ids = _produce(producer, count)
    # Receipts come back in order: message ids never go backwards.
    assert ids == sorted(ids)
    _consume_all(consumer, count)


def test_single_message_round_trip_keeps_payload_bytes_exactly(
    client: pulsar.Client, topic: str
) -> None:
    payload = bytes(range(256)) * 40
    consumer = client.subscribe(topic, "exact")
    producer = client.create_producer(topic, batching_enabled=False)
    msg_id = producer.send(payload, properties={"k": "v"}, event_timestamp=1234)
    msg = consumer.receive(timeout_millis=10_000)
    assert msg.data() == payload
    assert msg.message_id() == msg_id
    assert msg.properties() == {"k": "v"}
    assert msg.event_timestamp() == 1234
    assert msg.publish_timestamp() > 0
    assert msg.redelivery_count() == 0
    consumer.acknowledge(msg)


def test_late_subscriber_at_latest_sees_only_new_messages(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    consumer = client.subscribe(topic, "late", initial_position=pulsar.InitialPosition.Latest)
    producer.send(b"after")
    assert consumer.receive(timeout_millis=10_000).data() == b"after"


def test_generated_producer_names_are_unique(client: pulsar.Client, topic: str) -> None:
    first = client.create_producer(topic)
    second = client.create_producer(topic)
    assert first.producer_name() and second.producer_name()
    assert first.producer_name() != second.producer_name()


def test_producer_with_a_taken_name_is_refused(client: pulsar.Client, topic: str) -> None:
    client.create_producer(topic, producer_name="only-one")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, producer_name="only-one")


def test_topic_survives_broker_side_reload_of_stats(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m{i}".encode())
    stats = broker.run(broker.service.topic_stats, topic)
    assert stats["msgInCounter"] == 5
    assert stats["numberOfEntries"] == 5
    assert len(stats["publishers"]) == 1


def test_deduplication_drops_a_resent_sequence_id(
    broker: BackgroundBroker, client: pulsar.Client
) -> None:
    resources = broker.stack.resources
    if not broker.call(resources.namespace_exists("public", "dedup")):
        broker.call(
            resources.create_namespace(
                "public", "dedup", NamespacePolicies(deduplication_enabled=True)
            )
        )
    topic = "persistent://public/dedup/payments"
    producer = client.create_producer(topic, producer_name="payments", batching_enabled=False)
    for seq in range(5):
        producer.send(f"p{seq}".encode(), sequence_id=seq)
    producer.close()
    again = client.create_producer(topic, producer_name="payments", batching_enabled=False)
    assert again.last_sequence_id() == 4
    again.send(b"p3-again", sequence_id=3)  # a resend: answered, not stored
    again.send(b"p5", sequence_id=5)
    consumer = client.subscribe(topic, "all", initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=10_000).data() for _ in range(6)]
    assert got == [b"p0", b"p1", b"p2", b"p3", b"p4", b"p5"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)
