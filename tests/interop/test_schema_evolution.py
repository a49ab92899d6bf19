"""Schema evolution as the official Python suite (``schema_test.py``) exercises it, against Braid.

* ``test_avro_required_default``: a producer with the plain ``Example`` record, then one with
  ``ExampleRequiredDefault`` (the same fields, every one with a default, another record name) on
  the same topic, under the default FULL strategy: Pulsar accepts the second.
* ``test_schema_evolve``: a namespace set to FORWARD through the REST API, ``User1`` (optional
  ``age``) then ``User2`` (required ``age``, another record name); a consumer and a reader with
  ``User1`` read both producers' messages in order.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pulsar
import pytest
from pulsar.schema import (
    Array,
    AvroSchema,
    Boolean,
    Bytes,
    Double,
    Float,
    Integer,
    Long,
    Map,
    Record,
    String,
)

from braid.core.names import TopicName
from tests.support.admin_server import serve_admin
from tests.support.broker_stack import BackgroundBroker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]


class MySubRecord(Record):
    _sorted_fields = True
    x = Integer()
    y = Long()
    z = String()


class Example(Record):
    a = Integer()
    b = Boolean(required=True)
    c = Long()
    d = Float()
    e = Double()
    f = String()
    g = Bytes()
    h = Array(String())
    i = Map(String())
    j = MySubRecord()


class ExampleRequiredDefault(Record):
    _sorted_fields = True
    a = Integer(required_default=True)
    b = Boolean(required=True, required_default=True)
    c = Long(required_default=True)
    d = Float(required_default=True)
    e = Double(required_default=True)
    f = String(required_default=True)
    g = Bytes(required_default=True)
    h = Array(String(), required_default=True)
    i = Map(String(), required_default=True)
    j = MySubRecord(required_default=True)


class User1(Record):
    name = String()
    age = Integer()


class User2(Record):
    _sorted_fields = True
    name = String()
    age = Integer(required=True)


@pytest.fixture(scope="module")
def admin_url(broker: BackgroundBroker) -> Iterator[str]:
    with serve_admin(broker) as url:
        yield url


def test_a_record_with_defaults_on_every_field_follows_the_plain_one(
    client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, schema=AvroSchema(Example))
    producer_default = client.create_producer(topic, schema=AvroSchema(ExampleRequiredDefault))
    producer.close()
    producer_default.close()


def test_forward_namespace_lets_user2_follow_user1_and_user1_readers_read_both(
    client: pulsar.Client, broker: BackgroundBroker, admin_url: str
) -> None:
    broker.call(broker.stack.resources.create_namespace("public", "evolve-forward"))
    response = httpx.put(
        f"{admin_url}/admin/v2/namespaces/public/evolve-forward/schemaCompatibilityStrategy",
        content=b'"FORWARD"',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 204
    topic = str(TopicName.parse("persistent://public/evolve-forward/schema-evolve"))
    producer1 = client.create_producer(topic, schema=AvroSchema(User1))
    consumer = client.subscribe(topic, "sub", schema=AvroSchema(User1))
    reader = client.create_reader(
        topic, schema=AvroSchema(User1), start_message_id=pulsar.MessageId.earliest
    )
    producer2 = client.create_producer(topic, schema=AvroSchema(User2))
    for i in range(10):
        producer1.send(User1(age=i + 100, name=f"User1 {i}"))
        producer2.send(User2(age=i + 200, name=f"User2 {i}"))
    expected = [
        (f"User{1 + n % 2} {n // 2}", n // 2 + (100 if n % 2 == 0 else 200)) for n in range(20)
    ]
    from_consumer = [consumer.receive(timeout_millis=10_000).value() for _ in range(20)]
    from_reader = [reader.read_next(10_000).value() for _ in range(20)]
    assert [(u.name, u.age) for u in from_consumer] == expected
    assert [(u.name, u.age) for u in from_reader] == expected
    # BACKWARD would have refused User2 (User2 readers cannot read User1's null ages).
    httpx.put(
        f"{admin_url}/admin/v2/namespaces/public/evolve-forward/schemaCompatibilityStrategy",
        content=b'"BACKWARD"',
        headers={"Content-Type": "application/json"},
    )
    other = "persistent://public/evolve-forward/schema-evolve-backward"
    client.create_producer(other, schema=AvroSchema(User1)).close()
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(other, schema=AvroSchema(User2))
