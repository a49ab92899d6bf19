"""SEND bodies no consumer could read, as a hostile or broken producer would send them.

Each builder returns a stored-form body (``[u32 metadataSize][MessageMetadata][payload]``) whose
framing and checksum are fine - the frame decoder accepts it - so only the broker's SEND validation
(:mod:`braid.broker.send_validation`) stands between it and every consumer of the topic.
"""

from __future__ import annotations

import struct

from braid.protocol.batch import build_entry
from braid.protocol.frames import encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb

_PUBLISH_TIME = 1_700_000_000_000


def unparsable_metadata(payload: bytes = b"payload") -> bytes:
    """Metadata bytes that are not a protobuf message at all."""
    garbage = b"\xff\xff\xff\xff\x0f\x01"
    return struct.pack(">I", len(garbage)) + garbage + payload


def metadata_missing_fields(payload: bytes = b"payload") -> bytes:
    """Metadata that parses but lacks ``sequence_id`` and ``publish_time``."""
    partial = pb.MessageMetadata(producer_name="poison").SerializePartialToString()
    return struct.pack(">I", len(partial)) + partial + payload


def false_batch_count(producer_name: str, sequence_id: int, *, claimed: int = 100) -> bytes:
    """A batch of two messages whose metadata claims ``claimed``: the official C++ client reads
    past its buffer on this (a segfault)."""
    meta = pb.MessageMetadata(
        producer_name=producer_name, sequence_id=sequence_id, publish_time=_PUBLISH_TIME
    )
    body = build_entry(
        meta, [(pb.SingleMessageMetadata(), b"a"), (pb.SingleMessageMetadata(), b"b")]
    )
    (size,) = struct.unpack_from(">I", body)
    lying = pb.MessageMetadata.FromString(body[4 : 4 + size])
    lying.num_messages_in_batch = claimed
    return encode_message_body(lying, body[4 + size :])


def oversize(producer_name: str, sequence_id: int, max_message_size: int) -> bytes:
    """A well-formed message whose payload is one byte over ``max_message_size`` (the frame limit
    leaves room for headers, so it still fits in a frame)."""
    meta = pb.MessageMetadata(
        producer_name=producer_name, sequence_id=sequence_id, publish_time=_PUBLISH_TIME
    )
    return encode_message_body(meta, b"o" * (max_message_size + 1))


def poison_bodies(producer_name: str, sequence_id: int, max_message_size: int) -> list[bytes]:
    """One body of each kind the broker must refuse."""
    return [
        unparsable_metadata(),
        metadata_missing_fields(),
        false_batch_count(producer_name, sequence_id),
        oversize(producer_name, sequence_id, max_message_size),
    ]
