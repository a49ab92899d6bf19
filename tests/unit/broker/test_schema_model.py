"""The schema registry's vocabulary: wire types, versions, strategies, schema ids, and the
broker.conf keys that set the defaults."""

from __future__ import annotations

import pytest

from braid.broker.config import InvalidConfig, load_config
from braid.broker.schemas.model import (
    InvalidSchemaSetting,
    SchemaCompatibilityStrategy,
    SchemaData,
    SchemaType,
    is_bytes_schema,
    schema_id_of,
    version_from_bytes,
    version_to_bytes,
)
from braid.core.names import TopicName
from braid.protocol.generated import PulsarApi_pb2 as pb


def test_versions_are_eight_bytes_big_endian() -> None:
    assert version_to_bytes(0) == b"\x00" * 8
    assert version_to_bytes(258) == b"\x00\x00\x00\x00\x00\x00\x01\x02"
    assert version_from_bytes(version_to_bytes(2**40 + 7)) == 2**40 + 7
    with pytest.raises(InvalidSchemaSetting):
        version_from_bytes(b"\x01")


@pytest.mark.parametrize(
    ("name", "schema_id"),
    [
        ("persistent://acme/shop/orders", "acme/shop/orders"),
        ("persistent://acme/shop/orders-partition-3", "acme/shop/orders"),
        ("segment://acme/shop/orders/0000-7fff-1", "acme/shop/orders"),
        ("topic://acme/shop/orders", "acme/shop/orders"),
    ],
)
def test_a_topic_has_one_schema_id_however_it_is_split(name: str, schema_id: str) -> None:
    assert schema_id_of(TopicName.parse(name)) == schema_id


def test_types_map_to_the_wire_as_pulsar_does() -> None:
    assert SchemaType.AVRO.to_wire() == pb.Schema.Avro
    assert SchemaType.BYTES.to_wire() == pb.Schema.Type.Value("None")
    assert SchemaType.AUTO_CONSUME.to_wire() == pb.Schema.AutoConsume
    assert SchemaType.from_wire(pb.Schema.AutoConsume) is SchemaType.AUTO_CONSUME
    assert SchemaType.from_wire(pb.Schema.Json) is SchemaType.JSON
    assert SchemaType.parse("avro") is SchemaType.AVRO
    with pytest.raises(InvalidSchemaSetting):
        SchemaType.parse("XML")
    wire = SchemaData(SchemaType.JSON, b"{}", {"k": "v"}).to_wire("a/b/c")
    assert SchemaData.from_wire(wire) == SchemaData(SchemaType.JSON, b"{}", {"k": "v"})
    assert is_bytes_schema(None)
    assert is_bytes_schema(SchemaData(SchemaType.NONE, b""))
    assert not is_bytes_schema(SchemaData(SchemaType.STRING, b""))


def test_strategy_names_include_the_old_none() -> None:
    assert (
        SchemaCompatibilityStrategy.parse("none") is SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE
    )
    assert SchemaCompatibilityStrategy.parse("full_transitive").is_transitive
    with pytest.raises(InvalidSchemaSetting):
        SchemaCompatibilityStrategy.parse("SIDEWAYS")


def test_broker_conf_keys() -> None:
    config = load_config(
        None,
        {
            "schemaCompatibilityStrategy": "BACKWARD",
            "isSchemaValidationEnforced": "true",
            "allowAutoTopicCreationType": "partitioned",
            "defaultNumPartitions": "4",
            "advertisedListeners": "internal:pulsar://10.0.0.1:6650,external:pulsar://b.io:6651",
        },
        {},
    )
    assert config.schema_compatibility_strategy is SchemaCompatibilityStrategy.BACKWARD
    assert config.is_schema_validation_enforced
    assert config.allow_auto_topic_creation_type == "partitioned"
    assert config.default_num_partitions == 4
    assert config.listener_urls() == {
        "internal": "pulsar://10.0.0.1:6650",
        "external": "pulsar://b.io:6651",
    }
    for key, value in (
        ("schemaCompatibilityStrategy", "UNDEFINED"),
        ("allowAutoTopicCreationType", "both"),
        ("defaultNumPartitions", "0"),
        ("advertisedListeners", "internal=pulsar://x:1"),
    ):
        with pytest.raises(InvalidConfig) as raised:
            load_config(None, {key: value}, {})
        assert raised.value.key == key
