"""Frame codec: simple and payload frames, checksums, partial input, size limits, bad input."""

from __future__ import annotations

import struct

import crc32c
import pytest

from braid.core.errors import InvalidInputError
from braid.protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    MAGIC_BROKER_ENTRY_METADATA,
    MAGIC_CRC32C,
    FrameDecoder,
    FrameTooLarge,
    InvalidCommand,
    MalformedFrame,
    ProtocolError,
    commands,
    decode_message_body,
    encode_command,
    encode_message_body,
    encode_payload_command,
    pb,
)


def _metadata(seq: int = 7) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="prod-1", sequence_id=seq, publish_time=1_700_000_000)


def _body(payload: bytes = b"hello braid", seq: int = 7) -> bytes:
    return encode_message_body(_metadata(seq), payload)


# --- CRC32C ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"123456789", 0xE3069283),  # the Castagnoli check value
        (bytes(32), 0x8A9136AA),  # RFC 3720 B.4 vectors
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
    ],
)
def test_crc32c_matches_published_vectors(data: bytes, expected: int) -> None:
    assert crc32c.crc32c(data) == expected


# --- exact bytes ----------------------------------------------------------------------------


def test_ping_frame_has_the_exact_pulsar_bytes() -> None:
    # BaseCommand{type=PING(18), ping{}}: tag 0x08 value 0x12, then field 18 as an empty message.
    assert encode_command(commands.ping()) == bytes.fromhex("00000009 00000005 0812920100")


def test_payload_frame_layout_is_sizes_command_magic_crc_then_body() -> None:
    body = _body()
    cmd = commands.send(1, 7)
    frame = encode_payload_command(cmd, body)
    cmd_bytes = cmd.SerializeToString()
    total, cmd_size = struct.unpack_from(">II", frame)
    assert cmd_size == len(cmd_bytes)
    assert total == len(frame) - 4
    rest = frame[8 + cmd_size :]
    magic, crc = struct.unpack_from(">HI", rest)
    assert magic == MAGIC_CRC32C
    assert crc == crc32c.crc32c(body)
    assert rest[6:] == body


def test_payload_frame_without_checksum_is_sizes_command_then_body() -> None:
    body = _body()
    cmd = commands.send(1, 7)
    frame = encode_payload_command(cmd, body, checksum=False)
    assert frame.endswith(body)
    assert len(frame) == 8 + len(cmd.SerializeToString()) + len(body)


def test_message_body_is_size_prefixed_metadata_then_payload() -> None:
    body = _body(b"xyz")
    (size,) = struct.unpack_from(">I", body)
    assert body[4 + size :] == b"xyz"
    metadata, payload = decode_message_body(body)
    assert payload == b"xyz"
    assert metadata.producer_name == "prod-1"
    assert metadata.sequence_id == 7


# --- round trips ----------------------------------------------------------------------------


def test_simple_command_round_trips() -> None:
    cmd = commands.error(42, pb.TopicNotFound, "no such topic")
    [frame] = FrameDecoder().feed(encode_command(cmd))
    assert frame.command == cmd
    assert frame.body is None
    assert frame.checksum_valid is None
    assert frame.broker_entry_metadata is None


def test_payload_command_round_trips_with_valid_checksum() -> None:
    body = _body(b"\x00" * 1000)
    cmd = commands.message(3, 10, 20, redelivery_count=2)
    [frame] = FrameDecoder().feed(encode_payload_command(cmd, body))
    assert frame.command == cmd
    assert frame.body == body
    assert frame.checksum_valid is True


def test_payload_without_checksum_reports_none() -> None:
    body = _body()
    [frame] = FrameDecoder().feed(encode_payload_command(commands.send(1, 1), body, checksum=False))
    assert frame.body == body
    assert frame.checksum_valid is None


def test_checksum_mismatch_is_reported_not_raised() -> None:
    body = _body(b"payload")
    data = bytearray(encode_payload_command(commands.send(1, 7), body))
    data[-1] ^= 0x01  # corrupt one payload byte after the checksum was computed
    [frame] = FrameDecoder().feed(bytes(data))
    assert frame.checksum_valid is False
    assert frame.body is not None and frame.body[:-1] == body[:-1]


def test_broker_entry_metadata_is_stripped_and_exposed() -> None:
    body = _body()
    bem = pb.BrokerEntryMetadata(broker_timestamp=123, index=9)
    data = encode_payload_command(commands.message(1, 2, 3), body, broker_entry_metadata=bem)
    assert struct.pack(">H", MAGIC_BROKER_ENTRY_METADATA) in data
    [frame] = FrameDecoder().feed(data)
    assert frame.body == body
    assert frame.broker_entry_metadata == bem
    assert frame.checksum_valid is True


def test_broker_entry_metadata_without_checksum() -> None:
    body = _body()
    bem = pb.BrokerEntryMetadata(index=1)
    data = encode_payload_command(
        commands.message(1, 2, 3), body, checksum=False, broker_entry_metadata=bem
    )
    [frame] = FrameDecoder().feed(data)
    assert (frame.body, frame.broker_entry_metadata, frame.checksum_valid) == (body, bem, None)


