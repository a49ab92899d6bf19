"""What the broker refuses in a SEND body, and what it must keep accepting.

Refused: metadata that does not parse or lacks a required field, payloads over maxMessageSize, batch
counts the payload does not hold (compressed or not). Accepted: everything the clients build,
including the official client's own LZ4 batch (golden bytes), and batches the broker cannot look
into.
"""

from __future__ import annotations

import struct
import zlib

import pytest

from braid.broker.errors import InvalidMessage, ServerError, to_server_error
from braid.broker.send_validation import SendValidator
from braid.protocol import FrameDecoder
from braid.protocol.batch import build_entry, build_single_entry, encode_batch
from braid.protocol.frames import encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.unit.protocol.test_official_client_bytes import OFFICIAL_LZ4_BATCH_SEND

MAX = 1024 * 1024
VALIDATOR = SendValidator(MAX)


def _meta(**fields: object) -> pb.MessageMetadata:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=3, publish_time=1_700_000_000_000)
    for name, value in fields.items():
        setattr(meta, name, value)
    return meta


def _batch(count: int, codec: pb.CompressionType.ValueType = pb.NONE) -> bytes:
    singles = [(pb.SingleMessageMetadata(partition_key=f"k{i}"), b"v" * 50) for i in range(count)]
    return build_entry(_meta(), singles, compression=codec)


def _lying(body: bytes, count: int) -> bytes:
    """``body`` with its metadata's ``num_messages_in_batch`` replaced by ``count``."""
    (size,) = struct.unpack_from(">I", body)
    meta = pb.MessageMetadata.FromString(body[4 : 4 + size])
    meta.num_messages_in_batch = count
    return encode_message_body(meta, body[4 + size :])


def test_single_messages_and_batches_pass_with_their_metadata() -> None:
    single = VALIDATOR.validate(build_single_entry(_meta(), b"hello"))
    assert single.sequence_id == 3 and not single.HasField("num_messages_in_batch")
    batched = VALIDATOR.validate(_batch(10))
    assert batched.num_messages_in_batch == 10


@pytest.mark.parametrize("codec", [pb.LZ4, pb.ZLIB, pb.ZSTD])
def test_compressed_batches_are_checked_after_decompression(
    codec: pb.CompressionType.ValueType,
) -> None:
    body = _batch(7, codec)
    assert VALIDATOR.validate(body).compression == codec
    with pytest.raises(InvalidMessage, match="num_messages_in_batch=9 does not match"):
        VALIDATOR.validate(_lying(body, 9))


def test_the_official_clients_lz4_batch_passes() -> None:
    [frame] = FrameDecoder().feed(OFFICIAL_LZ4_BATCH_SEND)
    assert frame.body is not None
    assert VALIDATOR.validate(frame.body).num_messages_in_batch == 3


@pytest.mark.parametrize("count", [0, -1, 4, 1000])
def test_a_batch_count_the_payload_does_not_hold_is_refused(count: int) -> None:
    with pytest.raises(InvalidMessage, match=f"num_messages_in_batch={count}"):
        VALIDATOR.validate(_lying(_batch(3), count))


def test_a_count_on_a_payload_that_is_not_a_batch_is_refused() -> None:
    body = encode_message_body(_meta(num_messages_in_batch=5), b"just bytes")
    with pytest.raises(InvalidMessage, match="does not match the payload"):
        VALIDATOR.validate(body)


def test_metadata_that_does_not_parse_is_refused() -> None:
    garbage = b"\xff\xff\xff\xff\x0f"
    with pytest.raises(InvalidMessage, match="does not parse"):
        VALIDATOR.validate(struct.pack(">I", len(garbage)) + garbage + b"payload")


def test_metadata_without_its_required_fields_is_refused() -> None:
    partial = pb.MessageMetadata(producer_name="p").SerializePartialToString()
    with pytest.raises(InvalidMessage, match="lacks required fields: sequence_id, publish_time"):
        VALIDATOR.validate(struct.pack(">I", len(partial)) + partial + b"x")


def test_bodies_with_impossible_sizes_are_refused() -> None:
    with pytest.raises(InvalidMessage, match="no metadata size"):
        VALIDATOR.validate(b"\x00\x00")
    with pytest.raises(InvalidMessage, match="exceeds the 6 bytes"):
        VALIDATOR.validate(struct.pack(">I", 100) + b"abcdef")


def test_payloads_above_max_message_size_are_refused_at_the_exact_limit() -> None:
    VALIDATOR.validate(build_single_entry(_meta(), b"x" * MAX))
    with pytest.raises(InvalidMessage, match=f"payload of {MAX + 1} bytes exceeds maxMessageSize"):
        VALIDATOR.validate(build_single_entry(_meta(), b"x" * (MAX + 1)))


def test_a_batch_claiming_a_huge_uncompressed_size_is_refused() -> None:
    validator = SendValidator(MAX, max_uncompressed_size=64 * 1024)
    payload = encode_batch([(pb.SingleMessageMetadata(), b"\0" * 100_000)])
    meta = _meta(num_messages_in_batch=1, compression=pb.ZLIB, uncompressed_size=len(payload))
    with pytest.raises(InvalidMessage, match="uncompressed size"):
        validator.validate(encode_message_body(meta, zlib.compress(payload)))


def test_encrypted_batches_are_stored_unchecked() -> None:
    meta = _meta(num_messages_in_batch=50)
    meta.encryption_keys.add(key="k", value=b"secret")
    VALIDATOR.validate(encode_message_body(meta, b"ciphertext the broker cannot read"))


def test_refusals_go_out_as_checksum_errors_naming_the_reason() -> None:
    # ChecksumError is the one SEND_ERROR the official clients answer by failing only the message.
    with pytest.raises(InvalidMessage) as refused:
        VALIDATOR.validate(_lying(_batch(2), 5))
    code, message = to_server_error(refused.value)
    assert code == ServerError.ChecksumError
    assert "num_messages_in_batch=5" in message
