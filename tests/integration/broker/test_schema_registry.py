"""The schema registry on real storage: versions in ledgers of the storage cluster, the locator
updated by compare-and-swap (two registries - two brokers - adding at once lose nothing and leave
no stray ledger), deletes, and the topic-level rules PRODUCER and SUBSCRIBE apply."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest

from braid.broker.schemas.compatibility import IncompatibleSchema
from braid.broker.schemas.model import (
    SchemaCompatibilityStrategy,
    SchemaData,
    SchemaType,
    version_from_bytes,
)
from braid.broker.schemas.registry import SchemaRegistry
from braid.broker.schemas.storage import SchemaStorage, SchemaStorageError
from braid.broker.schemas.topic_schemas import SchemaPolicy, TopicSchemas
from braid.clock import SystemClock
from braid.core.names import TopicName
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BrokerStack
from tests.support.raw_client import RawClient, request

pytestmark = pytest.mark.integration

FULL = SchemaCompatibilityStrategy.FULL
TOPIC = TopicName.parse("persistent://public/default/registry")


def avro(*names: str, name: str = "Order") -> SchemaData:
    fields = [{"name": "id", "type": "long"}]
    fields += [{"name": n, "type": ["null", "string"], "default": None} for n in names]
    doc = {"type": "record", "name": name, "fields": fields}
    return SchemaData(SchemaType.AVRO, json.dumps(doc).encode())


def registry_of(stack: BrokerStack) -> SchemaRegistry:
    """A registry of its own on the broker's store and storage: another broker's."""
    return SchemaRegistry(SchemaStorage(stack.metadata, stack.factory.storage, SystemClock()))


async def _schema_ledgers(stack: BrokerStack) -> set[int]:
    storage = stack.factory.storage.active
    found = set()
    for ledger_id in await storage.list_ledgers():
        meta = await storage.get_ledger_metadata(ledger_id)
        if meta.custom_metadata.get("component") == b"schema":
            found.add(ledger_id)
    return found


async def test_two_brokers_adding_at_once_lose_nothing_and_leave_no_stray_ledger(
    broker_stack: BrokerStack,
) -> None:
    first, second = registry_of(broker_stack), registry_of(broker_stack)
    schemas = [avro(*[f"f{j}" for j in range(i)]) for i in range(1, 7)]
    # Every schema adds a field with a default: compatible with all the others (FULL).
    versions = await asyncio.gather(
        *(
            (first if i % 2 else second).put_if_absent("public/default/race", s, FULL)
            for i, s in enumerate(schemas)
        )
    )
    assert sorted(versions) == list(range(6))
    stored = await first.get_all("public/default/race")
    assert [s.version for s in stored] == list(range(6))
    assert {s.schema.data for s in stored} == {s.data for s in schemas}
    locator = await first.storage.locator("public/default/race")
    assert {e.ledger_id for e in locator.index} == await _schema_ledgers(broker_stack)
    # The same schema from both at once is one version.
    again = await asyncio.gather(
        first.put_if_absent("public/default/race", schemas[0], FULL),
        second.put_if_absent("public/default/race", schemas[0], FULL),
    )
    assert again[0] == again[1] == versions[0]


async def test_versions_live_in_stamped_ledgers_and_deletes_keep_history(
    broker_stack: BrokerStack,
) -> None:
    registry = registry_of(broker_stack)
    schema_id = "public/default/history"
    assert await registry.put_if_absent(schema_id, avro(), FULL) == 0
    assert await registry.put_if_absent(schema_id, avro("note"), FULL) == 1
    locator = await registry.storage.locator(schema_id)
    for entry in locator.index:
        meta = await broker_stack.factory.storage.active.get_ledger_metadata(entry.ledger_id)
        assert entry.storage_cluster == meta.cluster_name == "standalone"
        assert meta.custom_metadata["pulsar/schemaId"] == schema_id.encode()

    assert await registry.delete(schema_id) == 2
    assert await registry.get_latest(schema_id) is None
    assert await registry.get_all(schema_id) == []
    assert await registry.delete(schema_id) is None
    earlier = await registry.get_version(schema_id, 0)
    assert earlier is not None and earlier.schema == avro()  # old messages still decode
    # A delete starts the history again: an incompatible schema is accepted after it.
    assert await registry.put_if_absent(schema_id, avro(name="Other"), FULL) == 3

    # A fresh registry (a restarted broker) reads the same versions back from the ledgers.
    reread = registry_of(broker_stack)
    assert [s.version for s in await reread.get_all(schema_id)] == [3]
    assert (await reread.get_version(schema_id, 1)) == (await registry.get_version(schema_id, 1))

    assert await reread.delete_all(schema_id) == 4
    assert await _schema_ledgers(broker_stack) == set()
    assert await reread.get_version(schema_id, 0) is None


async def test_a_corrupt_locator_is_a_typed_error(broker_stack: BrokerStack) -> None:
    await broker_stack.metadata.put("/schemas/public/default/corrupt", b"{not json")
    with pytest.raises(SchemaStorageError, match="corrupt"):
        await registry_of(broker_stack).get_all("public/default/corrupt")


async def test_policies_enforce_validation_and_freeze_auto_update(
    broker_stack: BrokerStack,
) -> None:
    policy = SchemaPolicy()

    async def lookup(_: TopicName) -> SchemaPolicy:
        return policy

    schemas = TopicSchemas(registry_of(broker_stack), lookup)
    assert await schemas.for_producer(TOPIC, None) is None  # bytes on a topic without schema
    version = await schemas.for_producer(TOPIC, avro())
    assert version is not None and version_from_bytes(version) == 0
    assert await schemas.for_producer(TOPIC, None) is None  # allowed: not enforced

    policy = SchemaPolicy(validation_enforced=True)
    with pytest.raises(IncompatibleSchema, match="SchemaValidationEnforced"):
        await schemas.for_producer(TOPIC, None)

    policy = SchemaPolicy(allow_auto_update=False)
    assert await schemas.for_producer(TOPIC, avro()) == version  # registered: fine
    with pytest.raises(IncompatibleSchema, match="auto updating is disabled"):
        await schemas.for_producer(TOPIC, avro("note"))

    policy = SchemaPolicy()
    # A consumer on an idle topic without a schema registers its own.
    idle = TopicName.parse("persistent://public/default/idle")
    await schemas.for_consumer(idle, avro(), topic_in_use=False)
    assert await schemas.registry.has_schema("public/default/idle")
    # On a topic in use without a schema it is refused, unless anything goes.
    busy = TopicName.parse("persistent://public/default/busy")
    with pytest.raises(IncompatibleSchema, match="active topic"):
        await schemas.for_consumer(busy, avro(), topic_in_use=True)
    policy = SchemaPolicy(strategy=SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE)
    await schemas.for_consumer(busy, avro(), topic_in_use=True)


async def test_subscribe_checks_the_consumer_schema_except_auto_consume(
    broker_stack: BrokerStack, raw: Callable[[], Awaitable[RawClient]]
) -> None:
    client = await raw()
    producer = commands.producer(str(TOPIC), 1, 1, producer_name="p")
    producer.producer.schema.CopyFrom(avro().to_wire("Order"))
    answer = await request(client, producer, 1)
    assert version_from_bytes(answer.producer_success.schema_version) == 0

    def subscribe(consumer_id: int, schema: pb.Schema | None) -> pb.BaseCommand:
        cmd = commands.subscribe(
            str(TOPIC), f"s{consumer_id}", pb.CommandSubscribe.Shared, consumer_id, 10 + consumer_id
        )
        if schema is not None:
            cmd.subscribe.schema.CopyFrom(schema)
        return cmd

    # A reader whose ``id`` is a boolean cannot read the long ids (a record's name alone does
    # not matter: Avro resolves records by their fields, as Pulsar's validator does).
    other = {"type": "record", "name": "Other", "fields": [{"name": "id", "type": "boolean"}]}
    incompatible = SchemaData(SchemaType.AVRO, json.dumps(other).encode()).to_wire("x")
    refused = await request(client, subscribe(1, incompatible), 11)
    assert refused.type == pb.BaseCommand.ERROR
    assert refused.error.error == pb.IncompatibleSchema
    auto = pb.Schema(name="auto", schema_data=b"", type=pb.Schema.AutoConsume)
    assert (await request(client, subscribe(2, auto), 12)).type == pb.BaseCommand.SUCCESS
    assert (await request(client, subscribe(3, None), 13)).type == pb.BaseCommand.SUCCESS
    reader = avro("note").to_wire("Order")  # can read version 0 (the new field has a default)
    assert (await request(client, subscribe(4, reader), 14)).type == pb.BaseCommand.SUCCESS
