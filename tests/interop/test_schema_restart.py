"""Schemas survive a crash: ``braid standalone`` is SIGKILLed after two versions were registered;
after the restart the versions are the same (read back from their ledgers through the locator),
an incompatible producer is still refused, the same schema gets its old version, and the messages
written before the crash still name the versions they were written with."""

from __future__ import annotations

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, Record, String

from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess
from tests.support.standalone import standalone_process  # noqa: F401 - pytest fixture

TOPIC = "persistent://public/default/schemas-across-a-crash"


class Order(Record):
    item = String()
    quantity = Integer()


class OrderWithNote(Record):
    item = String()
    quantity = Integer()
    note = String(required_default=True)


class OrderQuantityAsText(Record):
    item = String()
    quantity = String()


OrderWithNote.__name__ = "Order"
OrderQuantityAsText.__name__ = "Order"


def _client(process: StandaloneProcess) -> pulsar.Client:
    return pulsar.Client(
        process.service_url,
        operation_timeout_seconds=15,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


@pytest.mark.interop
def test_schema_versions_hold_across_sigkill(
    standalone_process: StandaloneProcess,  # noqa: F811
) -> None:
    client = _client(standalone_process)
    try:
        client.subscribe(TOPIC, "sub", schema=AvroSchema(Order)).close()
        client.create_producer(TOPIC, schema=AvroSchema(Order)).send(Order(item="a", quantity=1))
        client.create_producer(TOPIC, schema=AvroSchema(OrderWithNote)).send(
            OrderWithNote(item="b", quantity=2, note="n")
        )
    finally:
        client.close()
    with AdminClient(standalone_process.web_url) as admin:
        before = admin.schemas.get_all(TOPIC)
    assert [v["version"] for v in before] == [0, 1]

    standalone_process.kill()
    standalone_process.restart()

    with AdminClient(standalone_process.web_url) as admin:
        after = admin.schemas.get_all(TOPIC)
        assert after == before
        assert admin.schemas.get(TOPIC)["version"] == 1
    client = _client(standalone_process)
    try:
        with pytest.raises(pulsar.IncompatibleSchema):
            client.create_producer(TOPIC, schema=AvroSchema(OrderQuantityAsText))
        again = client.create_producer(TOPIC, schema=AvroSchema(Order))
        again.send(Order(item="c", quantity=3))
        consumer = client.subscribe(TOPIC, "sub", initial_position=pulsar.InitialPosition.Earliest)
        versions = []
        for _ in range(3):
            msg = consumer.receive(timeout_millis=10_000)
            versions.append(int.from_bytes(msg.schema_version().encode("latin-1"), "big"))
        assert versions == [0, 1, 0]
    finally:
        client.close()
    with AdminClient(standalone_process.web_url) as admin:
        assert [v["version"] for v in admin.schemas.get_all(TOPIC)] == [0, 1]
