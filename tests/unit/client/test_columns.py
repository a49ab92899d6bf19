"""The columnar decode (``braid.client.columns``) gives, row for row, what the message-at-a-time
path (``braid.client.message.decode_entry``) gives on the same entries: batched and unbatched,
with and without keys, properties, event times and own sequence ids, every codec, compacted-out
messages, repeated metadata (the decoder's memo) and corrupt input.

The packed form (``braid.client.packed_columns``: Arrow-layout buffers, built by the compiled
``_entry_columns.pack`` and by the pure-Python packer) is held to the same reference on every
entry here: its buffers are read back with ``struct``/``array`` (no Arrow) and compared row for
row with ``decode_entry``'s messages, with the compiled packer and without it.

The entries are built by ``braid.protocol.batch`` (the reference encoder, from ``pb`` objects)
and by the producer's hand-written encoder (``braid.client.batch_encoder``), so the decoder is
held against two encoders, not against itself.
"""

from __future__ import annotations

import importlib.util
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.client import columns as columns_module
from braid.client import packed_columns
from braid.client.batch_encoder import entry_metadata, producer_name_field, single_message_header
from braid.client.columns import EMPTY_PROPERTIES, EntryColumnDecoder, MessageColumns
from braid.client.message import Message, decode_entry, position_of
from braid.client.packed_columns import PackedColumns, decode_packed
from braid.core.errors import BraidError
from braid.protocol import batch, pb
from braid.protocol.frames import decode_message_body, encode_message_body

TOPIC = "topic://public/default/columns"
SEGMENT = 7
LEDGER, ENTRY = 12, 34
HAVE_SNAPPY = any(importlib.util.find_spec(m) for m in ("snappy", "cramjam"))
CODECS = [pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD] + ([pb.SNAPPY] if HAVE_SNAPPY else [])


def rows_of_messages(messages: list[Message]) -> list[tuple[Any, ...]]:
    return [
        (
            m.message_id,
            m.key,
            m.value,
            m.publish_time,
            m.event_time,
            m.properties,
            m.producer_name,
            m.sequence_id,
        )
        for m in messages
    ]


def rows_of_columns(cols: MessageColumns) -> list[tuple[Any, ...]]:
    return [
        (
            cols.message_id(i),
            cols.keys[i],
            cols.values[i],
            cols.publish_times[i],
            cols.event_times[i],
            dict(cols.properties[i]),
            cols.producer_names[i],
            cols.sequence_ids[i],
        )
        for i in range(len(cols))
    ]


def _strings(data: bytes, offsets: bytes, valid: bytes | None, start: int, stop: int) -> list[Any]:
    ends = array("i", offsets)
    return [
        data[ends[i] : ends[i + 1]] if valid is None or valid[i >> 3] >> (i & 7) & 1 else None
        for i in range(start, stop)
    ]


def signed(value: int | None) -> int | None:
    """A uint64 as the int64 a packed column holds (two's complement, wrapping past 2**64)."""
    if value is None:
        return None
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def rows_of_packed(cols: PackedColumns) -> list[tuple[Any, ...]]:
    """The rows of packed columns, read back from the buffers without Arrow."""
    rows: list[tuple[Any, ...]] = []
    for e, start, stop in cols:
        values = _strings(e.values, e.value_offsets, None, start, stop)
        keys = _strings(e.keys, e.key_offsets, e.key_validity if e.key_nulls else None, start, stop)
        times = array("q", e.event_times)
        seqs = array("q", e.sequence_ids)
        indexes = array("i", e.batch_indexes)
        ids = _strings(e.message_ids, e.message_id_offsets, None, start, stop)
        valid = e.event_time_validity
        for r, i in enumerate(range(start, stop)):
            rows.append(
                (
                    ids[r],
                    (e.ledger_id, e.entry_id, indexes[i], e.batch_size),
                    None if keys[r] is None else keys[r].decode(),
                    values[r],
                    e.publish_time,
                    times[i] if valid[i >> 3] >> (i & 7) & 1 else None,
                    {} if e.properties is None else dict(e.properties[i]),
                    e.producer_name,
                    seqs[i],
                )
            )
    return rows


