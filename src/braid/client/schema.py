"""Schemas: how a producer turns values into payload bytes and a consumer turns them back.

A topic has one schema (``docs/client.md#schemas``): the broker's registry keeps its versions under
the topic's name, for every segment of a scalable topic alike. A producer or consumer is
created with a :class:`Schema`; the client sends its definition on every per-segment PRODUCER
and SUBSCRIBE (the broker checks compatibility there and answers ``IncompatibleSchema``),
stamps the version the broker gave in every entry's metadata, and decodes received payloads
through it. Values are encoded exactly as Apache Pulsar's clients encode them, so a Braid
consumer reads what a Pulsar producer wrote with the same schema type and the other way round:

===================  ===================================  ===============================
factory              value type                           payload
===================  ===================================  ===============================
``Schema.BYTES``     ``bytes``                            as is (no schema registered)
``Schema.STRING``    ``str``                              UTF-8
``Schema.INT8`` ..   ``int`` / ``float`` / ``bool``       big-endian, Pulsar's widths
``Schema.json(d)``   JSON-serialisable (a ``dict``)       JSON text; ``d`` is the Avro
                                                          record definition registered
``Schema.avro(d)``   ``dict`` matching the record ``d``   Avro binary (fastavro)
``Schema.key_value`` ``(key, value)`` tuple               INLINE: ``[len][key][len][value]``
===================  ===================================  ===============================

An Avro message written with an older (compatible) version of the topic's schema is decoded
with that version as the writer schema and the consumer's as the reader schema (Avro schema
resolution): the consumer fetches the writer definition by the message's ``schema_version``
(GET_SCHEMA) before it delivers the message. Every other type decodes without it.

Pure: no I/O. Encoding failures raise :class:`SchemaSerializationError`.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from braid.client.errors import InvalidConfigurationError, SchemaSerializationError
from braid.protocol.generated import PulsarApi_pb2 as pb

if TYPE_CHECKING:
    from types import ModuleType

    from fastavro.types import Schema as ParsedAvro

_INT32 = struct.Struct(">i")


class Schema:
    """A value codec plus the definition the broker registers for it.

    Use the factory members: ``Schema.BYTES``, ``Schema.STRING``, ``Schema.INT8``,
    ``Schema.INT16``, ``Schema.INT32``, ``Schema.INT64``, ``Schema.FLOAT``, ``Schema.DOUBLE``,
    ``Schema.BOOLEAN``, ``Schema.json(definition)``, ``Schema.avro(definition)`` and
    ``Schema.key_value(key_schema, value_schema)``.

    Attributes:
        type_name: Pulsar's schema type name (``"AVRO"``, ``"STRING"``, ...).
        definition: the schema data the registry stores (empty for primitive types).
        properties: the schema's properties.
    """

    BYTES: ClassVar[Schema]
    STRING: ClassVar[Schema]
    INT8: ClassVar[Schema]
    INT16: ClassVar[Schema]
    INT32: ClassVar[Schema]
    INT64: ClassVar[Schema]
    FLOAT: ClassVar[Schema]
    DOUBLE: ClassVar[Schema]
    BOOLEAN: ClassVar[Schema]

    #: Whether decoding needs the definition of the version a message was written with.
    needs_writer_definition = False

    def __init__(
        self,
        type_name: str,
        definition: bytes = b"",
        properties: Mapping[str, str] | None = None,
    ) -> None:
        self.type_name = type_name
        self.definition = definition
        self.properties: Mapping[str, str] = MappingProxyType(dict(properties or {}))

    @property
    def is_bytes(self) -> bool:
        """The bytes schema: values are payloads and nothing is registered."""
        return self.type_name == "BYTES"

    @property
    def wire_type(self) -> int:
        """The ``Schema.Type`` this schema travels as."""
        return int(pb.Schema.Type.Value(_WIRE_NAMES[self.type_name]))

    def to_wire(self, name: str = "") -> pb.Schema:
        """The ``Schema`` carried by PRODUCER, SUBSCRIBE and GET_OR_CREATE_SCHEMA."""
        out = pb.Schema(name=name, schema_data=self.definition, type=self.wire_type)  # type: ignore[arg-type]
        for key, value in sorted(self.properties.items()):
            out.properties.add(key=key, value=value)
        return out

    def encode(self, value: Any) -> bytes:
        """The payload of ``value``. Raises :class:`SchemaSerializationError`."""
        raise NotImplementedError

    def decode(self, data: bytes, writer_definition: bytes | None = None) -> Any:
        """The value of payload ``data`` (written with ``writer_definition``, if it differs).

        Raises:
            SchemaSerializationError: ``data`` is not a payload of this schema.
        """
        raise NotImplementedError

    @staticmethod
    def json(definition: Mapping[str, Any] | str) -> Schema:
        """JSON values described by an Avro record ``definition`` (what Pulsar registers)."""
        return JsonSchema(definition)

    @staticmethod
    def avro(definition: Mapping[str, Any] | str) -> Schema:
        """Avro binary values of the Avro record ``definition`` (values are dicts)."""
        return AvroSchema(definition)

    @staticmethod
    def key_value(key_schema: Schema, value_schema: Schema) -> Schema:
        """``(key, value)`` pairs, both encoded into the payload (Pulsar's INLINE encoding)."""
        return KeyValueSchema(key_schema, value_schema)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and (
            self.type_name,
            self.definition,
            dict(self.properties),
        ) == (other.type_name, other.definition, dict(other.properties))

    def __hash__(self) -> int:
        return hash((self.type_name, self.definition))

    def __repr__(self) -> str:
        return f"Schema({self.type_name})"


_WIRE_NAMES = {
    "BYTES": "None",
    "STRING": "String",
    "JSON": "Json",
    "AVRO": "Avro",
    "BOOLEAN": "Bool",
    "INT8": "Int8",
    "INT16": "Int16",
    "INT32": "Int32",
    "INT64": "Int64",
    "FLOAT": "Float",
    "DOUBLE": "Double",
    "KEY_VALUE": "KeyValue",
}


def _failed(schema: Schema, what: str, exc: BaseException | str) -> SchemaSerializationError:
    return SchemaSerializationError(f"{schema.type_name} schema cannot {what}: {exc}")


class BytesSchema(Schema):
    """Payloads are the values (the default; nothing is registered)."""

    def __init__(self) -> None:
        super().__init__("BYTES")

    def encode(self, value: Any) -> bytes:
        if type(value) is bytes:
            return value
        if isinstance(value, bytearray | memoryview):
            return bytes(value)
        raise _failed(self, "encode", f"a value must be bytes, got {type(value).__name__}")

    def decode(self, data: bytes, writer_definition: bytes | None = None) -> Any:
        return data


class StringSchema(Schema):
    """``str`` values as UTF-8."""

    def __init__(self) -> None:
        super().__init__("STRING")

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, str):
            raise _failed(self, "encode", f"a value must be str, got {type(value).__name__}")
        return value.encode("utf-8")

    def decode(self, data: bytes, writer_definition: bytes | None = None) -> Any:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _failed(self, "decode", exc) from exc


