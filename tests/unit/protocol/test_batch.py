"""Batch payloads and compression codecs: round trips per codec and typed errors for bad input."""

from __future__ import annotations

import importlib.util
import struct
import zlib

import lz4.block
import pytest
import zstandard

from braid.protocol import CorruptPayload, UnsupportedCompression, batch, pb

CODECS = [pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD]
HAVE_SNAPPY = any(importlib.util.find_spec(m) for m in ("snappy", "cramjam"))


def _meta() -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="producer-a", sequence_id=100, publish_time=1234)


def _messages(n: int) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    out = []
    for i in range(n):
        single = pb.SingleMessageMetadata(partition_key=f"key-{i % 3}", sequence_id=100 + i)
        single.properties.add(key="i", value=str(i))
        out.append((single, f"message number {i} ".encode() * (i + 1)))
    return out


@pytest.mark.parametrize("codec", CODECS, ids=pb.CompressionType.Name)
def test_batch_entry_round_trips(codec: pb.CompressionType.ValueType) -> None:
    messages = _messages(10)
    body = batch.build_entry(_meta(), messages, compression=codec)
    metadata, read = batch.read_entry(body)
    assert metadata.num_messages_in_batch == 10
    assert metadata.compression == codec
    assert batch.messages_in_entry(metadata) == 10
    assert [m.payload for m in read] == [p for _, p in messages]
    assert [m.batch_index for m in read] == list(range(10))
    assert read[4].single is not None and read[4].single.partition_key == "key-1"
    assert read[4].single.payload_size == len(messages[4][1])


@pytest.mark.parametrize("codec", CODECS, ids=pb.CompressionType.Name)
def test_single_entry_round_trips(codec: pb.CompressionType.ValueType) -> None:
    payload = b"just one message " * 50
    body = batch.build_single_entry(_meta(), payload, compression=codec)
    metadata, [only] = batch.read_entry(body)
    assert not metadata.HasField("num_messages_in_batch")
    assert batch.messages_in_entry(metadata) == 1
    assert only == batch.EntryMessage(payload)


def test_a_batch_of_one_is_still_a_batch() -> None:
    body = batch.build_entry(_meta(), _messages(1))
    metadata, [only] = batch.read_entry(body)
    assert metadata.HasField("num_messages_in_batch")
    assert only.batch_index == 0


def test_lz4_is_the_raw_block_format_with_the_size_in_metadata() -> None:
    payload = b"abcabcabc" * 100
    compressed = batch.compress(pb.LZ4, payload)
    assert lz4.block.decompress(compressed, uncompressed_size=len(payload)) == payload
    # No 4-byte size prefix: a block that stored its size would not decode this way.
    assert compressed != lz4.block.compress(payload)
    body = batch.build_single_entry(_meta(), payload, compression=pb.LZ4)
    metadata, _ = batch.read_entry(body)
    assert metadata.uncompressed_size == len(payload)


def test_zlib_and_zstd_use_their_standard_formats() -> None:
    payload = b"0123456789" * 64
    assert zlib.decompress(batch.compress(pb.ZLIB, payload)) == payload
    zstd_out = batch.compress(pb.ZSTD, payload)
    assert zstandard.ZstdDecompressor().decompress(zstd_out) == payload


def test_batch_layout_is_size_prefixed_single_metadata_then_payload() -> None:
    single = pb.SingleMessageMetadata(partition_key="k")
    data = batch.encode_batch([(single, b"xyz")])
    (size,) = struct.unpack_from(">I", data)
    parsed = pb.SingleMessageMetadata.FromString(data[4 : 4 + size])
    assert parsed.payload_size == 3
    assert data[4 + size :] == b"xyz"
    assert not single.HasField("payload_size")  # the caller's object is untouched


@pytest.mark.skipif(HAVE_SNAPPY, reason="a Snappy library is installed")
def test_snappy_without_a_library_is_a_typed_unsupported_error() -> None:
    with pytest.raises(UnsupportedCompression, match="SNAPPY"):
        batch.compress(pb.SNAPPY, b"data")
    with pytest.raises(UnsupportedCompression):
        batch.decompress(pb.SNAPPY, b"data", 4)


@pytest.mark.skipif(not HAVE_SNAPPY, reason="no Snappy library installed")
def test_snappy_round_trips_when_a_library_is_installed() -> None:
    payload = b"snappy " * 40
    assert batch.decompress(pb.SNAPPY, batch.compress(pb.SNAPPY, payload), len(payload)) == payload


def test_unknown_codec_is_unsupported() -> None:
    with pytest.raises(UnsupportedCompression):
        batch.compress(99, b"x")  # type: ignore[arg-type]
    with pytest.raises(UnsupportedCompression):
        batch.decompress(99, b"x", 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", [pb.LZ4, pb.ZLIB, pb.ZSTD], ids=pb.CompressionType.Name)
def test_garbage_does_not_decompress(codec: pb.CompressionType.ValueType) -> None:
    with pytest.raises(CorruptPayload, match=r"does not decompress|decompressed to"):
        batch.decompress(codec, b"\xff\x00garbage\x01", 100)


@pytest.mark.parametrize("codec", [pb.LZ4, pb.ZLIB, pb.ZSTD], ids=pb.CompressionType.Name)
def test_wrong_uncompressed_size_is_corruption(codec: pb.CompressionType.ValueType) -> None:
    payload = b"p" * 500
    with pytest.raises(CorruptPayload):
        batch.decompress(codec, batch.compress(codec, payload), 400)


def test_uncompressed_size_above_the_cap_is_refused_before_inflating() -> None:
    with pytest.raises(CorruptPayload, match="outside"):
        batch.decompress(pb.ZLIB, batch.compress(pb.ZLIB, b"x"), 10**9)


@pytest.mark.parametrize(
    ("data", "count", "reason"),
    [
        (b"", 1, "ends before message 0"),
        (struct.pack(">I", 100), 1, "overruns"),
        (struct.pack(">I", 2) + b"\x18\x05" + b"ab", 1, "payload of message 0 overruns"),
        (struct.pack(">I", 0), 1, "payload_size"),
        (struct.pack(">I", 2) + b"\xff\xff", 1, "does not parse"),
        (batch.encode_batch([(pb.SingleMessageMetadata(), b"a")]) + b"!", 1, "left after"),
        (b"", -1, "negative"),
    ],
)
def test_corrupt_batches_raise_typed_errors(data: bytes, count: int, reason: str) -> None:
    with pytest.raises(CorruptPayload, match=reason):
        batch.decode_batch(data, count)