def test_several_frames_in_one_chunk_come_out_in_order() -> None:
    cmds = [commands.ping(), commands.pong(), commands.success(5), commands.flow(1, 1000)]
    data = b"".join(encode_command(c) for c in cmds)
    assert [f.command for f in FrameDecoder().feed(data)] == cmds


def test_byte_by_byte_feeding_yields_the_same_frames() -> None:
    body = _body(b"p" * 300)
    data = (
        encode_command(commands.ping())
        + encode_payload_command(commands.send(1, 9), body)
        + encode_command(commands.success(3))
    )
    decoder = FrameDecoder()
    frames = []
    for i in range(len(data)):
        frames.extend(decoder.feed(data[i : i + 1]))
    assert [f.command.type for f in frames] == [pb.BaseCommand.PING, pb.BaseCommand.SEND, 13]
    assert frames[1].body == body
    assert frames[1].checksum_valid is True
    assert decoder.buffered == 0


def test_partial_frame_stays_buffered_until_complete() -> None:
    data = encode_command(commands.success(77))
    decoder = FrameDecoder()
    assert decoder.feed(data[:-3]) == []
    assert decoder.buffered == len(data) - 3
    [frame] = decoder.feed(data[-3:])
    assert frame.command.success.request_id == 77


# --- limits and bad input -------------------------------------------------------------------


def test_oversize_frame_is_refused_from_its_header_alone() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(struct.pack(">I", 2000))
    assert info.value.size == 2004
    assert info.value.limit == 1024
    assert isinstance(info.value, ProtocolError)
    assert isinstance(info.value, InvalidInputError)


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    body = _body(b"a" * 100)
    data = encode_payload_command(commands.send(1, 1), body)
    [frame] = FrameDecoder(max_frame_size=len(data)).feed(data)
    assert frame.body == body
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_frame_size=len(data) - 1).feed(data)


def test_default_limit_is_five_mebibytes() -> None:
    assert DEFAULT_MAX_FRAME_SIZE == 5 * 1024 * 1024
    assert FrameDecoder().max_frame_size == DEFAULT_MAX_FRAME_SIZE


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (struct.pack(">I", 2) + b"\x00\x00", "no command size"),
        (struct.pack(">II", 8, 10) + b"\x00" * 4, "exceeds"),
        (struct.pack(">II", 6, 2) + b"\xff\xff", "does not parse"),
        (struct.pack(">II", 6, 2) + b"\x08\x63", "required"),  # unknown type number 99
        (struct.pack(">II", 4, 0), "required"),  # empty command: no type
    ],
)
def test_malformed_frames_raise_typed_errors_with_reasons(data: bytes, reason: str) -> None:
    with pytest.raises(MalformedFrame, match=reason):
        FrameDecoder().feed(data)


def test_command_missing_a_required_inner_field_is_malformed() -> None:
    raw = pb.BaseCommand(type=pb.BaseCommand.CONNECT, connect=pb.CommandConnect())
    data = raw.SerializePartialToString()
    with pytest.raises(MalformedFrame, match="client_version"):
        FrameDecoder().feed(struct.pack(">II", 4 + len(data), len(data)) + data)


def test_payload_shorter_than_its_metadata_size_is_malformed() -> None:
    cmd = commands.send(1, 1).SerializeToString()
    body = struct.pack(">I", 50) + b"short"
    data = struct.pack(">II", 4 + len(cmd) + len(body), len(cmd)) + cmd + body
    with pytest.raises(MalformedFrame, match="metadata size"):
        FrameDecoder().feed(data)


def test_truncated_checksum_is_malformed() -> None:
    cmd = commands.send(1, 1).SerializeToString()
    tail = struct.pack(">H", MAGIC_CRC32C) + b"\x00"
    data = struct.pack(">II", 4 + len(cmd) + len(tail), len(cmd)) + cmd + tail
    with pytest.raises(MalformedFrame, match="checksum"):
        FrameDecoder().feed(data)


def test_encoding_a_command_without_required_fields_is_a_typed_error() -> None:
    incomplete = pb.BaseCommand(type=pb.BaseCommand.ERROR, error=pb.CommandError(request_id=1))
    with pytest.raises(InvalidCommand, match="missing required"):
        encode_command(incomplete)
    with pytest.raises(InvalidCommand):
        encode_message_body(pb.MessageMetadata(producer_name="p"), b"")


def test_decoding_a_body_with_incomplete_metadata_is_malformed() -> None:
    meta = pb.MessageMetadata(producer_name="p").SerializePartialToString()
    with pytest.raises(MalformedFrame, match="required"):
        decode_message_body(struct.pack(">I", len(meta)) + meta)
    with pytest.raises(MalformedFrame):
        decode_message_body(b"\x00\x00")


def test_frames_before_a_bad_one_are_returned_with_the_error() -> None:
    good = encode_command(commands.success(1)) + encode_command(commands.ping())
    frames, error = FrameDecoder().feed_until_error(good + struct.pack(">II", 6, 2) + b"\xff\xff")
    assert [f.command.type for f in frames] == [pb.BaseCommand.SUCCESS, pb.BaseCommand.PING]
    assert isinstance(error, MalformedFrame)
    frames, error = FrameDecoder(max_frame_size=64).feed_until_error(good + struct.pack(">I", 99))
    assert len(frames) == 2
    assert isinstance(error, FrameTooLarge)
