"""Framing of the Pulsar binary protocol: commands and payloads to bytes and back.

Wire layout (all integers big-endian)::

    simple:   [u32 totalSize][u32 cmdSize][BaseCommand]
    payload:  [u32 totalSize][u32 cmdSize][BaseCommand]
              ([u16 0x0e02][u32 bemSize][BrokerEntryMetadata])?   broker -> client only
              ([u16 0x0e01][u32 crc32c])?                          negotiated version >= 6
              [u32 metadataSize][MessageMetadata][payload]          = the *body*

``totalSize`` counts everything after itself. The CRC32C covers the body only. The body is exactly
what the broker stores and later replays unchanged (batches stay opaque), which is why
:func:`encode_payload_command` takes it as one ``bytes`` value.

:class:`FrameDecoder` is incremental: feed it whatever the socket produced and it returns the frames
completed so far, keeping partial ones buffered. Any input either yields frames or raises a
:class:`~braid.protocol.errors.ProtocolError`; nothing else escapes.
"""

from __future__ import annotations

import struct
from typing import Any, cast

import crc32c
from google.protobuf.message import DecodeError, EncodeError, Message

from braid.protocol import commands
from braid.protocol.errors import FrameTooLarge, InvalidCommand, MalformedFrame, ProtocolError
from braid.protocol.events import CommandReceived
from braid.protocol.generated import PulsarApi_pb2 as pb

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024
# Pulsar sizes its frame limit as the advertised max message size plus this much room for the
# command and headers, so a message of exactly max_message_size still fits in a frame.
FRAME_SIZE_PADDING = 10 * 1024

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U32_PAIR = struct.Struct(">II")
# The checksum magic, the CRC32C and the body's metadata size: what follows a client's SEND.
_CRC_AND_META_SIZE = struct.Struct(">HII")


#: One decoded frame. The decoder builds the event the connection reports for it
#: (:class:`~braid.protocol.events.CommandReceived`: ``command``, ``body``, ``checksum_valid``,
#: ``broker_entry_metadata``), so a command on its way to the broker is one object, not two.
Frame = CommandReceived


def _serialize(message: pb.BaseCommand | pb.MessageMetadata | pb.BrokerEntryMetadata) -> bytes:
    try:
        return message.SerializeToString()
    except EncodeError as exc:
        raise InvalidCommand(str(exc)) from exc


def encode_command(cmd: pb.BaseCommand) -> bytes:
    """Frame a simple (payload-less) command.

    Raises:
        InvalidCommand: a required field of the command is not set.
    """
    data = _serialize(cmd)
    return _U32_PAIR.pack(4 + len(data), len(data)) + data


def encode_payload_command(
    cmd: pb.BaseCommand,
    body: bytes,
    *,
    checksum: bool = True,
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None,
) -> bytes:
    """Frame a payload command (SEND, MESSAGE) around a stored body.

    Args:
        cmd: the command.
        body: ``[u32 metadataSize][MessageMetadata][payload]``, sent unchanged.
        checksum: add magic ``0x0e01`` and the CRC32C of ``body`` (peers at protocol version >= 6).
        broker_entry_metadata: prefix it with magic ``0x0e02``; only for peers that advertised
            ``supports_broker_entry_metadata``.

    Raises:
        InvalidCommand: a required field of the command (or of the entry metadata) is not set.
    """
    return (
        encode_payload_head(
            cmd, body, checksum=checksum, broker_entry_metadata=broker_entry_metadata
        )
        + body
    )


def encode_payload_head(
    cmd: pb.BaseCommand,
    body: bytes,
    *,
    checksum: bool = True,
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None,
) -> bytes:
    """Everything of :func:`encode_payload_command`'s frame before ``body`` (same arguments): a
    sender that writes the head and then ``body`` as separate buffers never copies the body."""
    data = _serialize(cmd)
    parts = [b"", data]
    extra = 0
    if broker_entry_metadata is not None:
        bem = _serialize(broker_entry_metadata)
        prefix = _U16.pack(MAGIC_BROKER_ENTRY_METADATA) + _U32.pack(len(bem)) + bem
        parts.append(prefix)
        extra += len(prefix)
    if checksum:
        parts.append(_U16.pack(MAGIC_CRC32C) + _U32.pack(crc32c.crc32c(body)))
        extra += 6
    parts[0] = _U32_PAIR.pack(4 + len(data) + extra + len(body), len(data))
    return b"".join(parts)