def packed_both_ways(body: bytes) -> list[list[tuple[Any, ...]]]:
    """``body`` packed by the compiled packer (when built) and by the pure-Python one."""
    out = []
    native = packed_columns._native_pack
    for pack in ([native] if native is not None else []) + [None]:
        packed_columns._native_pack = pack
        try:
            cols, count = decode_packed(EntryColumnDecoder(TOPIC, SEGMENT), body, LEDGER, ENTRY)
        finally:
            packed_columns._native_pack = native
        out.append([*rows_of_packed(cols), ("dispatched", count)])
    return out


def by_messages(body: bytes) -> tuple[list[Message], int]:
    """``body`` decoded by the message path (the reference the columns are held to)."""
    return decode_entry(
        body,
        topic=TOPIC,
        segment_id=SEGMENT,
        ledger_id=LEDGER,
        entry_id=ENTRY,
        redelivery=0,
        owner=None,
    )


def both(body: bytes, decoder: EntryColumnDecoder | None = None) -> None:
    """Decode ``body`` both ways and compare every row and the dispatched count."""
    messages, dispatched = by_messages(body)
    decoder = decoder or EntryColumnDecoder(TOPIC, SEGMENT)
    cols, count = decoder.decode(body, LEDGER, ENTRY)
    assert count == dispatched
    assert rows_of_columns(cols) == rows_of_messages(messages)
    assert {len(getattr(cols, name)) for name in MessageColumns.COLUMNS} == {len(messages)}
    expected_packed: list[tuple[Any, ...]] = [
        (
            m.message_id.to_bytes(),
            position_of(m),
            m.key,
            m.value,
            m.publish_time,
            signed(m.event_time),
            dict(m.properties),
        )
        for m in messages
    ]
    expected_packed = [
        (*row, m.producer_name, signed(m.sequence_id))
        for row, m in zip(expected_packed, messages, strict=True)
    ]
    expected_packed.append(("dispatched", dispatched))
    for i, message in enumerate(messages):
        _ledger, _entry, index, size = position_of(message)
        assert cols.position(i) == (LEDGER, ENTRY, index)
        assert cols.batch_sizes[i] == size
    for packed in packed_both_ways(body):
        assert packed == expected_packed


OUTER = pb.MessageMetadata(producer_name="prod-1", sequence_id=100, publish_time=1_700_000_000_123)

text = st.text(max_size=8)
single_meta = st.builds(
    lambda key, props, event_time, seq: pb.SingleMessageMetadata(
        **({"partition_key": key} if key is not None else {}),
        properties=[pb.KeyValue(key=k, value=v) for k, v in props.items()],
        **({"event_time": event_time} if event_time is not None else {}),
        **({"sequence_id": seq} if seq is not None else {}),
    ),
    st.one_of(st.none(), text),
    st.dictionaries(text, text, max_size=2),
    st.one_of(st.none(), st.integers(0, 2**63 - 1)),
    st.one_of(st.none(), st.integers(0, 2**63 - 1)),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(single_meta, st.binary(max_size=20)), min_size=1, max_size=12),
    st.sampled_from(CODECS),
)
def test_a_batch_decodes_to_the_same_rows_as_messages(
    messages: list[tuple[pb.SingleMessageMetadata, bytes]], codec: int
) -> None:
    both(batch.build_entry(OUTER, messages, compression=codec))  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(st.none(), text),
    st.dictionaries(text, text, max_size=2),
    st.one_of(st.none(), st.integers(1, 2**63 - 1)),
    st.binary(max_size=50),
    st.sampled_from(CODECS),
)
def test_an_unbatched_entry_decodes_to_the_same_row(
    key: str | None, props: dict[str, str], event_time: int | None, value: bytes, codec: int
) -> None:
    meta = pb.MessageMetadata()
    meta.CopyFrom(OUTER)
    if key is not None:
        meta.partition_key = key
    for k, v in props.items():
        meta.properties.add(key=k, value=v)
    if event_time is not None:
        meta.event_time = event_time
    both(batch.build_single_entry(meta, value, compression=codec))  # type: ignore[arg-type]


