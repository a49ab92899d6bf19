"""The conformance criteria on the migration bridge (``docs/client.md#conformance-map``,
``docs/protocol.md#feature-gating``): ``persistent://`` topics on a broker that does **not**
advertise scalable topics, where the client drives a synthetic single-segment layout through the
same producer/consumer code a ``topic://`` topic uses - and C15, which only a broker without the
feature can show. The criteria on ``topic://`` topics are in ``test_conformance.py``.
"""

from __future__ import annotations

import pytest

import braid
from braid.broker.resources import AutoTopicCreationOverride, NamespacePolicies
from braid.client.layout_source import DagWatchLayoutSource, parse_topic
from braid.core.message_id import message_position
from tests.support.broker_stack import BackgroundBroker


@pytest.fixture(scope="module")
def dedup_namespace(broker: BackgroundBroker) -> str:
    resources = broker.stack.resources
    broker.call(
        resources.create_namespace("public", "dedup", NamespacePolicies(deduplication_enabled=True))
    )
    return "persistent://public/dedup"


@pytest.fixture(scope="module")
def no_autocreate_namespace(broker: BackgroundBroker) -> str:
    policies = NamespacePolicies(auto_topic_creation=AutoTopicCreationOverride(False))
    broker.call(broker.stack.resources.create_namespace("public", "closed", policies))
    return "persistent://public/closed"


def test_c2_keys_route_to_the_single_legacy_segment(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    ids = producer.send_many([b"x"] * 10, keys=[f"k{i}" for i in range(10)])
    positions = [message_position(i) for i in ids]
    assert {p.segment_id for p in positions if p is not None} == {0}


def test_c3_per_key_order_with_async_sends(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    stream = client.subscribe_stream(topic, "c3", initial_position="earliest")
    futures = [producer.send_async(b"%d" % i, key=f"k{i % 3}") for i in range(300)]
    for f in futures:
        f.result(timeout=30)
    got: list[braid.Message] = []
    while len(got) < 300:
        got += stream.receive_many(300, timeout=10)
    for key in ("k0", "k1", "k2"):
        seqs = [int(m.value) for m in got if m.key == key]
        assert seqs == sorted(seqs) and len(seqs) == 100


def test_c5_sequence_ids_continue_and_duplicates_are_dropped(
    client: braid.Client, dedup_namespace: str
) -> None:
    topic = f"{dedup_namespace}/c5"
    with client.create_producer(topic, producer_name="c5-producer") as producer:
        producer.send_many([b"a", b"b", b"c"])
        assert producer.last_sequence_id == 2
    with client.create_producer(topic, producer_name="c5-producer") as again:
        assert again.last_sequence_id == 2  # from the broker's deduplication state
        duplicate = again.send(b"a again", sequence_id=1)
        assert duplicate == braid.MessageId.earliest()  # dropped by the broker
        fresh = again.send(b"d")
        assert again.last_sequence_id == 3 and fresh != braid.MessageId.earliest()
    reader = client.create_checkpoint_consumer(topic, start=braid.Checkpoint.earliest())
    values = []
    while len(values) < 4:
        values += [m.value for m in reader.receive_many(10, timeout=10)]
    assert values == [b"a", b"b", b"c", b"d"]


# C6 - access modes: test_produce_consume.py (test_exclusive_access_modes,
# test_wait_for_exclusive_gets_the_topic_when_the_owner_leaves).
def test_c6_exclusive_collision_surfaces_from_create(client: braid.Client, topic: str) -> None:
    client.create_producer(topic, access_mode="exclusive")
    with pytest.raises(braid.ProducerBusyError):
        client.create_producer(topic, access_mode="exclusive")


# C7 - Stream on a legacy layout: Failover per segment, cumulative ack (test_produce_consume.py).
def test_c7_cumulative_ack_moves_the_broker_cursor(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching=False)
    stream = client.subscribe_stream(topic, "c7", initial_position="earliest")
    producer.send_many([b"1", b"2", b"3"])
    got = []
    while len(got) < 3:
        got += stream.receive_many(3, timeout=10)
    stream.acknowledge_cumulative(got[-1])
    stream.close()
    resumed = client.subscribe_stream(topic, "c7")
    assert resumed.receive(timeout=0.5) is None


def test_c8_queue_individual_and_negative_acks(client: braid.Client, topic: str) -> None:
    queue = client.subscribe_queue(topic, "c8", negative_ack_delay=0.05)
    client.create_producer(topic, batching=False).send_many([b"keep", b"retry"])
    first = queue.receive_many(2, timeout=10)
    while len(first) < 2:
        first += queue.receive_many(2, timeout=10)
    queue.acknowledge(first[0])
    queue.negative_acknowledge(first[1])
    again = queue.receive(timeout=10)
    assert again is not None and again.value == b"retry" and again.redelivery_count == 1
    queue.acknowledge(again)


# C9 - checkpoint consumer: test_produce_consume.py (restore reads exactly the rest, latest
# start exact); grouped mode needs a controller, so a classic topic refuses it.
def test_c9_grouped_checkpoint_needs_a_scalable_topic(client: braid.Client, topic: str) -> None:
    with pytest.raises(braid.FeatureNotSupportedError):
        client.create_checkpoint_consumer(topic, group="g")


# C10 - ids and checkpoints: tests/unit/client/test_message_id.py, test_checkpoint.py (golden
# bytes of format version 1, round trips, fuzzed decoders).
def test_c10_ids_are_ordered_and_restorable(client: braid.Client, topic: str) -> None:
    ids = client.create_producer(topic).send_many([b"a", b"b"])
    restored = [braid.MessageId.from_bytes(i.to_bytes()) for i in ids]
    assert restored == ids and restored[0] < restored[1]


def test_c12_not_found_is_distinct_when_auto_creation_is_off(
    client: braid.Client, no_autocreate_namespace: str
) -> None:
    with pytest.raises(braid.NotFoundError):
        client.create_producer(f"{no_autocreate_namespace}/absent").send(b"x")
    with pytest.raises(braid.NotFoundError):
        client.subscribe_queue(f"{no_autocreate_namespace}/absent", "s")


def test_c13_async_apis_never_raise_synchronously(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    future = producer.send_async(None)  # type: ignore[arg-type]
    assert isinstance(future.exception(timeout=5), braid.BraidError)


def test_c14_close_is_idempotent_and_resources_outlive_errors(
    client: braid.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    with pytest.raises(braid.BraidError):
        producer.send("wrong type")  # type: ignore[arg-type]
    producer.send(b"the producer is still valid")
    producer.close()
    producer.close()


def test_c15_no_scalable_command_reaches_a_broker_without_support(
    broker: BackgroundBroker, client: braid.Client
) -> None:
    with pytest.raises(braid.FeatureNotSupportedError):
        client.create_producer("topic://public/default/c15")

    async def open_watch() -> None:
        ctx, _ = client.async_client._context()
        source = DagWatchLayoutSource(ctx, parse_topic("persistent://public/default/c15"))
        await source._open_session()  # the last gate refuses before sending anything

    with pytest.raises(braid.FeatureNotSupportedError):
        client._run(open_watch())
