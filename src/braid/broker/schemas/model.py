"""The schema registry's vocabulary: schema types, schema data, versions, strategies, schema ids.

These are Pulsar's own names so that tooling and habits carry over:

* :class:`SchemaType` is Pulsar's ``SchemaType`` (the REST API's ``"type"``: ``AVRO``, ``JSON``,
  ``STRING``, ..., ``BYTES``) with the mapping to and from the wire's ``Schema.Type`` enum
  (``BYTES`` travels as ``None``, ``AUTO_CONSUME`` as ``AutoConsume``);
* :class:`SchemaCompatibilityStrategy` is the namespace policy / ``schemaCompatibilityStrategy``
  broker key (``ALWAYS_COMPATIBLE``, ``ALWAYS_INCOMPATIBLE``, ``BACKWARD``, ``FORWARD``, ``FULL``
  and the ``_TRANSITIVE`` forms; ``UNDEFINED`` means "ask the next level"); ``NONE``, the old
  ``set-schema-autoupdate-strategy`` name for "no check", is read as ``ALWAYS_COMPATIBLE``;
* a schema *version* is a number 0, 1, 2, ... per schema id, 8 bytes big-endian on the wire
  (Pulsar's ``LongSchemaVersion``);
* the *schema id* of a topic is ``tenant/ns/name`` with the partition suffix of a partitioned
  topic's partition removed, and a ``segment://`` topic's id is its parent scalable topic's: every
  partition, and every segment, shares one topic-level schema (``docs/client.md#schemas``).

Pure: no I/O.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from braid.core.errors import InvalidInputError
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import partitioned_topic_of
from braid.protocol.generated import PulsarApi_pb2 as pb


class InvalidSchemaSetting(InvalidInputError):
    """A schema type or compatibility strategy name Braid does not know."""


class SchemaType(enum.Enum):
    """Pulsar's ``SchemaType`` names; the value is Pulsar's numeric value."""

    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOLEAN = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    DATE = 12
    TIME = 13
    TIMESTAMP = 14
    KEY_VALUE = 15
    INSTANT = 16
    LOCAL_DATE = 17
    LOCAL_TIME = 18
    LOCAL_DATE_TIME = 19
    PROTOBUF_NATIVE = 20
    BYTES = -1
    AUTO = -2
    AUTO_CONSUME = -3
    AUTO_PUBLISH = -4
    EXTERNAL = -5

    @classmethod
    def parse(cls, text: object) -> SchemaType:
        """A REST/CLI name (``"AVRO"``, case-insensitive). Raises :class:`InvalidSchemaSetting`."""
        if isinstance(text, str):
            try:
                return cls[text.strip().upper()]
            except KeyError:
                pass
        names = ", ".join(t.name for t in cls if t.value >= -1)
        raise InvalidSchemaSetting(f"unknown schema type {text!r}: expected one of {names}")

    @classmethod
    def from_wire(cls, value: int) -> SchemaType:
        """The type a ``Schema.Type`` wire value stands for."""
        if value == pb.Schema.AutoConsume:
            return cls.AUTO_CONSUME
        if value == pb.Schema.External:
            return cls.EXTERNAL
        try:
            return cls(value)
        except ValueError:
            raise InvalidSchemaSetting(f"unknown wire schema type {value}") from None

    def to_wire(self) -> pb.Schema.Type.ValueType:
        """The ``Schema.Type`` this type travels as (negative ones, ``BYTES``, as ``None``)."""
        if self is SchemaType.AUTO_CONSUME:
            return pb.Schema.AutoConsume
        if self is SchemaType.EXTERNAL:
            return pb.Schema.External
        return (
            pb.Schema.Type.Value("None")
            if self.value < 0
            else pb.Schema.Type.Value(pb.Schema.Type.Name(self.value))
        )

    @property
    def is_struct(self) -> bool:
        """AVRO, JSON and PROTOBUF carry an Avro record definition that is checked field by
        field (Pulsar's ``isUsingAvroSchemaParser``)."""
        return self in (SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF)

    @property
    def is_primitive(self) -> bool:
        """A type whose data says nothing beyond the type (STRING, INT32, BYTES, ...)."""
        return self.value in range(5, 15) or self in (
            SchemaType.NONE,
            SchemaType.STRING,
            SchemaType.BYTES,
            SchemaType.INSTANT,
            SchemaType.LOCAL_DATE,
            SchemaType.LOCAL_TIME,
            SchemaType.LOCAL_DATE_TIME,
        )


class SchemaCompatibilityStrategy(enum.Enum):
    """How a new schema version must relate to the existing ones (Pulsar's enum)."""

    UNDEFINED = "UNDEFINED"
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @classmethod
    def parse(cls, text: object) -> SchemaCompatibilityStrategy:
        """A strategy name, case-insensitive; ``NONE`` (the old auto-update name for "no check")
        is ``ALWAYS_COMPATIBLE``. Raises :class:`InvalidSchemaSetting`."""
        if isinstance(text, str):
            key = text.strip().upper()
            if key == "NONE":
                return cls.ALWAYS_COMPATIBLE
            try:
                return cls[key]
            except KeyError:
                pass
        names = ", ".join(s.name for s in cls)
        raise InvalidSchemaSetting(
            f"unknown schema compatibility strategy {text!r}: expected one of {names} (or NONE)"
        )

    @property
    def is_transitive(self) -> bool:
        """Checked against every version since the last delete, not only the latest."""
        return self in (
            SchemaCompatibilityStrategy.BACKWARD_TRANSITIVE,
            SchemaCompatibilityStrategy.FORWARD_TRANSITIVE,
            SchemaCompatibilityStrategy.FULL_TRANSITIVE,
        )


#: What ``schemaCompatibilityStrategy`` defaults to (Pulsar's broker default).
DEFAULT_STRATEGY = SchemaCompatibilityStrategy.FULL


def _frozen(props: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(props or {}))


@dataclass(frozen=True)
class SchemaData:
    """One schema as a client or an admin gives it: type, definition bytes, properties."""

    type: SchemaType
    data: bytes
    properties: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.properties, MappingProxyType):
            object.__setattr__(self, "properties", _frozen(self.properties))

    @property
    def hash(self) -> str:
        """SHA-256 of the definition bytes, hex (Pulsar hashes the same bytes)."""
        return hashlib.sha256(self.data).hexdigest()

    @classmethod
    def from_wire(cls, schema: pb.Schema) -> SchemaData:
        """The schema a PRODUCER/SUBSCRIBE/GET_OR_CREATE_SCHEMA carries."""
        return cls(
            SchemaType.from_wire(schema.type),
            bytes(schema.schema_data),
            {kv.key: kv.value for kv in schema.properties},
        )

    def to_wire(self, name: str) -> pb.Schema:
        """The wire ``Schema`` (``name`` is the schema id, as Pulsar answers GET_SCHEMA)."""
        out = pb.Schema(name=name, schema_data=self.data, type=self.type.to_wire())
        for key, value in sorted(self.properties.items()):
            out.properties.add(key=key, value=value)
        return out


