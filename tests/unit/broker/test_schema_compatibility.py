"""Schema compatibility (Pulsar's strategies, Avro's resolution rules) as a pure function, with
vectors from the Avro specification's schema-resolution section and properties that tie the
strategies together (BACKWARD one way is FORWARD the other way; FULL is both)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.broker.schemas.compatibility import (
    IncompatibleSchema,
    InvalidSchemaData,
    check_compatible,
    check_consumer_compatible,
    same_definition,
    validate,
)
from braid.broker.schemas.model import SchemaCompatibilityStrategy, SchemaData, SchemaType

S = SchemaCompatibilityStrategy


def record(*fields: dict[str, Any], name: str = "Order", **extra: Any) -> SchemaData:
    doc = {"type": "record", "name": name, "fields": list(fields), **extra}
    return SchemaData(SchemaType.AVRO, json.dumps(doc).encode())


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def ok(existing: list[SchemaData], new: SchemaData, strategy: S) -> bool:
    try:
        check_compatible(existing, new, strategy)
    except IncompatibleSchema:
        return False
    return True


V1 = record(field("id", "long"))
V2_OPTIONAL = record(field("id", "long"), field("note", ["null", "string"], default=None))
V2_REQUIRED = record(field("id", "long"), field("note", "string"))


@pytest.mark.parametrize(
    ("new", "strategy", "expected"),
    [
        # Adding a field with a default: readable both ways.
        (V2_OPTIONAL, S.BACKWARD, True),
        (V2_OPTIONAL, S.FORWARD, True),
        (V2_OPTIONAL, S.FULL, True),
        # Adding a required field: old data lacks it (not BACKWARD); old readers ignore it.
        (V2_REQUIRED, S.BACKWARD, False),
        (V2_REQUIRED, S.FORWARD, True),
        (V2_REQUIRED, S.FULL, False),
        (V2_REQUIRED, S.ALWAYS_COMPATIBLE, True),
        (V2_REQUIRED, S.ALWAYS_INCOMPATIBLE, False),
    ],
)
def test_adding_fields(new: SchemaData, strategy: S, expected: bool) -> None:
    assert ok([V1], new, strategy) is expected


def test_removing_a_field_is_backward_but_not_forward_without_a_default() -> None:
    assert ok([V2_REQUIRED], V1, S.BACKWARD)
    assert not ok([V2_REQUIRED], V1, S.FORWARD)
    assert ok([V2_OPTIONAL], V1, S.FULL)  # the removed field had a default


@pytest.mark.parametrize(
    ("writer", "reader", "readable"),
    [
        ("int", "long", True),
        ("int", "double", True),
        ("long", "float", True),
        ("float", "double", True),
        ("string", "bytes", True),
        ("bytes", "string", True),
        ("long", "int", False),
        ("double", "float", False),
        ("string", "int", False),
        ("int", ["null", "long"], True),
        (["null", "int"], "int", False),  # the null branch cannot be read as int
        (["int", "long"], "long", True),
    ],
)
def test_avro_promotions_and_unions(writer: Any, reader: Any, readable: bool) -> None:
    old = record(field("v", writer))
    new = record(field("v", reader))
    assert ok([old], new, S.BACKWARD) is readable  # the new (reader) reads the old (writer)


def test_enums_records_arrays_maps_fixed() -> None:
    def enum(*symbols: str, **extra: Any) -> dict[str, Any]:
        return {"type": "enum", "name": "Color", "symbols": list(symbols), **extra}

    old = record(field("c", enum("RED", "GREEN")))
    assert ok([old], record(field("c", enum("RED", "GREEN", "BLUE"))), S.BACKWARD)
    assert not ok([old], record(field("c", enum("RED"))), S.BACKWARD)
    assert ok([old], record(field("c", enum("RED", default="RED"))), S.BACKWARD)
    arr = record(field("a", {"type": "array", "items": "int"}))
    assert ok([arr], record(field("a", {"type": "array", "items": "long"})), S.BACKWARD)
    assert not ok([arr], record(field("a", {"type": "array", "items": "string"})), S.BACKWARD)
    mp = record(field("m", {"type": "map", "values": "float"}))
    assert ok([mp], record(field("m", {"type": "map", "values": "double"})), S.BACKWARD)
    fx = record(field("f", {"type": "fixed", "name": "F", "size": 4}))
    assert not ok([fx], record(field("f", {"type": "fixed", "name": "F", "size": 8})), S.BACKWARD)
    # Records resolve by their fields, not their names (Avro's resolving grammar, which Pulsar's
    # validator runs): a renamed record with the same fields reads, one with a new required
    # field does not.
    assert ok([V1], record(field("id", "long"), name="Invoice"), S.FULL)
    assert not ok([V1], record(field("id", "long"), field("n", "int"), name="Invoice"), S.FULL)
    assert ok([V1], record(field("id", "long"), name="Invoice", aliases=["Order"]), S.BACKWARD)
    aliased_field = record(field("identifier", "long", aliases=["id"]))
    assert ok([V1], aliased_field, S.BACKWARD)


def test_recursive_records_are_checked_without_looping() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [field("value", "int"), field("next", ["null", "Node"], default=None)],
    }
    tree = SchemaData(SchemaType.AVRO, json.dumps(node).encode())
    wider = json.loads(json.dumps(node))
    wider["fields"][0]["type"] = "long"
    assert ok([tree], SchemaData(SchemaType.AVRO, json.dumps(wider).encode()), S.BACKWARD)


def test_transitive_strategies_check_every_version_the_plain_ones_the_latest() -> None:
    a = record(field("id", "long"))
    b = record(field("id", "long"), field("x", "int", default=0))
    c = record(field("id", "long"), field("x", "int"))  # reads b's data, not a's
    assert ok([a, b], c, S.BACKWARD)
    assert not ok([a, b], c, S.BACKWARD_TRANSITIVE)
    assert not ok([a, b], c, S.FULL_TRANSITIVE)


def test_another_type_is_refused_unless_always_compatible() -> None:
    string = SchemaData(SchemaType.STRING, b"")
    with pytest.raises(IncompatibleSchema, match="exists schema type AVRO, new schema type STRING"):
        check_compatible([V1], string, S.FULL)
    assert ok([V1], string, S.ALWAYS_COMPATIBLE)
    json_v1 = SchemaData(SchemaType.JSON, V1.data)
    assert not ok([V1], json_v1, S.BACKWARD)


def test_primitive_types_only_refuse_under_always_incompatible() -> None:
    a = SchemaData(SchemaType.STRING, b"", {"encoding": "utf8"})
    b = SchemaData(SchemaType.STRING, b"x")
    assert ok([a], b, S.FULL)
    assert not ok([a], b, S.ALWAYS_INCOMPATIBLE)
    assert ok([a], SchemaData(SchemaType.STRING, b""), S.ALWAYS_INCOMPATIBLE)  # the same one


def test_nothing_registered_accepts_anything() -> None:
    assert ok([], V2_REQUIRED, S.ALWAYS_INCOMPATIBLE)


def test_consumers_must_read_the_latest_or_every_version() -> None:
    # BACKWARD, FORWARD and FULL: the consumer reads the latest version.
    for strategy in (S.BACKWARD, S.FORWARD, S.FULL, S.FORWARD_TRANSITIVE):
        check_consumer_compatible([V1], V2_OPTIONAL, strategy)
        with pytest.raises(IncompatibleSchema):
            check_consumer_compatible([V1], V2_REQUIRED, strategy)
    with pytest.raises(IncompatibleSchema, match="does not have a schema"):
        check_consumer_compatible([], V1, S.FULL)
    check_consumer_compatible([], V1, S.ALWAYS_COMPATIBLE)


def test_definitions_compare_parsed_and_invalid_ones_are_refused() -> None:
    spaced = SchemaData(SchemaType.AVRO, json.dumps(json.loads(V1.data), indent=4).encode())
    assert same_definition(V1, spaced)
    assert not same_definition(V1, SchemaData(SchemaType.JSON, V1.data))
    for bad in (b"not json", b'{"type": "record"}', b'{"type": "nope"}', b"\xff"):
        with pytest.raises(InvalidSchemaData):
            validate(SchemaData(SchemaType.AVRO, bad))
    validate(SchemaData(SchemaType.STRING, b"anything"))


_FIELD_TYPES = st.sampled_from(["int", "long", "float", "double", "string", "bytes", "boolean"])


@st.composite
def records(draw: st.DrawFn) -> SchemaData:
    names = draw(st.lists(st.sampled_from("abcdef"), unique=True, max_size=5))
    fields = []
    for name in names:
        entry: dict[str, Any] = {"name": name, "type": draw(_FIELD_TYPES)}
        if draw(st.booleans()):
            entry["type"] = ["null", entry["type"]]
            entry["default"] = None
        fields.append(entry)
    return record(*fields)


@given(records(), records())
def test_backward_one_way_is_forward_the_other_and_full_is_both(
    a: SchemaData, b: SchemaData
) -> None:
    backward = ok([a], b, S.BACKWARD)
    assert backward == ok([b], a, S.FORWARD)
    assert ok([a], b, S.FULL) == (backward and ok([a], b, S.FORWARD))
    assert ok([a], a, S.FULL)


def _python_client_field(name: str, type_: Any, *, required: bool, default: bool) -> Any:
    """A field as the official Python client's ``Record`` writes it: optional fields are a union
    with null; ``required_default=True`` adds the default (null, or the type's zero)."""
    doc: dict[str, Any] = {"name": name, "type": type_ if required else ["null", type_]}
    if default:
        doc["default"] = None if not required else {"boolean": False}.get(type_, 0)
    return doc


def test_python_clients_required_default_record_follows_the_plain_one_under_full() -> None:
    # The official suite's test_avro_required_default: the same fields, the second class (another
    # name) with defaults on every field; Pulsar accepts it under the default FULL strategy.
    sub = {
        "type": "record",
        "name": "MySubRecord",
        "fields": [
            field(n, ["null", t]) for n, t in (("x", "int"), ("y", "long"), ("z", "string"))
        ],
    }
    kinds = [
        ("a", "int", False), ("b", "boolean", True), ("c", "long", False), ("d", "float", False),
        ("e", "double", False), ("f", "string", False), ("g", "bytes", False),
        ("h", {"type": "array", "items": "string"}, False),
        ("i", {"type": "map", "values": "string"}, False), ("j", sub, False),
    ]  # fmt: skip
    plain = record(
        *(_python_client_field(n, t, required=r, default=False) for n, t, r in kinds),
        name="Example",
    )
    defaults = record(
        *(_python_client_field(n, t, required=r, default=True) for n, t, r in kinds),
        name="ExampleRequiredDefault",
    )
    for strategy in S:
        if strategy not in (S.UNDEFINED, S.ALWAYS_INCOMPATIBLE):
            assert ok([plain], defaults, strategy), strategy


def test_python_clients_evolved_user_is_forward_compatible() -> None:
    # The official suite's test_schema_evolve: User1 {name, age optional} then User2 (sorted
    # fields, age required), under FORWARD: User1 readers read User2's data. Not BACKWARD: a
    # User2 reader finds null ages in User1's data.
    user1 = record(field("name", ["null", "string"]), field("age", ["null", "int"]), name="User1")
    user2 = record(field("age", "int"), field("name", ["null", "string"]), name="User2")
    assert ok([user1], user2, S.FORWARD)
    assert ok([user1], user2, S.FORWARD_TRANSITIVE)
    assert not ok([user1], user2, S.BACKWARD)
    assert not ok([user1], user2, S.FULL)
    # A FORWARD consumer is checked as BACKWARD against the latest version (User2): User1 reads it.
    check_consumer_compatible([user1, user2], user1, S.FORWARD)
