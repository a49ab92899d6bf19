"""Schemas with the official client: AVRO, JSON and STRING records round-trip, the broker
registers versions and enforces compatibility (``IncompatibleSchema``), and messages carry the
schema version the producer registered."""

from __future__ import annotations

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String, StringSchema

from braid.broker.schemas.model import schema_id_of
from braid.core.names import TopicName
from tests.support.broker_stack import BackgroundBroker


class Person(Record):
    name = String()
    age = Integer()


class PersonRenamedAge(Record):
    """Same record name, ``age`` now a string: neither version can read the other."""

    _avro_namespace = None
    name = String()
    age = String()


PersonRenamedAge.__name__ = "Person"


def _versions(broker: BackgroundBroker, topic: str) -> list[int]:
    registry = broker.service.schemas.registry
    schema_id = schema_id_of(TopicName.parse(topic))
    return [s.version for s in broker.call(registry.get_all(schema_id))]


@pytest.mark.interop
@pytest.mark.parametrize(
    "schema",
    [AvroSchema(Person), JsonSchema(Person)],
    ids=["avro", "json"],
)
def test_struct_records_round_trip(
    client: pulsar.Client, broker: BackgroundBroker, topic: str, schema: pulsar.schema.Schema
) -> None:
    consumer = client.subscribe(topic, "sub", schema=schema)
    producer = client.create_producer(topic, schema=schema)
    people = [Person(name=f"p{i}", age=i) for i in range(20)]
    for person in people:
        producer.send(person)
    received = []
    for _ in people:
        msg = consumer.receive(timeout_millis=10_000)
        received.append(msg.value())
        consumer.acknowledge(msg)
    assert [(p.name, p.age) for p in received] == [(p.name, p.age) for p in people]
    assert _versions(broker, topic) == [0]


@pytest.mark.interop
def test_string_schema_round_trips(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", schema=StringSchema())
    producer = client.create_producer(topic, schema=StringSchema())
    producer.send("héllo")
    msg = consumer.receive(timeout_millis=10_000)
    assert msg.value() == "héllo"


@pytest.mark.interop
def test_incompatible_producer_is_refused(
    client: pulsar.Client, broker: BackgroundBroker, topic: str
) -> None:
    client.create_producer(topic, schema=AvroSchema(Person))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(PersonRenamedAge))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=JsonSchema(Person))
    assert _versions(broker, topic) == [0]


class PersonWithEmail(Record):
    """``Person`` plus an optional field with a default: compatible both ways (FULL)."""

    name = String()
    age = Integer()
    email = String(required_default=True)


PersonWithEmail.__name__ = "Person"


@pytest.mark.interop
def test_compatible_evolution_adds_a_version_stamped_on_messages(
    client: pulsar.Client, broker: BackgroundBroker, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub", schema=pulsar.schema.BytesSchema())
    v1 = client.create_producer(topic, schema=AvroSchema(Person))
    v2 = client.create_producer(topic, schema=AvroSchema(PersonWithEmail))
    v1.send(Person(name="a", age=1))
    v2.send(PersonWithEmail(name="b", age=2, email="b@example.com"))
    assert _versions(broker, topic) == [0, 1]
    stamped = []
    for _ in range(2):
        msg = consumer.receive(timeout_millis=10_000)
        stamped.append(int.from_bytes(msg.schema_version().encode("latin-1"), "big"))
    assert stamped == [0, 1]
    # The same definition again is the same version, not a new one.
    client.create_producer(topic, schema=AvroSchema(Person))
    assert _versions(broker, topic) == [0, 1]


@pytest.mark.interop
def test_consumer_that_cannot_read_the_topic_is_refused(client: pulsar.Client, topic: str) -> None:
    client.create_producer(topic, schema=AvroSchema(Person))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.subscribe(topic, "sub", schema=AvroSchema(PersonRenamedAge))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.subscribe(topic, "sub", schema=StringSchema())
    # A consumer without a schema (bytes) reads anything.
    client.subscribe(topic, "raw")


@pytest.mark.interop
def test_partitions_share_one_schema(
    client: pulsar.Client, broker: BackgroundBroker, topic: str
) -> None:
    broker.call(broker.service.create_partitioned_topic(topic, 3))
    producer = client.create_producer(topic, schema=AvroSchema(Person), batching_enabled=False)
    consumer = client.subscribe(topic, "sub", schema=AvroSchema(Person))
    for i in range(6):
        producer.send(Person(name=f"p{i}", age=i))
    names = sorted(consumer.receive(timeout_millis=10_000).value().name for _ in range(6))
    assert names == [f"p{i}" for i in range(6)]
    assert _versions(broker, topic) == [0]
    assert _versions(broker, f"{topic}-partition-2") == [0]
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(f"{topic}-partition-1", schema=AvroSchema(PersonRenamedAge))
