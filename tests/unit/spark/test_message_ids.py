"""The per-entry message id encoder gives exactly ``MessageId.to_bytes()``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.message_id import MessagePosition, message_id_at, message_position
from braid.spark.message_ids import MessageIdBytes

positions = st.tuples(
    st.integers(0, 2**40),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**31 - 1),
    st.integers(0, 2**31 - 1),
)


@given(st.lists(positions, min_size=1, max_size=20))
def test_bytes_match_the_core_encoding(items: list[tuple[int, int, int, int, int]]) -> None:
    encoder = MessageIdBytes()
    for segment, ledger, entry, index, size in items + items:
        mid = message_id_at(MessagePosition(segment, ledger, entry, index, size))
        position = message_position(mid)
        assert position is not None
        assert encoder.encode(position) == mid.to_bytes()


def test_golden_bytes_of_a_batched_message() -> None:
    mid = message_id_at(MessagePosition(3, 300, 5, 2, 10))
    position = message_position(mid)
    assert position is not None
    assert MessageIdBytes().encode(position) == bytes.fromhex("010003ac0205030a")


@settings(deadline=None)  # the first rows of a batch size build its cached suffixes
@given(st.lists(positions, min_size=1, max_size=20))
def test_column_bytes_match_the_core_encoding(items: list[tuple[int, int, int, int, int]]) -> None:
    encoder = MessageIdBytes()
    for segment in sorted({item[0] for item in items}) * 2:
        rows = [item[1:] for item in items] * 2
        ledgers, entries, indexes, sizes = (list(col) for col in zip(*rows, strict=True))
        expected = [message_id_at(MessagePosition(segment, *row)).to_bytes() for row in rows]
        assert encoder.encode_columns(segment, ledgers, entries, indexes, sizes) == expected
