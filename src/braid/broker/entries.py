"""What the broker reads out of a stored entry without touching its payload.

An entry is stored exactly as the producer's SEND carried it, ``[u32 metadataSize][MessageMetadata]
[payload]``, and replayed unchanged. The broker only needs a few metadata fields: how many messages
the entry holds (FLOW permits count messages), the publish time (seek by time), and the producer
name / sequence ids (deduplication replay). Parsing only the metadata keeps this cheap; the payload
(possibly a compressed batch) is never decoded by the broker.
"""

from __future__ import annotations

from braid.core.errors import InvalidInputError
from braid.protocol.generated import PulsarApi_pb2 as pb


class CorruptEntry(InvalidInputError):
    """A stored entry whose metadata section cannot be read."""


def parse_metadata(data: bytes) -> pb.MessageMetadata:
    """Parse the ``MessageMetadata`` at the head of a stored entry."""
    if len(data) < 4:
        raise CorruptEntry(f"entry of {len(data)} bytes is too short for a metadata size")
    size = int.from_bytes(data[:4], "big")
    if size > len(data) - 4:
        raise CorruptEntry(f"entry metadata size {size} exceeds the entry ({len(data)} bytes)")
    try:
        return pb.MessageMetadata.FromString(data[4 : 4 + size])
    except Exception as exc:  # protobuf's DecodeError is not ours to leak
        raise CorruptEntry(f"entry metadata does not parse: {exc}") from exc


def messages_in_entry(data: bytes) -> int:
    """Number of messages an entry holds: ``num_messages_in_batch`` when it is a batch, else 1."""
    try:
        meta = parse_metadata(data)
    except CorruptEntry:
        return 1
    if meta.HasField("num_messages_in_batch"):
        return max(meta.num_messages_in_batch, 1)
    return 1


def publish_time_of(data: bytes) -> int:
    """The entry's ``publish_time`` in ms (0 when it cannot be read)."""
    try:
        return int(parse_metadata(data).publish_time)
    except CorruptEntry:
        return 0