_UINT64 = 2**64 - 1


class SendReceiptEncoder:
    """Encodes SEND_RECEIPT frames - the broker sends one per stored entry - from one reused
    command: filling in four fields and serializing costs a fraction of building the command
    anew, and the frame comes out ready to queue (no trip through a connection's ``send``).

    Not thread-safe (the command is shared between calls): one per connection, used on its loop.
    """

    def __init__(self) -> None:
        self._cmd = pb.BaseCommand(type=pb.BaseCommand.SEND_RECEIPT)
        self._receipt = self._cmd.send_receipt
        self._message_id = self._receipt.message_id
        # What the command holds now, so that fields equal to the last receipt's (the producer,
        # the ledger, usually no highest sequence id) are not set again.
        self._producer_id: int | None = None
        self._ledger_id: int | None = None
        self._has_highest = False

    def encode(
        self,
        producer_id: int,
        sequence_id: int,
        ledger_id: int,
        entry_id: int,
        highest_sequence_id: int = 0,
    ) -> bytes:
        """The frame of ``commands.send_receipt(producer_id, sequence_id, ledger_id, entry_id,
        highest_sequence_id or None)``, byte for byte: ``highest_sequence_id`` only when
        positive, a duplicate's ``-1:-1`` as 2^64 - 1 (the fields are ``uint64``)."""
        receipt = self._receipt
        if producer_id != self._producer_id:
            receipt.producer_id = self._producer_id = producer_id
        receipt.sequence_id = sequence_id
        message_id = self._message_id
        if ledger_id != self._ledger_id:
            message_id.ledgerId = ledger_id & _UINT64
            self._ledger_id = ledger_id
        message_id.entryId = entry_id & _UINT64
        if highest_sequence_id > 0:
            receipt.highest_sequence_id = highest_sequence_id
            self._has_highest = True
        elif self._has_highest:
            receipt.ClearField("highest_sequence_id")
            self._has_highest = False
        data = self._cmd.SerializeToString()
        return _U32_PAIR.pack(4 + len(data), len(data)) + data


def encode_message_body(metadata: pb.MessageMetadata, payload: bytes) -> bytes:
    """Build the stored body ``[u32 metadataSize][MessageMetadata][payload]``.

    Raises:
        InvalidCommand: a required field (producer_name, sequence_id, publish_time) is unset.
    """
    meta = _serialize(metadata)
    return _U32.pack(len(meta)) + meta + payload


def _missing_fields(message: Message) -> str:
    # FindInitializationErrors exists at runtime but not in the type stubs.
    errors: list[str] = cast(Any, message).FindInitializationErrors()
    return ", ".join(errors)


def _check_body_layout(body: bytes | memoryview) -> int:
    """Validate the body's size prefix and return the metadata size."""
    if len(body) < 4:
        raise MalformedFrame(f"message body of {len(body)} bytes has no metadata size")
    (meta_size,) = _U32.unpack_from(body, 0)
    if meta_size > len(body) - 4:
        raise MalformedFrame(
            f"metadata size {meta_size} exceeds the {len(body) - 4} bytes of the message body"
        )
    return int(meta_size)


def decode_message_body(body: bytes) -> tuple[pb.MessageMetadata, bytes]:
    """Split a stored body into its parsed metadata and its (possibly batched) payload.

    Raises:
        MalformedFrame: the sizes do not fit or the metadata does not parse (or lacks required
            fields).
    """
    meta_size = _check_body_layout(body)
    metadata = pb.MessageMetadata()
    try:
        metadata.ParseFromString(body[4 : 4 + meta_size])
    except DecodeError as exc:
        raise MalformedFrame(f"message metadata does not parse: {exc}") from exc
    if not metadata.IsInitialized():
        missing = _missing_fields(metadata)
        raise MalformedFrame(f"message metadata lacks required fields: {missing}")
    return metadata, body[4 + meta_size :]


_SEND = pb.BaseCommand.SEND
_PARSE_COMMAND = pb.BaseCommand.FromString