def producer_entry(rows: list[dict[str, Any]], codec: int = pb.NONE) -> bytes:
    """An entry exactly as the Braid producer writes it (hand-encoded metadata)."""
    payload = b"".join(
        single_message_header(
            len(r["value"]), r.get("seq"), r.get("key"), r.get("props"), r.get("event_time")
        )
        + r["value"]
        for r in rows
    )
    size = len(payload)
    if codec != pb.NONE:
        payload = batch.compress(codec, payload)  # type: ignore[arg-type]
    meta = entry_metadata(
        producer_name_field("braid-producer"),
        55,
        1_700_000_000_999,
        num_messages=len(rows),
        compression=codec,
        uncompressed_size=size,
    )
    return meta + payload  # a stored body is [u32 metadataSize][MessageMetadata][payload]


@pytest.mark.parametrize("codec", CODECS)
def test_a_producer_written_batch_with_repeated_keys_matches(codec: int) -> None:
    rows = [{"value": b"v%d" % i, "key": f"key-{i % 3}"} for i in range(50)]
    rows[7]["props"] = {"a": "1", "b": "2"}
    rows[8]["event_time"] = 1_699_999_999_000
    rows[9]["seq"] = 9_000
    rows[10]["key"] = None
    decoder = EntryColumnDecoder(TOPIC, SEGMENT)
    body = producer_entry(rows, codec)
    both(body, decoder)
    both(body, decoder)  # the second time every metadata is a memo hit


def test_compacted_out_messages_are_skipped_but_counted() -> None:
    body = batch.build_entry(
        OUTER,
        [
            (pb.SingleMessageMetadata(partition_key="a"), b"kept-0"),
            (pb.SingleMessageMetadata(partition_key="b", compacted_out=True), b"gone"),
            (pb.SingleMessageMetadata(partition_key="c"), b"kept-2"),
        ],
    )
    both(body)
    cols, count = EntryColumnDecoder(TOPIC, SEGMENT).decode(body, LEDGER, ENTRY)
    assert (count, cols.values, cols.batch_indexes) == (3, [b"kept-0", b"kept-2"], [0, 2])


def test_rows_without_properties_share_one_read_only_empty_mapping() -> None:
    body = producer_entry([{"value": b"x"}, {"value": b"y", "props": {"k": "v"}}])
    cols, _ = EntryColumnDecoder(TOPIC, SEGMENT).decode(body, LEDGER, ENTRY)
    assert cols.properties[0] is EMPTY_PROPERTIES
    assert dict(cols.properties[1]) == {"k": "v"}
    with pytest.raises(TypeError):
        cols.properties[1]["k"] = "changed"  # type: ignore[index]


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns_module, "MEMO_SIZE", 4)
    decoder = EntryColumnDecoder(TOPIC, SEGMENT)
    body = producer_entry([{"value": b"x", "key": f"k{i}"} for i in range(20)])
    both(body, decoder)
    assert len(decoder._memo) <= 4


def test_unique_trailing_sequence_ids_and_event_times_share_one_memo_entry_per_key() -> None:
    # Keys routed to several segments leave each entry's sequence ids non-contiguous, so the
    # producer writes one per message: the memo is keyed by the metadata without it.
    rows = [{"value": b"v", "key": f"key-{i % 4}", "seq": 1_000 + 2 * i} for i in range(200)]
    rows += [
        {"value": b"w", "key": "key-0", "seq": 2**40 + i, "event_time": 1_700_000_000_000 + i}
        for i in range(50)
    ]
    decoder = EntryColumnDecoder(TOPIC, SEGMENT)
    both(producer_entry(rows), decoder)
    assert len(decoder._memo) <= 5


@pytest.mark.parametrize(
    "single",
    [
        # what looks like a trailing sequence_id / event_time is the end of a bytes field
        pb.SingleMessageMetadata(payload_size=1, ordering_key=b"\x40\x05"),
        pb.SingleMessageMetadata(payload_size=1, ordering_key=b"\x28\x85\x01\x40\x05"),
        pb.SingleMessageMetadata(payload_size=1, partition_key="k", ordering_key=b"@\x00"),
        # a sequence id or event time too long to split off (10-byte varints)
        pb.SingleMessageMetadata(payload_size=1, sequence_id=2**64 - 1),
        pb.SingleMessageMetadata(payload_size=1, event_time=2**63, sequence_id=3),
        # zero event time reads as unset, the same whether split off or parsed
        pb.SingleMessageMetadata(payload_size=1, event_time=0, sequence_id=3),
    ],
)
def test_trailing_bytes_that_only_look_like_fields_decode_as_protobuf_does(
    single: pb.SingleMessageMetadata,
) -> None:
    decoder = EntryColumnDecoder(TOPIC, SEGMENT)
    body = batch.build_entry(OUTER, [(single, b"x"), (single, b"y")])
    both(body, decoder)
    both(body, decoder)


