"""The Braid client and the official ``pulsar-client`` on the same persistent:// topics.

Messages produced by Braid - batched or not, compressed or not - are read by the official client
with their keys, properties and event times; messages produced by the official client are read
by Braid the same way. A Braid Stream consumer and an official Failover consumer can share one
subscription (the legacy segment is subscribed Failover). Schemas (Avro, JSON, string) encode
alike in both clients: each reads what the other wrote, under one registered version.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String, StringSchema

import braid
from tests.support.broker_stack import BackgroundBroker

EVENT_TIME = 1_700_000_000_321


@pytest.fixture
def braid_client(broker: BackgroundBroker) -> Iterator[braid.Client]:
    c = braid.Client(broker.service_url, operation_timeout=15)
    try:
        yield c
    finally:
        c.close()


@pytest.mark.parametrize(
    ("batching", "compression"), [(True, None), (True, "lz4"), (True, "zstd"), (False, "zlib")]
)
def test_official_client_reads_what_braid_produced(
    braid_client: braid.Client,
    client: pulsar.Client,
    topic: str,
    batching: bool,
    compression: str | None,
) -> None:
    consumer = client.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
    producer = braid_client.create_producer(
        topic, producer_name="braid-p", batching=batching, compression=compression
    )
    futures = [
        producer.send_async(
            b"payload-%d" % i,
            key=f"key-{i % 5}",
            properties={"i": str(i), "lang": "python"},
            event_time=EVENT_TIME + i,
        )
        for i in range(200)
    ]
    producer.send(b"keyless, no properties")
    for future in futures:
        future.result(timeout=30)
    for i in range(200):
        msg = consumer.receive(timeout_millis=20_000)
        assert msg.data() == b"payload-%d" % i
        assert msg.partition_key() == f"key-{i % 5}"
        assert msg.properties() == {"i": str(i), "lang": "python"}
        assert msg.event_timestamp() == EVENT_TIME + i
        consumer.acknowledge(msg)
    last = consumer.receive(timeout_millis=20_000)
    assert last.data() == b"keyless, no properties"
    assert last.partition_key() == "" and last.properties() == {} and last.event_timestamp() == 0


@pytest.mark.parametrize("batching", [True, False])
def test_braid_reads_what_the_official_client_produced(
    braid_client: braid.Client, client: pulsar.Client, topic: str, batching: bool
) -> None:
    stream = braid_client.subscribe_stream(topic, "braid", initial_position="earliest")
    producer = client.create_producer(
        topic,
        producer_name="official-p",
        batching_enabled=batching,
        compression_type=pulsar.CompressionType.LZ4,
    )
    for i in range(200):
        producer.send_async(
            b"payload-%d" % i,
            None,
            partition_key=f"key-{i % 5}",
            properties={"i": str(i)},
            event_timestamp=EVENT_TIME + i,
        )
    producer.send(b"keyless")
    got: list[braid.Message] = []
    while len(got) < 201:
        batch = stream.receive_many(500, timeout=20)
        assert batch, f"only {len(got)} of 201 arrived"
        got.extend(batch)
    for i, message in enumerate(got[:200]):
        assert message.value == b"payload-%d" % i
        assert message.key == f"key-{i % 5}"
        assert message.properties == {"i": str(i)}
        assert message.event_time == EVENT_TIME + i
        assert message.producer_name == "official-p"
    assert got[200].key is None and got[200].event_time is None
    assert [m.sequence_id for m in got] == list(range(201))
    stream.acknowledge_cumulative(got[-1])


def test_braid_stream_and_official_failover_share_a_subscription(
    braid_client: braid.Client, client: pulsar.Client, topic: str
) -> None:
    stream = braid_client.subscribe_stream(topic, "mixed", consumer_name="a-braid")
    official = client.subscribe(
        topic, "mixed", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b-official"
    )
    producer = braid_client.create_producer(topic)
    producer.send(b"to the active one")
    message = stream.receive(timeout=10)  # "a-braid" sorts first: the active consumer
    assert message is not None and message.value == b"to the active one"
    stream.acknowledge_cumulative(message)
    stream.close()
    producer.send(b"after the failover")
    taken = official.receive(timeout_millis=20_000)
    assert taken.data() == b"after the failover"
    official.acknowledge(taken)


class Person(Record):
    name = String()
    age = Integer()


#: What the official client registers for ``Person`` (its fields are nullable by default).
PERSON = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "name", "type": ["null", "string"]},
        {"name": "age", "type": ["null", "int"]},
    ],
}


@pytest.mark.parametrize(
    ("official_schema", "braid_schema", "to_official", "from_official"),
    [
        (
            AvroSchema(Person),
            braid.Schema.avro(PERSON),
            lambda v: Person(**v),
            lambda p: {"name": p.name, "age": p.age},
        ),
        (
            JsonSchema(Person),
            braid.Schema.json(PERSON),
            lambda v: Person(**v),
            lambda p: {"name": p.name, "age": p.age},
        ),
        (StringSchema(), braid.Schema.STRING, lambda v: v["name"], lambda s: {"name": s}),
    ],
    ids=["avro", "json", "string"],
)
def test_schema_values_cross_between_the_clients(
    braid_client: braid.Client,
    client: pulsar.Client,
    topic: str,
    official_schema: pulsar.schema.Schema,
    braid_schema: braid.Schema,
    to_official: Any,
    from_official: Any,
) -> None:
    values = [{"name": f"p{i}", "age": i} for i in range(5)]
    if braid_schema is braid.Schema.STRING:
        values = [{"name": v["name"]} for v in values]
    official_consumer = client.subscribe(
        topic, "official", schema=official_schema, initial_position=pulsar.InitialPosition.Earliest
    )
    stream = braid_client.subscribe_stream(
        topic, "braid", initial_position="earliest", schema=braid_schema
    )
    official_producer = client.create_producer(topic, schema=official_schema)
    for value in values:
        official_producer.send(to_official(value))
    braid_client.create_producer(topic, schema=braid_schema).send_many(
        [v if len(v) > 1 else v["name"] for v in values]
    )
    seen_by_official = []
    for _ in range(2 * len(values)):
        msg = official_consumer.receive(timeout_millis=20_000)
        seen_by_official.append(from_official(msg.value()))
    seen_by_braid = []
    while len(seen_by_braid) < 2 * len(values):
        for msg in stream.receive_many(10, timeout=20):
            if braid_schema.definition:
                # The same record definition is the same registered version. (The official
                # Python client registers STRING with the definition "null", Java and Braid
                # with none: two versions of one type, each client reads the other's.)
                assert msg.schema_version == 0
            value = msg.value
            seen_by_braid.append(value if isinstance(value, dict) else {"name": value})
    assert seen_by_official == values + values
    assert seen_by_braid == values + values