def parse_command(data: bytes | memoryview) -> pb.BaseCommand:
    """Parse one serialized ``BaseCommand``, insisting on every required field and on the inner
    command its ``type`` names.

    A SEND - the broker's hottest command - is checked by what its readers read: the inner
    ``send`` and its required fields (``CommandSend.IsInitialized``, a third of the cost of
    checking the whole ``BaseCommand``; other fields of the frame are never read). Every other
    command is checked whole.

    Raises:
        MalformedFrame: the bytes do not parse, a required field (including ``type``, which is
            absent when the peer sent a type number this schema does not know) is missing, or
            the inner command matching ``type`` is not set.
    """
    try:
        # Any buffer parses (the stubs say bytes): the decoder hands a view of its buffer.
        cmd = _PARSE_COMMAND(data)  # type: ignore[arg-type]
    except DecodeError as exc:
        raise MalformedFrame(f"command does not parse: {exc}") from exc
    if cmd.type == _SEND:
        # An unset ``send`` reads as an empty message, which lacks its required fields too.
        if cmd.send.IsInitialized():
            return cmd
    elif cmd.IsInitialized() and commands.inner(cmd) is not None:
        return cmd
    raise _malformed(cmd)


def _malformed(cmd: pb.BaseCommand) -> MalformedFrame:
    """Why a parsed command is refused (the slow path: only for a refused command)."""
    # protobuf does not enforce proto2 `required` on parse; we do, so that every later reader
    # can trust the fields. An unknown type number lands here as a missing `type`.
    if cmd.HasField("type"):
        name = commands.type_name(cmd.type)
        inner = commands.inner(cmd)
        if inner is None:
            return MalformedFrame(f"{name} command arrived without its body")
        if not inner.IsInitialized():
            return MalformedFrame(f"{name} command lacks required fields: {_missing_fields(inner)}")
    return MalformedFrame(f"command lacks required fields: {_missing_fields(cmd)}")


class FrameDecoder:
    """Incremental frame decoder: bytes in, :class:`Frame` objects out.

    A frame whose announced size exceeds ``max_frame_size`` (counting its 4-byte size prefix) is
    refused as soon as its header arrives, without buffering it. ``first_frame_max_size``, when
    given, is the limit of the first frame instead: a server's first frame must be a small
    CONNECT, so a stranger cannot make it buffer megabytes before saying who it is. After a
    :class:`~braid.protocol.errors.ProtocolError` the stream is out of sync: the caller must
    close the connection and drop the decoder (:meth:`release` frees its buffer at once).
    """

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        *,
        first_frame_max_size: int | None = None,
    ) -> None:
        if max_frame_size < 8 or (first_frame_max_size is not None and first_frame_max_size < 8):
            raise ValueError("max_frame_size must leave room for the two size fields")
        self.max_frame_size = max_frame_size
        self._first_limit = first_frame_max_size
        self._buffer = bytearray()

    def release(self) -> None:
        """Drop whatever is buffered (the connection is closing); the decoder is unusable after."""
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        """Add received bytes and return every frame they complete, in order.

        Raises:
            FrameTooLarge: a frame announces more than ``max_frame_size`` bytes.
            MalformedFrame: the bytes are not a valid frame.
        """
        frames, error = self.feed_until_error(data)
        if error is not None:
            raise error
        return frames

    def feed_until_error(self, data: bytes) -> tuple[list[Frame], ProtocolError | None]:
        """Like :meth:`feed`, but return the frames that precede a bad one with the error.

        A stream reader handles frames in order; when good frames and garbage arrive in the same
        chunk, the good ones still count. After an error the decoder is out of sync.
        """
        buf = self._buffer
        buf += data
        frames: list[Frame] = []
        pos = 0
        end = len(buf)
        first = self._first_limit
        limit = self.max_frame_size if first is None else first
        error: ProtocolError | None = None
        # Frames are decoded from a view of the buffer: the command is parsed in place and only
        # the body is copied out. The view is released before the buffer shrinks.
        with memoryview(buf) as view:
            try:
                while end - pos >= 4:
                    (total,) = _U32.unpack_from(view, pos)
                    if total + 4 > limit:
                        raise FrameTooLarge(total + 4, limit)
                    if end - pos - 4 < total:
                        break
                    frames.append(_decode_frame(view, pos + 4, pos + 4 + total))
                    pos += 4 + total
                    if first is not None:
                        first = self._first_limit = None
                        limit = self.max_frame_size
            except ProtocolError as exc:
                error = exc
        if pos and error is None:
            # (After an error the stream is out of sync and the caller drops the decoder; the
            # error's traceback may still hold a view of the buffer, which then cannot shrink.)
            del buf[:pos]
        return frames, error