def corrupt_bodies() -> list[bytes]:
    good = batch.build_entry(
        OUTER, [(pb.SingleMessageMetadata(partition_key="a"), b"0123456789")] * 3
    )
    meta, payload = decode_message_body(good)
    out = [encode_message_body(meta, payload[:-3]), encode_message_body(meta, payload + b"!")]
    out.append(encode_message_body(meta, b"\x00\x00\x00\xff" + payload[4:]))
    out.append(encode_message_body(meta, b"\x00\x00\x00\x02\xff\xff" + payload[6:]))
    negative = pb.MessageMetadata()
    negative.CopyFrom(meta)
    negative.num_messages_in_batch = -1
    out.append(encode_message_body(negative, payload))
    more = pb.MessageMetadata()
    more.CopyFrom(meta)
    more.num_messages_in_batch = 4
    out.append(encode_message_body(more, payload))
    return out


@pytest.mark.parametrize("body", corrupt_bodies(), ids=lambda b: f"{len(b)}B")
def test_a_damaged_entry_fails_or_decodes_as_the_message_path_does(body: bytes) -> None:
    try:
        EntryColumnDecoder(TOPIC, SEGMENT).decode(body, LEDGER, ENTRY)
    except BraidError as by_columns:
        with pytest.raises(type(by_columns)):
            by_messages(body)
        with pytest.raises(type(by_columns)):
            packed_both_ways(body)
        return
    both(body)  # not damaged enough to fail (e.g. trailing bytes): the same rows either way


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_a_braid_error(data: bytes) -> None:
    try:
        EntryColumnDecoder(TOPIC, SEGMENT).decode(data, LEDGER, ENTRY)
    except BraidError:
        pass
    try:
        packed_both_ways(data)
    except BraidError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=6), max_size=4), st.binary(max_size=8))
def test_keys_pack_exactly_when_they_are_utf8(raw_keys: list[bytes], value: bytes) -> None:
    # The compiled packer validates UTF-8 itself: bytes Python's strict decoder refuses
    # (overlong forms, surrogates, past U+10FFFF, cut sequences) must go to the Python path.
    singles = []
    for raw in raw_keys:
        single = pb.SingleMessageMetadata(payload_size=len(value))
        single.ordering_key = raw  # bytes field: becomes the partition_key below
        singles.append(single.SerializeToString().replace(b"\x3a", b"\x12", 1))
    payload = b"".join(len(m).to_bytes(4, "big") + m + value for m in singles)
    if not singles:
        return
    native = packed_columns._native_pack
    if native is None:
        pytest.skip("the compiled _entry_columns module is not built")
    packed = native(payload, len(singles), 0, b"prefix")
    all_utf8 = True
    for raw in raw_keys:
        try:
            raw.decode()
        except UnicodeDecodeError:
            all_utf8 = False
    assert (packed is not None) == all_utf8
    if packed is not None:
        assert _strings(packed[3], packed[4], None, 0, len(raw_keys)) == raw_keys


def test_take_front_slice_and_concat_keep_rows_in_order() -> None:
    body = producer_entry([{"value": b"%d" % i, "key": f"k{i}"} for i in range(10)])
    cols, _ = EntryColumnDecoder(TOPIC, SEGMENT).decode(body, LEDGER, ENTRY)
    whole = rows_of_columns(cols)
    first = cols.take_front(3)
    rest = cols.take_front(100)
    assert len(cols) == 0
    assert rows_of_columns(first) + rows_of_columns(rest) == whole
    joined = MessageColumns.concat(TOPIC, SEGMENT, [first, rest])
    assert rows_of_columns(joined) == whole
    assert rows_of_columns(joined.slice(4, 6)) == whole[4:6]
