"""Schema compatibility: may a new schema version join the existing ones under a strategy?

Pulsar's rules (``SchemaRegistryServiceImpl`` and the per-type checkers), as a pure function of
the existing versions, the new schema and the strategy:

* ``ALWAYS_COMPATIBLE``: anything goes, even another type.
* Otherwise the new schema must have the type of the latest version (of every version since the
  last delete, for a ``_TRANSITIVE`` strategy): "Incompatible schema: exists schema type JSON, new
  schema type AVRO".
* Same type and the same definition: compatible. Same type, another definition: AVRO, JSON and
  PROTOBUF (whose definitions are Avro record schemas) are checked field by field with Avro's
  schema-resolution rules; other types have nothing to compare, and only ``ALWAYS_INCOMPATIBLE``
  refuses them.
* Avro: ``BACKWARD`` = the new schema can read data written with the old one, ``FORWARD`` = the old
  can read the new, ``FULL`` = both; ``ALWAYS_INCOMPATIBLE`` refuses any change.

A consumer is checked differently (Pulsar's ``checkConsumerCompatibility``): its schema must be
able to *read* what is there — BACKWARD against the latest version for ``BACKWARD``, ``FORWARD``,
``FORWARD_TRANSITIVE`` and ``FULL``, the strategy itself against every version otherwise.

Avro definitions are parsed with ``fastavro.parse_schema`` (names resolved, namespaces applied);
the resolution check below is what Pulsar runs, Avro's ``SchemaValidator`` (the resolving
grammar of a reader against a writer): promotions, record fields by name or alias with defaults
for missing ones - records match by their fields, not their names, so a record class renamed
between versions (``User1`` -> ``User2``) still resolves -, enum symbols, unions branch by branch.
Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fastavro.schema import SchemaParseException, UnknownType, parse_schema

from braid.broker.errors import BrokerError, ServerError
from braid.broker.schemas.model import SchemaCompatibilityStrategy, SchemaData
from braid.core.errors import IllegalStateError, InvalidInputError

Strategy = SchemaCompatibilityStrategy


class IncompatibleSchema(BrokerError, IllegalStateError):
    """A schema the topic's strategy does not allow (Pulsar's ``IncompatibleSchemaException``)."""

    code = ServerError.IncompatibleSchema


class InvalidSchemaData(BrokerError, InvalidInputError):
    """A schema whose definition does not parse (an AVRO/JSON one that is not an Avro schema)."""

    code = ServerError.IncompatibleSchema


# --- Avro definitions ----------------------------------------------------------------------------

#: A parsed Avro schema together with the named types it defines (full name -> definition).
ParsedAvro = tuple[Any, Mapping[str, Any]]


def parse_avro(schema: SchemaData) -> ParsedAvro:
    """The Avro schema an AVRO/JSON/PROTOBUF definition holds.

    Raises:
        InvalidSchemaData: not JSON, or not a valid Avro schema.
    """
    try:
        document = json.loads(schema.data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidSchemaData(
            f"the {schema.type.name} schema definition is not JSON: {exc}"
        ) from None
    named: dict[str, Any] = {}
    try:
        parsed = parse_schema(document, named_schemas=named, _write_hint=False)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError) as exc:
        raise InvalidSchemaData(
            f"the {schema.type.name} schema definition is not a valid Avro schema: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    return parsed, named


def validate(schema: SchemaData) -> None:
    """Refuse a definition that cannot be a schema of its type (Pulsar's schema data validators).

    Raises:
        InvalidSchemaData: a struct schema that is not an Avro schema.
    """
    if schema.type.is_struct:
        parse_avro(schema)


def same_definition(a: SchemaData, b: SchemaData) -> bool:
    """Whether two schemas are the same version: same type and, for struct types, the same parsed
    Avro schema (whitespace and key order do not matter), else the same bytes."""
    if a.type is not b.type:
        return False
    if a.type.is_struct:
        try:
            return bool(_comparable(parse_avro(a)[0]) == _comparable(parse_avro(b)[0]))
        except InvalidSchemaData:
            return a.data == b.data
    return a.data == b.data


def _comparable(parsed: Any) -> Any:
    if isinstance(parsed, dict):
        return {k: _comparable(v) for k, v in parsed.items() if not k.startswith("__")}
    if isinstance(parsed, list):
        return [_comparable(v) for v in parsed]
    return parsed


_PROMOTIONS: Mapping[str, frozenset[str]] = {
    # writer type -> reader types that can read it (Avro's schema resolution)
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


class _Resolver:
    """Avro reader/writer resolution between two parsed schemas."""

    def __init__(self, reader: ParsedAvro, writer: ParsedAvro) -> None:
        self._reader_names = reader[1]
        self._writer_names = writer[1]
        self._in_progress: set[tuple[str, str]] = set()

    def _deref(self, schema: Any, names: Mapping[str, Any]) -> Any:
        if isinstance(schema, str) and schema in names:
            return names[schema]
        return schema

    @staticmethod
    def _kind(schema: Any) -> str:
        if isinstance(schema, list):
            return "union"
        if isinstance(schema, dict):
            kind = schema.get("type")
            if isinstance(kind, dict | list):
                return _Resolver._kind(kind)
            return str(kind)
        return str(schema)

    @staticmethod
    def _short(name: object) -> str:
        return str(name).rsplit(".", 1)[-1]

    def _names_match(self, reader: Mapping[str, Any], writer: Mapping[str, Any]) -> bool:
        if self._short(reader.get("name")) == self._short(writer.get("name")):
            return True
        aliases = reader.get("aliases") or ()
        return self._short(writer.get("name")) in {self._short(a) for a in aliases}

    def problem(self, reader: Any, writer: Any, where: str) -> str | None:
        """Why ``reader`` cannot read data written with ``writer`` (``None``: it can)."""
        reader = self._deref(reader, self._reader_names)
        writer = self._deref(writer, self._writer_names)
        r_kind, w_kind = self._kind(reader), self._kind(writer)
        if w_kind == "union":
            for branch in writer:
                found = self.problem(reader, branch, where)
                if found is not None:
                    return found
            return None
        if r_kind == "union":
            for branch in reader:
                if self.problem(branch, writer, where) is None:
                    return None
            return f"{where}: no branch of the reader's union reads the writer's {w_kind}"
        if r_kind != w_kind:
            if r_kind in _PROMOTIONS.get(w_kind, ()):
                return None
            return f"{where}: the reader's {r_kind} cannot read the writer's {w_kind}"
        if r_kind == "record":
            return self._record_problem(reader, writer, where)
        if r_kind == "enum":
            if not self._names_match(reader, writer):
                return f"{where}: enum {writer.get('name')} is read as {reader.get('name')}"
            missing = set(writer.get("symbols", ())) - set(reader.get("symbols", ()))
            if missing and "default" not in reader:
                return f"{where}: the reader's enum lacks the symbols {sorted(missing)}"
            return None
        if r_kind == "fixed":
            if not self._names_match(reader, writer) or reader.get("size") != writer.get("size"):
                return f"{where}: fixed {writer.get('name')} differs in name or size"
            return None
        if r_kind == "array":
            return self.problem(reader.get("items"), writer.get("items"), f"{where}[]")
        if r_kind == "map":
            return self.problem(reader.get("values"), writer.get("values"), f"{where}{{}}")
        return None

    def _record_problem(
        self, reader: Mapping[str, Any], writer: Mapping[str, Any], where: str
    ) -> str | None:
        # No name check: Avro's resolving grammar (what Pulsar's ``SchemaValidator`` runs) matches
        # records by their fields, whatever they are called; enums and fixed types keep theirs.
        key = (str(reader.get("name")), str(writer.get("name")))
        if key in self._in_progress:
            return None  # a recursive type: assume compatible while checking its outer level
        self._in_progress.add(key)
        try:
            writer_fields = {f["name"]: f for f in writer.get("fields", ())}
            for field in reader.get("fields", ()):
                name = field["name"]
                candidates = [name, *(field.get("aliases") or ())]
                written = next((writer_fields[c] for c in candidates if c in writer_fields), None)
                path = f"{where}.{name}" if where else name
                if written is None:
                    if "default" not in field:
                        return (
                            f"field {path!r} is missing from the writer's schema and the "
                            "reader's has no default for it"
                        )
                    continue
                found = self.problem(field["type"], written["type"], path)
                if found is not None:
                    return found
            return None
        finally:
            self._in_progress.discard(key)


def _can_read(reader: ParsedAvro, writer: ParsedAvro) -> str | None:
    return _Resolver(reader, writer).problem(reader[0], writer[0], "")


def _struct_problem(existing: SchemaData, new: SchemaData, strategy: Strategy) -> str | None:
    """Why ``new`` may not follow ``existing`` (both of one struct type) under ``strategy``."""
    if strategy is Strategy.ALWAYS_INCOMPATIBLE:
        return "the schema compatibility strategy is ALWAYS_INCOMPATIBLE"
    old, fresh = parse_avro(existing), parse_avro(new)
    backward = strategy in (Strategy.BACKWARD, Strategy.BACKWARD_TRANSITIVE)
    forward = strategy in (Strategy.FORWARD, Strategy.FORWARD_TRANSITIVE)
    full = strategy in (Strategy.FULL, Strategy.FULL_TRANSITIVE)
    if backward or full:
        found = _can_read(fresh, old)
        if found is not None:
            return f"the new schema cannot read data written with an existing one: {found}"
    if forward or full:
        found = _can_read(old, fresh)
        if found is not None:
            return f"an existing schema cannot read data written with the new one: {found}"
    return None


def check_compatible(existing: Sequence[SchemaData], new: SchemaData, strategy: Strategy) -> None:
    """Check a producer's (or an upload's) schema against the versions it would follow.

    Args:
        existing: the versions since the last delete, oldest first (empty: anything goes).
        new: the schema to add.
        strategy: the effective strategy (never ``UNDEFINED``).

    Raises:
        IncompatibleSchema: ``new`` may not be added; the message says why.
        InvalidSchemaData: a definition does not parse.
    """
    if strategy is Strategy.ALWAYS_COMPATIBLE or not existing:
        return
    against = list(existing) if strategy.is_transitive else [existing[-1]]
    for old in against:
        if old.type is not new.type:
            raise IncompatibleSchema(
                f"Incompatible schema: exists schema type {old.type.name}, new schema type "
                f"{new.type.name}"
            )
    for old in against:
        if same_definition(old, new):
            continue
        if new.type.is_struct:
            problem = _struct_problem(old, new, strategy)
        elif strategy is Strategy.ALWAYS_INCOMPATIBLE:
            problem = "the schema compatibility strategy is ALWAYS_INCOMPATIBLE"
        else:
            problem = None
        if problem is not None:
            raise IncompatibleSchema(
                f"Incompatible {new.type.name} schema under {strategy.name}: {problem}"
            )


def check_consumer_compatible(
    existing: Sequence[SchemaData], schema: SchemaData, strategy: Strategy
) -> None:
    """Check a consumer's schema against the topic's versions: it must be able to read them.

    Raises:
        IncompatibleSchema: it cannot (or the topic has no schema to check against).
    """
    if strategy is Strategy.ALWAYS_COMPATIBLE:
        return
    if not existing:
        raise IncompatibleSchema("the topic does not have a schema to check the consumer's against")
    if strategy in (
        Strategy.BACKWARD,
        Strategy.FORWARD,
        Strategy.FORWARD_TRANSITIVE,
        Strategy.FULL,
    ):
        check_compatible(existing[-1:], schema, Strategy.BACKWARD)
    else:
        check_compatible(existing, schema, strategy)


__all__ = [
    "IncompatibleSchema",
    "InvalidSchemaData",
    "check_compatible",
    "check_consumer_compatible",
    "parse_avro",
    "same_definition",
    "validate",
]
