"""The producer's hand-written metadata encoder equals protobuf's own serialization.

The reference is ``braid.protocol.batch`` (``build_entry`` / ``build_single_entry``), which builds
entries from ``pb`` objects; the client's fast path must produce the very same bytes.
"""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from braid.client.batch_encoder import (
    entry_metadata,
    producer_name_field,
    single_message_header,
    varint,
)
from braid.protocol import batch, pb

text = st.text(max_size=12)
props = st.dictionaries(text, text, max_size=3)
u63 = st.integers(0, 2**63 - 1)


@given(st.integers(0, 2**64 - 1))
def test_varint_matches_protobuf(value: int) -> None:
    meta = pb.SingleMessageMetadata(payload_size=0, sequence_id=value)
    assert meta.SerializeToString() == b"\x18\x00\x40" + varint(value)


@given(
    st.integers(0, 2**31 - 1),
    u63,
    st.one_of(st.none(), text),
    props,
    st.one_of(st.none(), st.integers(1, 2**63 - 1)),
)
def test_single_message_header_matches_protobuf(
    size: int, seq: int, key: str | None, properties: dict[str, str], event_time: int | None
) -> None:
    ref = pb.SingleMessageMetadata(payload_size=size, sequence_id=seq)
    for k, v in properties.items():
        ref.properties.add(key=k, value=v)
    if key is not None:
        ref.partition_key = key
    if event_time:
        ref.event_time = event_time
    data = ref.SerializeToString()
    assert single_message_header(size, seq, key, properties, event_time) == (
        struct.pack(">I", len(data)) + data
    )


@given(
    st.text(min_size=1, max_size=20),
    u63,
    u63,
    st.integers(1, 10_000),
    st.sampled_from([pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD]),
    st.one_of(st.none(), u63),
    st.one_of(st.none(), st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))),
    st.one_of(st.none(), st.binary(max_size=200)),
)
def test_batch_entry_metadata_matches_the_reference_encoder(
    name: str,
    seq: int,
    publish: int,
    count: int,
    codec: int,
    highest: int | None,
    bucket: tuple[int, int] | None,
    schema_version: bytes | None,
) -> None:
    ref = pb.MessageMetadata(producer_name=name, sequence_id=seq, publish_time=publish)
    ref.num_messages_in_batch = count
    if codec != pb.NONE:
        ref.compression = codec  # type: ignore[assignment]
        ref.uncompressed_size = 1234
    if highest is not None:
        ref.highest_sequence_id = highest
    if bucket is not None:
        ref.entry_hash_min, ref.entry_hash_max = bucket
    if schema_version is not None:
        ref.schema_version = schema_version
    data = ref.SerializeToString()
    ours = entry_metadata(
        producer_name_field(name),
        seq,
        publish,
        num_messages=count,
        compression=codec,
        uncompressed_size=1234 if codec != pb.NONE else 0,
        highest_sequence_id=highest,
        entry_hash_range=bucket,
        schema_version=schema_version,
    )
    assert ours == struct.pack(">I", len(data)) + data


@given(
    st.text(min_size=1, max_size=10),
    u63,
    st.one_of(st.none(), text),
    props,
    st.integers(0, 2**40),
    st.one_of(st.none(), st.binary(min_size=8, max_size=8)),
)
def test_unbatched_entry_matches_build_single_entry(
    name: str,
    seq: int,
    key: str | None,
    properties: dict[str, str],
    event_time: int,
    schema_version: bytes | None,
) -> None:
    ref = pb.MessageMetadata(producer_name=name, sequence_id=seq, publish_time=7)
    for k, v in properties.items():
        ref.properties.add(key=k, value=v)
    if key is not None:
        ref.partition_key = key
    if event_time:
        ref.event_time = event_time
    if schema_version is not None:
        ref.schema_version = schema_version
    body = batch.build_single_entry(ref, b"payload")
    ours = entry_metadata(
        producer_name_field(name),
        seq,
        7,
        key=key,
        properties=properties,
        event_time=event_time,
        schema_version=schema_version,
    )
    assert ours + b"payload" == body


def test_a_whole_batch_equals_build_entry() -> None:
    name_field = producer_name_field("p-1")
    values = [(b"v0", None, {}), (b"value-1", "k", {"a": "b"}), (b"", "k2", {})]
    payload = b"".join(
        single_message_header(len(v), 10 + i, k, p) + v for i, (v, k, p) in enumerate(values)
    )
    ours = entry_metadata(name_field, 10, 99, num_messages=3) + payload
    singles = []
    for i, (v, k, p) in enumerate(values):
        s = pb.SingleMessageMetadata(sequence_id=10 + i)
        for pk, pv in p.items():
            s.properties.add(key=pk, value=pv)
        if k is not None:
            s.partition_key = k
        singles.append((s, v))
    ref = batch.build_entry(
        pb.MessageMetadata(producer_name="p-1", sequence_id=10, publish_time=99), singles
    )
    assert ours == ref
    _meta, messages = batch.read_entry(ours)
    assert [m.payload for m in messages] == [b"v0", b"value-1", b""]
