"""Batch payloads and compression codecs, for tests and the Python client.

The broker never looks inside a batch: it stores the body it received and replays it unchanged.
This module is for the sides that build and read entries. An entry is a batch exactly when its
``MessageMetadata.num_messages_in_batch`` is present (even when it is 1); its payload, after
decompression, is a run of ``[u32 size][SingleMessageMetadata][payload]``. Compression applies to
the whole payload and ``MessageMetadata.uncompressed_size`` records the original length:

* LZ4 - the raw LZ4 *block* format, no frame header and no stored size (what Pulsar's clients
  produce); the size comes from the metadata.
* ZLIB - the zlib format (deflate with zlib header and adler32), as zlib's ``compress`` writes it.
* ZSTD - a standard Zstandard frame.
* SNAPPY - raw Snappy blocks; only when ``python-snappy`` or ``cramjam`` is installed, else
  :class:`~braid.protocol.errors.UnsupportedCompression`.
"""

from __future__ import annotations

import importlib
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import lz4.block
import zstandard
from google.protobuf.message import DecodeError, EncodeError

from braid.protocol.errors import CorruptPayload, InvalidCommand, UnsupportedCompression
from braid.protocol.frames import decode_message_body, encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb

#: Refuse to inflate a payload past this many bytes whatever its metadata claims.
DEFAULT_MAX_UNCOMPRESSED_SIZE = 64 * 1024 * 1024
_ZSTD_LEVEL = 3  # the level Pulsar's clients default to

_U32 = struct.Struct(">I")
_Codec: TypeAlias = pb.CompressionType.ValueType


@dataclass(frozen=True, slots=True)
class EntryMessage:
    """One message read out of a stored entry.

    Attributes:
        payload: the message's (decompressed) payload.
        single: its per-message metadata when the entry is a batch, else ``None``.
        batch_index: its index in the batch, or ``None`` for a non-batched entry.
    """

    payload: bytes
    single: pb.SingleMessageMetadata | None = None
    batch_index: int | None = None


def messages_in_entry(metadata: pb.MessageMetadata) -> int:
    """How many messages an entry holds: ``num_messages_in_batch`` for batches, else 1."""
    if metadata.HasField("num_messages_in_batch"):
        return metadata.num_messages_in_batch
    return 1


def encode_batch(messages: Iterable[tuple[pb.SingleMessageMetadata, bytes]]) -> bytes:
    """Serialize messages as ``[u32 size][SingleMessageMetadata][payload]...``.

    ``payload_size`` is set from each payload (on a copy; the caller's metadata is untouched).

    Raises:
        InvalidCommand: a metadata object cannot be serialized.
    """
    parts: list[bytes] = []
    for single, payload in messages:
        meta = pb.SingleMessageMetadata()
        meta.CopyFrom(single)
        meta.payload_size = len(payload)
        try:
            data = meta.SerializeToString()
        except EncodeError as exc:  # pragma: no cover - payload_size is the only required field
            raise InvalidCommand(str(exc)) from exc
        parts += (_U32.pack(len(data)), data, payload)
    return b"".join(parts)


def decode_batch(data: bytes, count: int) -> list[EntryMessage]:
    """Split an uncompressed batch payload into its ``count`` messages.

    Raises:
        CorruptPayload: the sizes do not fit, a metadata does not parse, or bytes are left over.
    """
    if count < 0:
        raise CorruptPayload(f"negative batch size {count}")
    out: list[EntryMessage] = []
    pos = 0
    for index in range(count):
        if len(data) - pos < 4:
            raise CorruptPayload(f"batch ends before message {index} of {count}")
        (meta_size,) = _U32.unpack_from(data, pos)
        pos += 4
        if meta_size > len(data) - pos:
            raise CorruptPayload(f"metadata of message {index} overruns the batch")
        single = pb.SingleMessageMetadata()
        try:
            single.ParseFromString(data[pos : pos + meta_size])
        except DecodeError as exc:
            raise CorruptPayload(f"metadata of message {index} does not parse: {exc}") from exc
        if not single.HasField("payload_size") or single.payload_size < 0:
            raise CorruptPayload(f"message {index} has no valid payload_size")
        pos += meta_size
        end = pos + single.payload_size
        if end > len(data):
            raise CorruptPayload(f"payload of message {index} overruns the batch")
        out.append(EntryMessage(data[pos:end], single, index))
        pos = end
    if pos != len(data):
        raise CorruptPayload(f"{len(data) - pos} bytes left after {count} batched messages")
    return out


