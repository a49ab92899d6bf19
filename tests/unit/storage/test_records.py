"""Journal record and index slot encoding: round trips, and torn or corrupt tails are detected."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from braid.storage.bookie.records import (
    HEADER_SIZE,
    SLOT_SIZE,
    IndexSlot,
    JournalRecord,
    RecordKind,
    decode_records,
    decode_slot,
    encode_record,
    encode_slot,
)

records = st.builds(
    JournalRecord,
    kind=st.sampled_from(list(RecordKind)),
    ledger_id=st.integers(0, 2**63 - 1),
    entry_id=st.integers(-1, 2**62),
    last_add_confirmed=st.integers(-1, 2**62),
    length=st.integers(0, 2**63),
    data=st.binary(max_size=300),
)


@given(st.lists(records, max_size=20))
def test_records_round_trip_in_order(recs: list[JournalRecord]) -> None:
    buf = b"".join(encode_record(r) for r in recs)
    decoded = list(decode_records(buf))
    assert [r for r, _ in decoded] == recs
    assert (decoded[-1][1] if decoded else 0) == len(buf)


@given(st.lists(records, min_size=1, max_size=8), st.data())
def test_torn_tail_yields_only_the_complete_prefix(
    recs: list[JournalRecord], data: st.DataObject
) -> None:
    encoded = [encode_record(r) for r in recs]
    buf = b"".join(encoded)
    cut = data.draw(st.integers(0, len(buf) - 1))
    decoded = [r for r, _ in decode_records(buf[:cut])]
    boundaries = [sum(len(e) for e in encoded[: i + 1]) for i in range(len(encoded))]
    complete = sum(1 for b in boundaries if b <= cut)
    assert decoded == recs[:complete]


@given(st.lists(records, min_size=1, max_size=5), st.data())
def test_a_flipped_byte_stops_decoding_at_that_record(
    recs: list[JournalRecord], data: st.DataObject
) -> None:
    encoded = [encode_record(r) for r in recs]
    victim = data.draw(st.integers(0, len(recs) - 1))
    start = sum(len(e) for e in encoded[:victim])
    pos = data.draw(st.integers(start, start + len(encoded[victim]) - 1))
    buf = bytearray(b"".join(encoded))
    buf[pos] ^= 0xFF
    decoded = [r for r, _ in decode_records(bytes(buf))]
    assert decoded == recs[:victim]


def test_zero_filled_tail_is_not_a_record() -> None:
    rec = JournalRecord(RecordKind.ADD, 1, 0, -1, 3, b"abc")
    buf = encode_record(rec) + bytes(HEADER_SIZE + 64)
    assert [r for r, _ in decode_records(buf)] == [rec]


def test_decoding_from_an_offset_skips_earlier_records() -> None:
    first = encode_record(JournalRecord(RecordKind.FENCE, 7))
    second = JournalRecord(RecordKind.DELETE, 8)
    assert [r for r, _ in decode_records(first + encode_record(second), len(first))] == [second]


@given(
    st.builds(
        IndexSlot,
        offset=st.integers(0, 2**63),
        size=st.integers(0, 2**32 - 1),
        crc=st.integers(0, 2**32 - 1),
        last_add_confirmed=st.integers(-1, 2**62),
        length=st.integers(0, 2**63),
    )
)
def test_index_slot_round_trips(slot: IndexSlot) -> None:
    raw = encode_slot(slot)
    assert len(raw) == SLOT_SIZE
    assert decode_slot(raw) == slot


def test_all_zero_or_short_slot_is_a_hole() -> None:
    assert decode_slot(bytes(SLOT_SIZE)) is None
    assert decode_slot(b"\x01" * (SLOT_SIZE - 1)) is None


@given(st.binary(max_size=2000), st.integers(0, 64))
def test_decoding_arbitrary_bytes_never_raises(raw: bytes, start: int) -> None:
    for record, end in decode_records(raw, start):
        assert start < end <= len(raw)
        assert isinstance(record.kind, RecordKind)