class PrimitiveSchema(Schema):
    """A fixed-width number or boolean, big-endian as Pulsar's ``IntSchema`` & co."""

    def __init__(self, type_name: str, fmt: str, kind: type) -> None:
        super().__init__(type_name)
        self._struct = struct.Struct(fmt)
        self._kind = kind

    def encode(self, value: Any) -> bytes:
        kind = self._kind
        if kind is bool:
            ok = isinstance(value, bool)
        elif kind is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok:
            raise _failed(
                self, "encode", f"a value must be {kind.__name__}, got {type(value).__name__}"
            )
        try:
            return self._struct.pack(value)
        except (struct.error, OverflowError) as exc:
            raise _failed(self, "encode", exc) from exc

    def decode(self, data: bytes, writer_definition: bytes | None = None) -> Any:
        try:
            (value,) = self._struct.unpack(data)
        except struct.error as exc:
            raise _failed(self, "decode", exc) from exc
        return value


def _record_definition(definition: Mapping[str, Any] | str, type_name: str) -> dict[str, Any]:
    if isinstance(definition, str):
        try:
            parsed = json.loads(definition)
        except ValueError as exc:
            raise InvalidConfigurationError(f"{type_name} schema definition: {exc}") from exc
    elif isinstance(definition, Mapping):
        parsed = dict(definition)
    else:
        raise InvalidConfigurationError(
            f"a {type_name} schema definition is an Avro record (dict or JSON text), got "
            f"{type(definition).__name__}"
        )
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise InvalidConfigurationError(
            f"a {type_name} schema definition must be an Avro record ({{'type': 'record', ...}})"
        )
    return parsed