_NativeWalk: TypeAlias = Callable[[bytes | memoryview, int, int, int], tuple[int, int]]
_native_walk: _NativeWalk | None
try:  # the compiled walk (setup.py builds it where a C compiler is at hand; ADR 0032)
    from braid.protocol._batch_walk import walk as _native_walk
except ImportError:  # pragma: no cover - an install without it walks in pure Python
    _native_walk = None

#: Whether :func:`check_batch` runs the compiled walk (for logs, tests and benchmarks).
NATIVE_BATCH_WALK = _native_walk is not None

#: One-byte tags of the ``SingleMessageMetadata`` fields clients write, by wire type. The
#: broker's batch walk reads these itself; any other byte sends the message to protobuf.
_PAYLOAD_SIZE_TAG = 0x18  # field 3, varint
_VARINT_TAGS = frozenset({0x20, 0x28, 0x30, 0x40, 0x48, 0x50})  # fields 4, 5, 6, 8, 9, 10
_BYTES_TAGS = frozenset({0x12, 0x3A})  # partition_key (2), ordering_key (7)
_SINGLE_FROM_STRING = pb.SingleMessageMetadata.FromString
#: A message's size prefix and the first three bytes after it.
_BARE_HEAD = struct.Struct(">IBBB")


def check_batch(data: bytes | memoryview, count: int) -> None:
    """Check that an uncompressed batch payload holds exactly ``count`` well-framed messages.

    The same rule as :func:`decode_batch` (every size inside the payload, nothing left over, at
    least one message) without building anything per message: what the broker runs on every
    batched SEND, so that a consumer trusting ``num_messages_in_batch`` - the official C++ client
    reads past its buffer when it lies - never receives a batch that does not split. Each
    message's ``payload_size`` is read by a scanner of the fields clients write
    (``partition_key``, ``payload_size``, ``sequence_id``, ``event_time``, ...) with protobuf's
    own semantics (the last occurrence wins, an ``int32`` keeps the low 32 bits of its varint);
    any other shape (properties, which must parse as messages too; unknown fields; anything odd)
    is parsed by protobuf itself.

    The scanner runs compiled (``_batch_walk.c``, ~5 ns per message) where the package was built
    with it, stepping over every message it reads cleanly and handing each other one to the
    pure-Python walk (~0.2-0.5 µs per message), which decides it and raises; without the compiled
    module the pure-Python walk does it all, with the same result (ADR 0032).

    Raises:
        CorruptPayload: the batch does not split into ``count`` messages.
    """
    _check_batch(data, count, _native_walk)


def check_batch_python(data: bytes | memoryview, count: int) -> None:
    """:func:`check_batch` in pure Python whether or not the compiled walk is installed.

    For the tests that hold the two walks together, and for benchmarks.
    """
    _check_batch(data, count, None)


def _check_batch(data: bytes | memoryview, count: int, native: _NativeWalk | None) -> None:
    if count < 1:
        raise CorruptPayload(f"a batch must hold at least one message, says {count}")
    if native is None:
        pos = _walk(data, count, 0, 0, count)
    else:
        index = pos = 0
        while True:
            index, pos = native(data, count, index, pos)
            if index == count:
                break
            # A message the compiled walk leaves to Python: decided (or refused) here, then the
            # compiled walk resumes after it.
            pos = _walk(data, count, index, pos, index + 1)
            index += 1
    if pos != len(data):
        raise CorruptPayload(f"{len(data) - pos} bytes left after {count} batched messages")


