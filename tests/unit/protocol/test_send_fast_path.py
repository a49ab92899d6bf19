"""The frame decoder's shortcuts for SEND (issue 16) against the generic protobuf path.

The decoder parses a SEND in place from a view of its buffer, checks only the inner ``send``
command's required fields, and takes the checksum-then-body layout in one step. These tests
decode streams of SENDs - valid, with a bad checksum, without a checksum, missing required
fields, split anywhere - both with :class:`FrameDecoder` and with a reference decoder written
directly from the wire layout and protobuf's own parse and ``IsInitialized``, and require the
same frames and the same refusals.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from braid.protocol import FrameDecoder, MalformedFrame, ProtocolError, commands, pb
from braid.protocol.frames import encode_message_body, encode_payload_command

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


def _reference(data: bytes) -> list[tuple[pb.BaseCommand, bytes | None, bool | None]]:
    """Decode complete frames the slow, obvious way; raise MalformedFrame where the decoder
    must refuse."""
    out = []
    pos = 0
    while pos < len(data):
        (total,) = struct.unpack_from(">I", data, pos)
        frame = data[pos + 4 : pos + 4 + total]
        pos += 4 + total
        (cmd_size,) = struct.unpack_from(">I", frame, 0)
        cmd = pb.BaseCommand.FromString(frame[4 : 4 + cmd_size])
        if not cmd.IsInitialized() or commands.inner(cmd) is None:
            raise MalformedFrame("refused")
        rest = frame[4 + cmd_size :]
        if not rest:
            out.append((cmd, None, None))
            continue
        valid: bool | None = None
        if rest[:2] == b"\x0e\x01":
            (expected,) = struct.unpack_from(">I", rest, 2)
            rest = rest[6:]
            valid = crc32c.crc32c(rest) == expected
        (meta_size,) = struct.unpack_from(">I", rest, 0)
        if meta_size > len(rest) - 4:
            raise MalformedFrame("refused")
        out.append((cmd, rest, valid))
    return out


@st.composite
def send_commands(draw: st.DrawFn) -> pb.BaseCommand:
    """SEND commands as clients write them, and some no client should (required fields or the
    inner command missing, a message id without its entry id)."""
    send = pb.CommandSend()
    if draw(st.integers(0, 9)) > 0:
        send.producer_id = draw(u64)
    if draw(st.integers(0, 9)) > 0:
        send.sequence_id = draw(u64)
    if draw(st.booleans()):
        send.num_messages = draw(st.integers(0, 1000))
    if draw(st.booleans()):
        send.highest_sequence_id = draw(u64)
    if draw(st.integers(0, 9)) == 0:
        send.message_id.ledgerId = draw(u64)
        if draw(st.booleans()):
            send.message_id.entryId = draw(u64)
    cmd = pb.BaseCommand(type=pb.BaseCommand.SEND)
    if draw(st.integers(0, 19)) > 0:
        cmd.send.CopyFrom(send)
    # partial: the required-field check is the decoder's, not the encoder's
    return cmd


@st.composite
def send_streams(draw: st.DrawFn) -> bytes:
    frames = []
    for _ in range(draw(st.integers(1, 8))):
        meta = pb.MessageMetadata(producer_name="p", sequence_id=draw(u64), publish_time=1)
        body = encode_message_body(meta, draw(st.binary(max_size=200)))
        cmd = draw(send_commands()).SerializePartialToString()
        checksum = draw(st.booleans())
        head = cmd
        if checksum:
            crc = crc32c.crc32c(body) ^ (1 if draw(st.integers(0, 9)) == 0 else 0)
            head += b"\x0e\x01" + struct.pack(">I", crc)
        frames.append(struct.pack(">II", 4 + len(head) + len(body), len(cmd)) + head + body)
    return b"".join(frames)


@SETTINGS
@given(send_streams(), st.lists(st.integers(min_value=0), max_size=12))
def test_send_streams_split_anywhere_decode_as_the_generic_path_does(
    data: bytes, cuts: list[int]
) -> None:
    decoder = FrameDecoder()
    got = []
    error: ProtocolError | None = None
    start = 0
    for point in [*sorted({c % (len(data) + 1) for c in cuts}), len(data)]:
        frames, error = decoder.feed_until_error(data[start:point])
        got.extend((f.command, f.body, f.checksum_valid) for f in frames)
        start = point
        if error is not None:
            break
    try:
        expected = _reference(data)
    except MalformedFrame:
        # The reference refuses the stream somewhere: so must the decoder, after decoding the
        # same good frames before that point.
        assert isinstance(error, MalformedFrame)
        good = []
        pos = 0
        while len(good) < len(got):
            (total,) = struct.unpack_from(">I", data, pos)
            good.extend(_reference(data[pos : pos + 4 + total]))
            pos += 4 + total
        assert got == good
        return
    assert error is None
    assert got == expected
    assert decoder.buffered == 0


def _send_frame(cmd: pb.BaseCommand) -> bytes:
    body = encode_message_body(
        pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1), b"x"
    )
    raw = cmd.SerializePartialToString()
    return struct.pack(">II", 4 + len(raw) + len(body), len(raw)) + raw + body


@pytest.mark.parametrize(
    ("send", "reason"),
    [
        (pb.CommandSend(sequence_id=1), "SEND command lacks required fields: producer_id"),
        (pb.CommandSend(producer_id=1), "SEND command lacks required fields: sequence_id"),
        (
            pb.CommandSend(producer_id=1, sequence_id=1, message_id=pb.MessageIdData(ledgerId=3)),
            "SEND command lacks required fields: message_id.entryId",
        ),
        (None, "SEND command arrived without its body"),
    ],
)
def test_a_send_missing_what_its_readers_read_is_malformed(
    send: pb.CommandSend | None, reason: str
) -> None:
    cmd = pb.BaseCommand(type=pb.BaseCommand.SEND)
    if send is not None:
        cmd.send.CopyFrom(send)
    with pytest.raises(MalformedFrame, match=reason):
        FrameDecoder().feed(_send_frame(cmd))


def test_a_valid_send_decodes_with_its_fields_body_and_checksum() -> None:
    body = encode_message_body(
        pb.MessageMetadata(producer_name="p", sequence_id=7, publish_time=1), b"hi"
    )
    data = encode_payload_command(commands.send(3, 7, num_messages=2), body)
    [frame] = FrameDecoder().feed(data)
    assert (frame.command.send.producer_id, frame.command.send.sequence_id) == (3, 7)
    assert frame.command.send.num_messages == 2
    assert (frame.body, frame.checksum_valid, frame.broker_entry_metadata) == (body, True, None)