def _fastavro() -> ModuleType:
    """fastavro, imported on first use: only JSON and Avro schemas need it (~10 ms of start-up
    for every other client process)."""
    import fastavro

    return fastavro


def _parse_avro(definition: dict[str, Any], type_name: str) -> ParsedAvro:
    try:
        parsed: ParsedAvro = _fastavro().parse_schema(definition)
        return parsed
    except Exception as exc:  # fastavro raises SchemaParseException, ValueError, KeyError...
        raise InvalidConfigurationError(f"invalid {type_name} schema definition: {exc}") from exc


class _RecordSchema(Schema):
    """What JSON and Avro share: an Avro record definition, registered as compact JSON."""

    def __init__(self, type_name: str, definition: Mapping[str, Any] | str) -> None:
        record = _record_definition(definition, type_name)
        self.parsed = _parse_avro(record, type_name)
        super().__init__(type_name, json.dumps(record, separators=(",", ":")).encode())


class JsonSchema(_RecordSchema):
    """JSON text values; the definition is the Avro record Pulsar registers for JSON schemas.

    Encoding checks the value against the record (a missing or mistyped field is a
    :class:`SchemaSerializationError`, not a message consumers cannot read).
    """

    def __init__(self, definition: Mapping[str, Any] | str) -> None:
        super().__init__("JSON", definition)

    def encode(self, value: Any) -> bytes:
        try:
            _fastavro().validation.validate(value, self.parsed, raise_errors=True)
            return json.dumps(value, separators=(",", ":")).encode("utf-8")
        except Exception as exc:
            raise _failed(self, "encode", exc) from exc

    def decode(self, data: bytes, writer_definition: bytes | None = None) -> Any:
        try:
            return json.loads(data)
        except ValueError as exc:
            raise _failed(self, "decode", exc) from exc


class AvroSchema(_RecordSchema):
    """Avro binary values (no container header, as Pulsar writes them); values are dicts."""

    needs_writer_definition = True

    def __init__(self, definition: Mapping[str, Any] | str) -> None:
        super().__init__("AVRO", definition)
        self._writers: dict[bytes, ParsedAvro] = {}

    def encode(self, value: Any) -> bytes:
        out = io.BytesIO()
        try:
            _fastavro().schemaless_writer(out, self.parsed, value)
        except Exception as exc:
            raise _failed(self, "encode", exc) from exc
        return out.getvalue()

    def decode(self, data: bytes, writer_definition: bytes | None = None) -> Any:
        writer = self.parsed
        if writer_definition is not None and writer_definition != self.definition:
            writer = self._writer(writer_definition)
        try:
            return _fastavro().schemaless_reader(
                io.BytesIO(data),
                writer,
                None if writer is self.parsed else self.parsed,
            )
        except Exception as exc:
            raise _failed(self, "decode", exc) from exc

    def _writer(self, definition: bytes) -> ParsedAvro:
        parsed = self._writers.get(definition)
        if parsed is None:
            try:
                parsed = _fastavro().parse_schema(json.loads(definition))
            except Exception as exc:
                raise _failed(self, "decode", f"the writer's definition: {exc}") from exc
            self._writers[definition] = parsed
        return parsed


def _length_prefixed(first: bytes, second: bytes) -> bytes:
    return _INT32.pack(len(first)) + first + _INT32.pack(len(second)) + second


def _split_length_prefixed(data: bytes) -> tuple[bytes | None, bytes | None]:
    """The two parts of ``[i32 len][bytes][i32 len][bytes]`` (length -1: absent)."""
    parts: list[bytes | None] = []
    pos = 0
    for _ in range(2):
        if len(data) - pos < 4:
            raise ValueError("truncated length")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0:
            parts.append(None)
            continue
        if size > len(data) - pos:
            raise ValueError(f"a part of {size} bytes overruns the payload")
        parts.append(data[pos : pos + size])
        pos += size
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} bytes after the value")
    return parts[0], parts[1]