def _walk(data: bytes | memoryview, count: int, start: int, pos: int, stop: int) -> int:
    """Step over messages ``start..stop-1`` of a ``count``-message batch payload from byte
    ``pos`` (the start of message ``start``); where they end.

    Raises:
        CorruptPayload: a message does not fit or has no valid ``payload_size``.
    """
    end = len(data)
    unpack = _U32.unpack_from
    head = _BARE_HEAD.unpack_from
    varint_tags = _VARINT_TAGS
    bytes_tags = _BYTES_TAGS
    for index in range(start, stop):
        if end - pos >= 7:
            # The commonest message of all - metadata that is payload_size alone, in one or two
            # bytes (a batching client's message without key or properties) - in one unpack.
            meta_size, tag, first, second = head(data, pos)
            if tag == _PAYLOAD_SIZE_TAG:
                if meta_size == 2 and first < 0x80:
                    pos += 6 + first
                    if pos > end:
                        raise CorruptPayload(f"payload of message {index} overruns the batch")
                    continue
                if meta_size == 3 and first >= 0x80 and second < 0x80:
                    pos += 7 + ((first & 0x7F) | (second << 7))
                    if pos > end:
                        raise CorruptPayload(f"payload of message {index} overruns the batch")
                    continue
                if second == 0x40 and first < 0x80 and 4 <= meta_size <= 12:
                    # payload_size, then sequence_id as the last field (the official client's).
                    meta_end = pos + 4 + meta_size
                    if meta_end <= end:
                        q = pos + 7
                        while q < meta_end - 1 and data[q] >= 0x80:
                            q += 1
                        if q == meta_end - 1 and data[q] < 0x80:
                            pos = meta_end + first
                            if pos > end:
                                raise CorruptPayload(
                                    f"payload of message {index} overruns the batch"
                                )
                            continue
        if end - pos < 4:
            raise CorruptPayload(f"batch ends before message {index} of {count}")
        p = pos + 4
        meta_end = p + unpack(data, pos)[0]
        if meta_end > end:
            raise CorruptPayload(f"metadata of message {index} overruns the batch")
        size: int | None = -1
        try:
            while p < meta_end:
                tag = data[p]
                p += 1
                if tag == _PAYLOAD_SIZE_TAG:
                    value = data[p]
                    p += 1
                    if value >= 0x80:
                        value &= 0x7F
                        shift = 7
                        while shift < 63:  # up to 9 bytes here; longer ones go to protobuf
                            byte = data[p]
                            p += 1
                            value |= (byte & 0x7F) << shift
                            if byte < 0x80:
                                break
                            shift += 7
                        else:
                            size = None
                            break
                        value &= 0xFFFFFFFF
                    size = value if value < 0x80000000 else -1
                elif tag == 0x40 or tag in varint_tags:  # sequence_id first: every client
                    last = p + 8
                    while data[p] >= 0x80:
                        if p >= last:
                            raise IndexError  # a varint of 10 bytes: protobuf's call
                        p += 1
                    p += 1
                elif (tag == 0x12 or tag in bytes_tags) and data[p] < 0x80:
                    p += 1 + data[p]
                else:
                    size = None
                    break
        except IndexError:  # a field runs past the payload (or is odd): protobuf decides
            size = None
        if size is None or p != meta_end:
            size = _payload_size_of(data[pos + 4 : meta_end], index)
        if size < 0:
            raise CorruptPayload(f"message {index} has no valid payload_size")
        pos = meta_end + size
        if pos > end:
            raise CorruptPayload(f"payload of message {index} overruns the batch")
    return pos


def _payload_size_of(metadata: bytes | memoryview, index: int) -> int:
    """``payload_size`` of one ``SingleMessageMetadata`` parsed by protobuf (-1 when absent)."""
    try:
        single = _SINGLE_FROM_STRING(bytes(metadata))
    except DecodeError as exc:
        raise CorruptPayload(f"metadata of message {index} does not parse: {exc}") from exc
    return single.payload_size if single.HasField("payload_size") else -1


