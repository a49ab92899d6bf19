"""Client schemas: values encode to Pulsar's payload bytes (golden bytes, worked out by hand from
the Avro specification and Pulsar's fixed-width encodings, not from the code under test), decode
back, evolve by Avro schema resolution, and every bad value, payload or definition is a typed
error. Also: received messages decode through the consumer's schema and expose the version."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import braid
from braid.broker.schemas.model import SchemaData, SchemaType, version_to_bytes
from braid.client.errors import InvalidConfigurationError
from braid.client.message import decode_entry
from braid.client.schema import PayloadDecoder, Schema, check_schema
from braid.protocol import batch, pb
from tests.support.avro_schemas import READING, READING_V2

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("schema", "value", "payload"),
    [
        (Schema.BYTES, b"\x00raw", b"\x00raw"),
        (Schema.STRING, "héllo", b"h\xc3\xa9llo"),
        (Schema.INT8, -1, b"\xff"),
        (Schema.INT16, 258, b"\x01\x02"),
        (Schema.INT32, -2, b"\xff\xff\xff\xfe"),
        (Schema.INT64, 1, b"\x00\x00\x00\x00\x00\x00\x00\x01"),
        (Schema.FLOAT, 1.0, b"\x3f\x80\x00\x00"),
        (Schema.DOUBLE, -2.0, b"\xc0\x00\x00\x00\x00\x00\x00\x00"),
        (Schema.BOOLEAN, True, b"\x01"),
        # Avro: zigzag varint of the string's length (3 -> 6), its bytes, zigzag of -3 (5).
        (Schema.avro(READING), {"sensor": "t-1", "value": -3}, b"\x06t-1\x05"),
        (Schema.json(READING), {"sensor": "t-1", "value": 7}, b'{"sensor":"t-1","value":7}'),
        # INLINE key/value: [i32 len][key][i32 len][value], each part with its own schema.
        (
            Schema.key_value(Schema.STRING, Schema.INT32),
            ("k", 5),
            b"\x00\x00\x00\x01k\x00\x00\x00\x04\x00\x00\x00\x05",
        ),
    ],
    ids=lambda p: p.type_name if isinstance(p, Schema) else None,
)
def test_values_encode_to_pulsars_payload_bytes_and_back(
    schema: Schema, value: object, payload: bytes
) -> None:
    assert schema.encode(value) == payload
    assert schema.decode(payload) == value


@pytest.mark.parametrize(
    "schema",
    [
        Schema.BYTES,
        Schema.STRING,
        Schema.INT8,
        Schema.INT32,
        Schema.DOUBLE,
        Schema.BOOLEAN,
        Schema.avro(READING),
        Schema.json(READING),
        Schema.key_value(Schema.STRING, Schema.avro(READING)),
    ],
    ids=lambda s: s.type_name,
)
def test_the_wire_schema_is_what_the_broker_reads_as_that_type(schema: Schema) -> None:
    wire = schema.to_wire()
    data = SchemaData.from_wire(pb.Schema.FromString(wire.SerializeToString()))
    expected = SchemaType.NONE if schema.is_bytes else SchemaType[schema.type_name]
    assert data.type is expected
    assert data.data == schema.definition
    assert dict(data.properties) == dict(schema.properties)


def test_record_definitions_are_registered_as_compact_json() -> None:
    for schema in (Schema.avro(READING), Schema.json(json.dumps(READING, indent=2))):
        assert json.loads(schema.definition) == READING
        assert b" " not in schema.definition


def test_key_value_definition_is_pulsars_key_value_schema_info() -> None:
    kv = Schema.key_value(Schema.STRING, Schema.avro(READING))
    value_definition = Schema.avro(READING).definition
    assert kv.definition == (
        b"\x00\x00\x00\x00" + len(value_definition).to_bytes(4, "big") + value_definition
    )
    assert kv.properties["kv.encoding.type"] == "INLINE"
    assert kv.properties["key.schema.type"] == "STRING"
    assert kv.properties["value.schema.type"] == "AVRO"


def test_an_avro_value_written_with_an_older_version_decodes_by_schema_resolution() -> None:
    old, new = Schema.avro(READING), Schema.avro(READING_V2)
    payload = old.encode({"sensor": "s", "value": 1})
    assert new.decode(payload, old.definition) == {"sensor": "s", "value": 1, "unit": None}
    # And the other way: an old reader skips the field it does not know.
    newer = new.encode({"sensor": "s", "value": 2, "unit": "C"})
    assert old.decode(newer, new.definition) == {"sensor": "s", "value": 2}
    # Without the writer definition the new reader misreads the old payload.
    with pytest.raises(braid.SchemaSerializationError):
        new.decode(payload)


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        (Schema.BYTES, "text"),
        (Schema.STRING, b"bytes"),
        (Schema.INT8, 128),
        (Schema.INT32, 1.5),
        (Schema.INT64, True),
        (Schema.FLOAT, "1"),
        (Schema.BOOLEAN, 1),
        (Schema.avro(READING), {"sensor": "s"}),
        (Schema.avro(READING), {"sensor": "s", "value": "x"}),
        (Schema.json(READING), {"sensor": 1, "value": 1}),
        (Schema.json(READING), {"sensor": "s", "value": math.nan, "x": object()}),
        (Schema.key_value(Schema.STRING, Schema.INT32), "not a pair"),
        (Schema.key_value(Schema.STRING, Schema.INT32), ("k", "v")),
    ],
)
def test_a_value_the_schema_cannot_encode_is_a_typed_error(schema: Schema, value: object) -> None:
    with pytest.raises(braid.SchemaSerializationError):
        schema.encode(value)


@pytest.mark.parametrize(
    ("schema", "payload"),
    [
        (Schema.STRING, b"\xff\xfe"),
        (Schema.INT32, b"\x00\x01\x02"),
        (Schema.DOUBLE, b""),
        (Schema.avro(READING), b"\x06t"),
        (Schema.json(READING), b"{not json"),
        (Schema.key_value(Schema.STRING, Schema.INT32), b"\x00\x00\x00\x09k"),
        (Schema.key_value(Schema.STRING, Schema.INT32), b"\x00\x00\x00\x00\x00\x00\x00\x00xx"),
    ],
)
def test_a_payload_the_schema_cannot_decode_is_a_typed_error(
    schema: Schema, payload: bytes
) -> None:
    with pytest.raises(braid.SchemaSerializationError):
        schema.decode(payload)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Schema.avro("{not json"),
        lambda: Schema.avro({"type": "string"}),
        lambda: Schema.avro({"type": "record", "name": "R", "fields": [{"name": "a"}]}),
        lambda: Schema.json(42),  # type: ignore[arg-type]
        lambda: Schema.key_value(Schema.STRING, "INT32"),  # type: ignore[arg-type]
        lambda: check_schema("string"),
    ],
)
def test_a_bad_schema_is_an_invalid_configuration(make: object) -> None:
    with pytest.raises(InvalidConfigurationError):
        make()  # type: ignore[operator]


def test_no_schema_means_bytes() -> None:
    assert check_schema(None) is Schema.BYTES
    assert Schema.BYTES.is_bytes and not Schema.STRING.is_bytes


@given(st.text())
def test_strings_round_trip(text: str) -> None:
    assert Schema.STRING.decode(Schema.STRING.encode(text)) == text


@given(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, width=64))
def test_numbers_round_trip(number: int, real: float) -> None:
    assert Schema.INT64.decode(Schema.INT64.encode(number)) == number
    assert Schema.DOUBLE.decode(Schema.DOUBLE.encode(real)) == real


@given(st.binary(max_size=64))
def test_decoding_arbitrary_bytes_never_raises_anything_untyped(payload: bytes) -> None:
    for schema in (
        Schema.avro(READING),
        Schema.json(READING),
        Schema.key_value(Schema.STRING, Schema.INT16),
        Schema.STRING,
        Schema.INT64,
    ):
        try:
            schema.decode(payload)
        except braid.SchemaSerializationError:
            pass


# -- received messages -------------------------------------------------------------------------


def _entry(payloads: list[bytes], schema_version: bytes | None) -> bytes:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    if schema_version is not None:
        meta.schema_version = schema_version
    singles = [(pb.SingleMessageMetadata(), p) for p in payloads]
    return batch.build_entry(meta, singles)


def _decode(body: bytes, decoder: PayloadDecoder | None) -> list[braid.Message]:
    messages, _count = decode_entry(
        body,
        topic="topic://public/default/t",
        segment_id=0,
        ledger_id=1,
        entry_id=2,
        redelivery=0,
        owner=None,
        decoder=decoder,
    )
    return messages


def test_messages_decode_through_the_consumers_schema_and_carry_the_version() -> None:
    old, new = Schema.avro(READING), Schema.avro(READING_V2)
    body = _entry([old.encode({"sensor": "a", "value": i}) for i in range(3)], version_to_bytes(4))
    decoder = PayloadDecoder(new)
    assert decoder.needs_writer(version_to_bytes(4))
    decoder.writers[version_to_bytes(4)] = old.definition
    assert not decoder.needs_writer(version_to_bytes(4))
    messages = _decode(body, decoder)
    assert [m.value for m in messages] == [
        {"sensor": "a", "value": i, "unit": None} for i in range(3)
    ]
    assert {m.schema_version for m in messages} == {4}
    assert messages[0].data == old.encode({"sensor": "a", "value": 0})


def test_a_bytes_consumer_gets_payloads_and_no_version_for_schemaless_messages() -> None:
    (message,) = _decode(_entry([b"raw"], None), None)
    assert message.value == b"raw" == message.data
    assert message.schema_version is None


def test_an_undecodable_payload_fails_value_not_the_receive() -> None:
    (message,) = _decode(_entry([b"\xff"], version_to_bytes(0)), PayloadDecoder(Schema.STRING))
    assert message.data == b"\xff"
    with pytest.raises(braid.SchemaSerializationError):
        _ = message.value


def test_only_avro_waits_for_writer_definitions() -> None:
    version = version_to_bytes(1)
    assert not PayloadDecoder(Schema.json(READING)).needs_writer(version)
    assert not PayloadDecoder(Schema.STRING).needs_writer(version)
    assert not PayloadDecoder(Schema.avro(READING)).needs_writer(None)
