"""The producer's hot path: message and batch metadata encoded straight to protobuf bytes.

A producer pays per message for whatever Python work surrounds it, so this module writes the
``SingleMessageMetadata`` of each batched message, and the outer ``MessageMetadata`` of each
entry, directly in the protobuf wire format instead of building and serializing message objects:
the constant parts (the producer name's field) are encoded once per producer, and a message with
no key, properties or event time costs two short byte strings. The output is byte-for-byte what
``SerializeToString`` of the same ``pb`` objects gives (fields in field-number order), which the
unit tests check against :mod:`braid.protocol.batch`, the repository's reference encoder.

Layouts (field numbers of ``PulsarApi.proto``)::

    SingleMessageMetadata: 1 properties, 2 partition_key, 3 payload_size, 5 event_time,
                           8 sequence_id
    MessageMetadata:       1 producer_name, 2 sequence_id, 3 publish_time, 4 properties,
                           6 partition_key, 8 compression, 9 uncompressed_size,
                           11 num_messages_in_batch, 12 event_time, 16 schema_version,
                           19 deliver_at_time,
                           24 highest_sequence_id,
                           33 entry_hash_min, 34 entry_hash_max
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

_U32 = struct.Struct(">I").pack
_SMALL = [bytes((i,)) for i in range(128)]
_PAYLOAD_SIZE_CACHE: dict[int, bytes] = {}


def varint(value: int) -> bytes:
    """Unsigned LEB128 of a non-negative integer (protobuf's varint)."""
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field_bytes(tag: int | bytes, data: bytes) -> bytes:
    prefix = tag if isinstance(tag, bytes) else _SMALL[tag]
    return prefix + varint(len(data)) + data


#: Field 16 (``schema_version``), length-delimited: a two-byte tag.
_SCHEMA_VERSION_TAG = b"\x82\x01"


def _string(tag: int, text: str) -> bytes:
    return _field_bytes(tag, text.encode("utf-8"))


def encode_properties(tag: int, properties: Mapping[str, str]) -> bytes:
    """Repeated ``KeyValue`` field ``tag`` (already shifted: ``field << 3 | 2``)."""
    parts = []
    for key, value in properties.items():
        parts.append(_field_bytes(tag, _string(0x0A, key) + _string(0x12, value)))
    return b"".join(parts)


def _payload_size(size: int) -> bytes:
    field = _PAYLOAD_SIZE_CACHE.get(size)
    if field is None:
        field = b"\x18" + varint(size)
        if len(_PAYLOAD_SIZE_CACHE) < 65536:
            _PAYLOAD_SIZE_CACHE[size] = field
    return field


def bare_header(size: int) -> bytes:
    """``single_message_header(size)`` of a message with nothing but a payload (cached)."""
    header = _BARE_CACHE.get(size)
    if header is None:
        meta = _payload_size(size)
        header = _U32(len(meta)) + meta
        if len(_BARE_CACHE) < 65536:
            _BARE_CACHE[size] = header
    return header


_BARE_CACHE: dict[int, bytes] = {}


def single_message_header(
    size: int,
    sequence_id: int | None = None,
    key: str | None = None,
    properties: Mapping[str, str] | None = None,
    event_time: int | None = None,
) -> bytes:
    """``[u32 metadataSize][SingleMessageMetadata]`` for one batched message of ``size`` bytes.

    ``sequence_id`` is written only when given: a batched message without one has the entry's
    sequence id plus its index, so a producer writes it only where its ids are not contiguous.
    """
    if key is None and not properties and not event_time:
        if sequence_id is None:
            return bare_header(size)
        meta = _payload_size(size) + b"\x40" + varint(sequence_id)
    else:
        meta = b"".join(
            (
                encode_properties(0x0A, properties) if properties else b"",
                _string(0x12, key) if key is not None else b"",
                _payload_size(size),
                b"\x28" + varint(event_time) if event_time else b"",
                b"\x40" + varint(sequence_id) if sequence_id is not None else b"",
            )
        )
    return _U32(len(meta)) + meta


def producer_name_field(name: str) -> bytes:
    """The constant first field of every entry a producer writes."""
    return _string(0x0A, name)


def entry_metadata(
    name_field: bytes,
    sequence_id: int,
    publish_time: int,
    *,
    num_messages: int | None = None,
    compression: int = 0,
    uncompressed_size: int = 0,
    highest_sequence_id: int | None = None,
    key: str | None = None,
    properties: Mapping[str, str] | None = None,
    event_time: int | None = None,
    entry_hash_range: tuple[int, int] | None = None,
    schema_version: bytes | None = None,
    deliver_at_time: int | None = None,
    txn: tuple[int, int] | None = None,
) -> bytes:
    """``[u32 metadataSize][MessageMetadata]`` of one entry.

    ``num_messages`` set = a batch (``num_messages_in_batch``); the key, properties and event
    time belong on the outer metadata only for an unbatched message. ``schema_version`` is the
    version PRODUCER_SUCCESS gave the producer (every message of an entry shares it).
    ``deliver_at_time``: a delayed message's time (it travels alone in its entry).
    ``txn``: ``(mostBits, leastBits)`` of the transaction the entry is sent in.
    """
    parts = [
        name_field,
        b"\x10" + varint(sequence_id),
        b"\x18" + varint(publish_time),
    ]
    if properties:
        parts.append(encode_properties(0x22, properties))
    if key is not None:
        parts.append(_string(0x32, key))
    if compression:
        parts.append(b"\x40" + varint(compression))
        parts.append(b"\x48" + varint(uncompressed_size))
    if num_messages is not None:
        parts.append(b"\x58" + varint(num_messages))
    if event_time:
        parts.append(b"\x60" + varint(event_time))
    if schema_version is not None:
        parts.append(_field_bytes(_SCHEMA_VERSION_TAG, schema_version))
    if deliver_at_time is not None:
        parts.append(b"\x98\x01" + varint(deliver_at_time))
    if txn is not None:
        parts.append(b"\xb0\x01" + varint(txn[1]))  # txnid_least_bits = 22
        parts.append(b"\xb8\x01" + varint(txn[0]))  # txnid_most_bits = 23
    if highest_sequence_id is not None:
        parts.append(b"\xc0\x01" + varint(highest_sequence_id))
    if entry_hash_range is not None:
        parts.append(b"\x88\x02" + varint(entry_hash_range[0]))
        parts.append(b"\x90\x02" + varint(entry_hash_range[1]))
    meta = b"".join(parts)
    return _U32(len(meta)) + meta


__all__ = [
    "bare_header",
    "encode_properties",
    "entry_metadata",
    "producer_name_field",
    "single_message_header",
    "varint",
]