def _snappy() -> Any:
    """The first installed Snappy binding, or raise UnsupportedCompression."""
    for name in ("snappy", "cramjam"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise UnsupportedCompression("SNAPPY needs python-snappy or cramjam, neither is installed")


def compress(codec: _Codec, data: bytes) -> bytes:
    """Compress a whole payload the way Pulsar's clients do for ``codec``.

    Raises:
        UnsupportedCompression: unknown codec, or SNAPPY without a Snappy library.
    """
    if codec == pb.NONE:
        return data
    if codec == pb.LZ4:
        result: bytes = lz4.block.compress(data, store_size=False)
        return result
    if codec == pb.ZLIB:
        return zlib.compress(data)
    if codec == pb.ZSTD:
        return zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(data)
    if codec == pb.SNAPPY:
        lib = _snappy()
        if lib.__name__ == "cramjam":
            return bytes(lib.snappy.compress_raw(data))
        return bytes(lib.compress(data))
    raise UnsupportedCompression(f"unknown compression type {codec}")


def decompress(
    codec: _Codec,
    data: bytes,
    uncompressed_size: int,
    *,
    max_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE,
) -> bytes:
    """Inflate a payload to exactly ``uncompressed_size`` bytes.

    Raises:
        UnsupportedCompression: unknown codec, or SNAPPY without a Snappy library.
        CorruptPayload: the data does not inflate, inflates to another size, or claims more than
            ``max_size``.
    """
    if codec == pb.NONE:
        return data
    if not 0 <= uncompressed_size <= max_size:
        raise CorruptPayload(f"uncompressed size {uncompressed_size} outside 0..{max_size}")
    try:
        if codec == pb.LZ4:
            out: bytes = lz4.block.decompress(data, uncompressed_size=uncompressed_size)
        elif codec == pb.ZLIB:
            inflater = zlib.decompressobj()
            out = inflater.decompress(data, uncompressed_size + 1)
        elif codec == pb.ZSTD:
            out = zstandard.ZstdDecompressor().decompress(
                data, max_output_size=uncompressed_size + 1
            )
        elif codec == pb.SNAPPY:
            lib = _snappy()
            if lib.__name__ == "cramjam":
                out = bytes(lib.snappy.decompress_raw(data))
            else:
                out = bytes(lib.uncompress(data))
        else:
            raise UnsupportedCompression(f"unknown compression type {codec}")
    except UnsupportedCompression:
        raise
    except Exception as exc:  # each library raises its own error type; translate them all once
        name = pb.CompressionType.Name(codec)
        raise CorruptPayload(f"{name} payload does not decompress: {exc}") from exc
    if len(out) != uncompressed_size:
        raise CorruptPayload(
            f"payload decompressed to {len(out)} bytes, metadata says {uncompressed_size}"
        )
    return out


def build_entry(
    metadata: pb.MessageMetadata,
    messages: Sequence[tuple[pb.SingleMessageMetadata, bytes]],
    *,
    compression: _Codec = pb.NONE,
) -> bytes:
    """Build the stored body of a batch entry, compressing its payload as a whole.

    ``metadata`` supplies producer name, sequence id (the first message's) and publish time; a
    copy gets ``num_messages_in_batch``, ``compression`` and ``uncompressed_size``.
    """
    payload = encode_batch(messages)
    meta = pb.MessageMetadata()
    meta.CopyFrom(metadata)
    meta.num_messages_in_batch = len(messages)
    return _with_compression(meta, payload, compression)


def build_single_entry(
    metadata: pb.MessageMetadata, payload: bytes, *, compression: _Codec = pb.NONE
) -> bytes:
    """Build the stored body of a non-batched entry (``num_messages_in_batch`` stays absent)."""
    meta = pb.MessageMetadata()
    meta.CopyFrom(metadata)
    meta.ClearField("num_messages_in_batch")
    return _with_compression(meta, payload, compression)


def _with_compression(meta: pb.MessageMetadata, payload: bytes, compression: _Codec) -> bytes:
    if compression != pb.NONE:
        meta.compression = compression
        meta.uncompressed_size = len(payload)
        payload = compress(compression, payload)
    else:
        meta.ClearField("compression")
        meta.ClearField("uncompressed_size")
    return encode_message_body(meta, payload)


def read_entry(
    body: bytes, *, max_uncompressed_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE
) -> tuple[pb.MessageMetadata, list[EntryMessage]]:
    """Read a stored body back into its metadata and messages (decompressing, splitting batches).

    Raises:
        MalformedFrame: the body's sizes or metadata are invalid.
        CorruptPayload: the payload does not decompress or the batch does not split.
        UnsupportedCompression: the codec is not available.
    """
    metadata, payload = decode_message_body(body)
    if metadata.compression != pb.NONE:
        payload = decompress(
            metadata.compression,
            payload,
            metadata.uncompressed_size,
            max_size=max_uncompressed_size,
        )
    if not metadata.HasField("num_messages_in_batch"):
        return metadata, [EntryMessage(payload)]
    return metadata, decode_batch(payload, metadata.num_messages_in_batch)


__all__ = [
    "DEFAULT_MAX_UNCOMPRESSED_SIZE",
    "NATIVE_BATCH_WALK",
    "EntryMessage",
    "build_entry",
    "build_single_entry",
    "check_batch",
    "check_batch_python",
    "compress",
    "decode_batch",
    "decompress",
    "encode_batch",
    "messages_in_entry",
    "read_entry",
]