def is_bytes_schema(schema: SchemaData | None) -> bool:
    """No schema, or the BYTES/NONE schema a bytes producer may send: nothing to register."""
    return schema is None or (
        schema.type in (SchemaType.NONE, SchemaType.BYTES) and not schema.data
    )


#: A version on the wire: 8 bytes, big-endian (Pulsar's ``LongSchemaVersion``).
VERSION_BYTES = 8


def version_to_bytes(version: int) -> bytes:
    """The wire form of schema version ``version``."""
    return version.to_bytes(VERSION_BYTES, "big", signed=True)


def version_from_bytes(data: bytes) -> int:
    """The schema version a wire ``schema_version`` names. Raises :class:`InvalidSchemaSetting`."""
    if len(data) != VERSION_BYTES:
        raise InvalidSchemaSetting(
            f"a schema version is {VERSION_BYTES} bytes (big-endian), got {len(data)}"
        )
    return int.from_bytes(data, "big", signed=True)


def schema_id_of(topic: TopicName) -> str:
    """The schema id a topic's schema is stored under: ``tenant/ns/name``.

    A partition (``name-partition-3``) shares its partitioned topic's id, and a ``segment://``
    topic its parent scalable topic's, so a topic has one schema however it is split.
    """
    if topic.domain is TopicDomain.SEGMENT:
        local = topic.as_segment().parent.local_name
    else:
        local = partitioned_topic_of(topic.local_name)
    return f"{topic.tenant}/{topic.namespace}/{local}"


__all__ = [
    "DEFAULT_STRATEGY",
    "VERSION_BYTES",
    "InvalidSchemaSetting",
    "SchemaCompatibilityStrategy",
    "SchemaData",
    "SchemaType",
    "is_bytes_schema",
    "schema_id_of",
    "version_from_bytes",
    "version_to_bytes",
]
