"""Schemas through the Braid client against the scalable-topic broker (beyond conformance C11 in
``test_conformance.py``): a topic's schema evolves and old messages still decode (the consumer
fetches the writer's version), segments made by a merge share the schema, a value the schema
cannot encode fails only its own send, every consumer kind decodes, and ``persistent://``
topics (the migration bridge) behave the same."""

from __future__ import annotations

import pytest

import braid
from braid.core.names import TopicName
from tests.integration.client.conftest import ScalableBroker
from tests.integration.client.test_conformance import (
    create,
    layout_seen_by,
    merge,
    receive,
    segment_of,
    split,
)
from tests.support.avro_schemas import READING, READING_V2
from tests.support.polling import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_messages_of_every_schema_version_decode_with_the_consumers_schema(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    v1, v2 = braid.Schema.avro(READING), braid.Schema.avro(READING_V2)
    sclient.create_producer(scalable_topic, schema=v1).send_many(
        [{"sensor": f"s{i}", "value": i} for i in range(5)], keys=[f"s{i}" for i in range(5)]
    )
    sclient.create_producer(scalable_topic, schema=v2).send_many(
        [{"sensor": f"s{i}", "value": 10 + i, "unit": "C"} for i in range(5)],
        keys=[f"s{i}" for i in range(5)],
    )
    old_reader = sclient.create_checkpoint_consumer(
        scalable_topic, start=braid.Checkpoint.earliest(), schema=v1
    )
    new_reader = sclient.create_checkpoint_consumer(
        scalable_topic, start=braid.Checkpoint.earliest(), schema=v2
    )
    old = sorted(
        (m.value["value"], m.schema_version, tuple(m.value)) for m in receive(old_reader, 10)
    )
    new = sorted(
        (m.value["value"], m.value["unit"], m.schema_version) for m in receive(new_reader, 10)
    )
    assert old == [(i, 0, ("sensor", "value")) for i in range(5)] + [
        (10 + i, 1, ("sensor", "value")) for i in range(5)
    ]
    assert new == [(i, None, 0) for i in range(5)] + [(10 + i, "C", 1) for i in range(5)]


def test_entries_waiting_for_their_writer_version_keep_the_key_order(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 1)
    v1, v2 = braid.Schema.avro(READING), braid.Schema.avro(READING_V2)
    old = sclient.create_producer(scalable_topic, schema=v1, batching=False)
    new = sclient.create_producer(scalable_topic, schema=v2, batching=False)
    stream = sclient.subscribe_stream(
        scalable_topic, "ordered", initial_position="earliest", schema=v2, receiver_queue_size=4
    )
    for i in range(4):
        old.send({"sensor": "k", "value": i}, key="k")
    decoder = stream._consumer.decoder
    wait_for(lambda: len(decoder.writers) == 1, message="version 0 learnt")
    # No permits left: these wait in the broker, then come in one burst once the application
    # takes the first four - an entry of an unknown version (1) followed by ones of a known
    # version (0), which must not overtake it while its definition is fetched.
    new.send({"sensor": "k", "value": 4, "unit": "C"}, key="k")
    for i in range(5, 11):
        old.send({"sensor": "k", "value": i}, key="k")
    got = receive(stream, 11, ack=True)
    assert [m.value["value"] for m in got] == list(range(11))
    assert [m.schema_version for m in got] == [0] * 4 + [1] + [0] * 6
    assert got[4].value["unit"] == "C" and got[5].value["unit"] is None


def test_segments_made_by_a_merge_share_the_schema(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    producer = sclient.create_producer(scalable_topic, schema=braid.Schema.STRING)
    queue = sclient.subscribe_queue(
        scalable_topic, "q", initial_position="earliest", schema=braid.Schema.STRING
    )
    producer.send_many([f"before-{i}" for i in range(10)], keys=[f"k{i}" for i in range(10)])
    merged = merge(scalable_broker, scalable_topic, [0, 1])
    (child,) = [s.segment_id for s in merged.active_segments]
    wait_for(lambda: layout_seen_by(producer).active_ids == (child,))
    producer.send_many([f"after-{i}" for i in range(10)], keys=[f"k{i}" for i in range(10)])
    got = receive(queue, 20)
    for message in got:
        queue.acknowledge(message)
    assert sorted(m.value for m in got) == sorted(
        [f"before-{i}" for i in range(10)] + [f"after-{i}" for i in range(10)]
    )
    assert {segment_of(m) for m in got if m.value.startswith("after")} == {child}
    assert {m.schema_version for m in got} == {0}


def test_a_value_the_schema_cannot_encode_fails_only_its_send(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 1)
    producer = sclient.create_producer(scalable_topic, schema=braid.Schema.avro(READING))
    bad = producer.send_async({"sensor": "s", "value": "not an int"})
    with pytest.raises(braid.SchemaSerializationError):
        bad.result(timeout=10)
    with pytest.raises(braid.SchemaSerializationError):
        producer.send_many([{"sensor": "s", "value": 1}, b"raw bytes"])
    producer.flush()  # nothing of the refused send_many is left pending
    producer.send({"sensor": "s", "value": 2})
    assert producer.last_sequence_id >= 0


def test_a_bytes_consumer_reads_payloads_and_versions_of_a_topic_with_a_schema(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 1)
    stream = sclient.subscribe_stream(scalable_topic, "raw", initial_position="earliest")
    sclient.create_producer(scalable_topic, schema=braid.Schema.INT64).send(7, key="k")
    (message,) = receive(stream, 1)
    assert message.value == message.data == (7).to_bytes(8, "big")
    assert message.schema_version == 0


async def test_the_asyncio_client_takes_the_same_schemas(
    scalable_broker: ScalableBroker, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    schema = braid.Schema.json(READING)
    async with braid.AsyncClient(scalable_broker.service_url, operation_timeout=15) as client:
        stream = await client.subscribe_stream(
            scalable_topic, "async", initial_position="earliest", schema=schema
        )
        producer = await client.create_producer(scalable_topic, schema=schema)
        await producer.send_many(
            [{"sensor": f"s{i}", "value": i} for i in range(6)], keys=[f"s{i}" for i in range(6)]
        )
        failed = producer.send_async({"sensor": 1})  # never raises here: the future fails
        with pytest.raises(braid.SchemaSerializationError):
            await failed
        with pytest.raises(braid.IncompatibleSchemaError):
            await client.create_producer(scalable_topic, schema=braid.Schema.avro(READING))
        got: list[braid.Message] = []
        while len(got) < 6:
            got.extend(await stream.receive_many(6, timeout=10))
        assert sorted(m.value["value"] for m in got) == list(range(6))


def test_a_persistent_topic_takes_the_same_schemas(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    topic = str(TopicName.parse(scalable_topic.replace("topic://", "persistent://")))
    schema = braid.Schema.avro(READING)
    stream = sclient.subscribe_stream(topic, "s", initial_position="earliest", schema=schema)
    sclient.create_producer(topic, schema=schema).send({"sensor": "p", "value": 3})
    (message,) = receive(stream, 1)
    assert message.value == {"sensor": "p", "value": 3}
    with pytest.raises(braid.IncompatibleSchemaError):
        sclient.create_producer(topic, schema=braid.Schema.STRING)


def test_a_split_child_refuses_what_the_topic_refuses(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 1)
    sclient.create_producer(scalable_topic, schema=braid.Schema.avro(READING)).send(
        {"sensor": "s", "value": 1}
    )
    split(scalable_broker, scalable_topic, 0)
    with pytest.raises(braid.IncompatibleSchemaError):
        sclient.create_producer(scalable_topic, schema=braid.Schema.STRING)
    with pytest.raises(braid.IncompatibleSchemaError):
        sclient.subscribe_queue(scalable_topic, "q", schema=braid.Schema.STRING)