def _decode_frame(view: memoryview, start: int, end: int) -> Frame:
    """Decode the frame in ``view[start:end]`` (everything after its ``totalSize``).

    Works on absolute offsets into a view of the receive buffer so that only the body is copied
    out; this is the broker's hottest path.
    """
    total = end - start
    if total < 4:
        raise MalformedFrame(f"frame of {total} bytes has no command size")
    (cmd_size,) = _U32.unpack_from(view, start)
    if cmd_size > total - 4:
        raise MalformedFrame(f"command size {cmd_size} exceeds the frame's {total - 4} bytes")
    pos = start + 4 + cmd_size
    cmd = parse_command(view[start + 4 : pos])
    if pos == end:
        return Frame(cmd)
    if end - pos >= 10:
        magic, expected, meta_size = _CRC_AND_META_SIZE.unpack_from(view, pos)
        if magic == MAGIC_CRC32C:
            # A client's SEND: checksum, then the body - the one layout worth a shortcut.
            if meta_size > end - pos - 10:
                raise _metadata_too_large(meta_size, end - pos - 10)
            body = bytes(view[pos + 6 : end])
            return Frame(cmd, body, crc32c.crc32c(body) == expected)
    return _decode_payload(cmd, view, pos, end)


def _decode_payload(cmd: pb.BaseCommand, view: memoryview, pos: int, end: int) -> Frame:
    """The general case of what follows a payload command in ``view[pos:end]``: broker entry
    metadata, a checksum, each optional, then the body."""
    bem: pb.BrokerEntryMetadata | None = None
    magic = _U16.unpack_from(view, pos)[0] if end - pos >= 2 else None
    if magic == MAGIC_BROKER_ENTRY_METADATA:
        if end - pos < 6:
            raise MalformedFrame("broker entry metadata is truncated")
        (bem_size,) = _U32.unpack_from(view, pos + 2)
        if bem_size > end - pos - 6:
            raise MalformedFrame(f"broker entry metadata size {bem_size} exceeds the frame")
        bem = pb.BrokerEntryMetadata()
        try:
            bem.ParseFromString(view[pos + 6 : pos + 6 + bem_size])  # type: ignore[arg-type]
        except DecodeError as exc:
            raise MalformedFrame(f"broker entry metadata does not parse: {exc}") from exc
        pos += 6 + bem_size
        magic = _U16.unpack_from(view, pos)[0] if end - pos >= 2 else None
    expected: int | None = None
    if magic == MAGIC_CRC32C:
        if end - pos < 6:
            raise MalformedFrame("checksum is truncated")
        (expected,) = _U32.unpack_from(view, pos + 2)
        pos += 6
    if end - pos < 4:
        raise MalformedFrame(f"message body of {end - pos} bytes has no metadata size")
    (meta_size,) = _U32.unpack_from(view, pos)
    if meta_size > end - pos - 4:
        raise _metadata_too_large(meta_size, end - pos - 4)
    body = bytes(view[pos:end])
    if expected is None:
        return Frame(cmd, body, None, bem)
    return Frame(cmd, body, crc32c.crc32c(body) == expected, bem)


def _metadata_too_large(meta_size: int, room: int) -> MalformedFrame:
    return MalformedFrame(f"metadata size {meta_size} exceeds the {room} bytes of the message body")


__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "FRAME_SIZE_PADDING",
    "MAGIC_BROKER_ENTRY_METADATA",
    "MAGIC_CRC32C",
    "Frame",
    "FrameDecoder",
    "SendReceiptEncoder",
    "decode_message_body",
    "encode_command",
    "encode_message_body",
    "encode_payload_command",
    "encode_payload_head",
    "parse_command",
]