class KeyValueSchema(Schema):
    """``(key, value)`` pairs in the payload (Pulsar's ``KeyValueEncodingType.INLINE``).

    The registered definition and properties are Pulsar's ``KeyValueSchemaInfo`` encoding, so
    Pulsar clients and tools read them as a key/value schema.
    """

    def __init__(self, key_schema: Schema, value_schema: Schema) -> None:
        for part in (key_schema, value_schema):
            if not isinstance(part, Schema) or isinstance(part, KeyValueSchema):
                raise InvalidConfigurationError(
                    f"a key/value schema's parts are non-key/value Schemas, got {part!r}"
                )
        self.key_schema = key_schema
        self.value_schema = value_schema
        properties = {"kv.encoding.type": "INLINE"}
        for side, part in (("key", key_schema), ("value", value_schema)):
            properties[f"{side}.schema.name"] = ""
            properties[f"{side}.schema.type"] = part.type_name
            properties[f"{side}.schema.properties"] = json.dumps(dict(part.properties))
        super().__init__(
            "KEY_VALUE",
            _length_prefixed(key_schema.definition, value_schema.definition),
            properties,
        )

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, tuple) or len(value) != 2:
            raise _failed(self, "encode", f"a value must be a (key, value) tuple, got {value!r}")
        return _length_prefixed(
            self.key_schema.encode(value[0]), self.value_schema.encode(value[1])
        )

    def decode(self, data: bytes, writer_definition: bytes | None = None) -> Any:
        try:
            key, value = _split_length_prefixed(data)
        except ValueError as exc:
            raise _failed(self, "decode", exc) from exc
        return (
            None if key is None else self.key_schema.decode(key),
            None if value is None else self.value_schema.decode(value),
        )


Schema.BYTES = BytesSchema()
Schema.STRING = StringSchema()
Schema.INT8 = PrimitiveSchema("INT8", ">b", int)
Schema.INT16 = PrimitiveSchema("INT16", ">h", int)
Schema.INT32 = PrimitiveSchema("INT32", ">i", int)
Schema.INT64 = PrimitiveSchema("INT64", ">q", int)
Schema.FLOAT = PrimitiveSchema("FLOAT", ">f", float)
Schema.DOUBLE = PrimitiveSchema("DOUBLE", ">d", float)
Schema.BOOLEAN = PrimitiveSchema("BOOLEAN", ">?", bool)


class PayloadDecoder:
    """A consumer's schema plus the writer definitions it learnt, by wire schema version.

    Shared by every segment of one consumer (the versions are the topic's). A version maps to
    ``None`` when its definition could not be fetched: such messages decode with the
    consumer's own definition.
    """

    __slots__ = ("schema", "writers")

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.writers: dict[bytes, bytes | None] = {}

    def needs_writer(self, version: bytes | None) -> bool:
        """Whether a message of ``version`` must wait for its writer definition."""
        return (
            self.schema.needs_writer_definition
            and version is not None
            and version not in self.writers
        )

    def decode(self, data: bytes, version: bytes | None) -> Any:
        """The value of ``data``, written with schema ``version`` (raises
        :class:`SchemaSerializationError`)."""
        writer = self.writers.get(version) if version else None
        return self.schema.decode(data, writer)


def check_schema(schema: object) -> Schema:
    """The schema a ``schema=`` option names (``None`` = bytes).

    Raises:
        InvalidConfigurationError: not a :class:`Schema`.
    """
    if schema is None:
        return Schema.BYTES
    if not isinstance(schema, Schema):
        raise InvalidConfigurationError(
            f"schema must be a braid.Schema (e.g. braid.Schema.STRING), got {schema!r}"
        )
    return schema


__all__ = [
    "AvroSchema",
    "BytesSchema",
    "JsonSchema",
    "KeyValueSchema",
    "PayloadDecoder",
    "PrimitiveSchema",
    "Schema",
    "StringSchema",
    "check_schema",
]
