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
from collections.abc import Iterable, Sequence
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
    "EntryMessage",
    "build_entry",
    "build_single_entry",
    "compress",
    "decode_batch",
    "decompress",
    "encode_batch",
    "messages_in_entry",
    "read_entry",
]
