"""Batch-index pending acks' bookkeeping (ADR 0071): conflicts are per index, the mask leaves out
exactly what transactions hold, and the PIP-54 conversions round-trip - checked against a plain
set-of-indexes model with hypothesis."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from braid.broker.transactions.batch_holds import (
    BatchIndexHolds,
    acked_indexes,
    remaining_words,
)
from braid.broker.transactions.ids import TxnId
from braid.core import ack_set
from braid.ledger.api import Position

P = Position(3, 7)
T1, T2 = TxnId(0, 1), TxnId(0, 2)


@given(st.integers(1, 200), st.data())
def test_remaining_words_and_acked_indexes_round_trip(count: int, data: st.DataObject) -> None:
    acked = frozenset(data.draw(st.sets(st.integers(0, count - 1))))
    words = remaining_words(acked, count)
    assert acked_indexes(words, count) == acked
    assert set(ack_set.indexes(words)) == set(range(count)) - acked


def test_another_transaction_conflicts_on_a_shared_index_only() -> None:
    holds = BatchIndexHolds()
    holds.add(T1, P, 4, frozenset({1}))
    assert holds.conflict(T2, P, frozenset({2, 3}), None) is None
    refused = holds.conflict(T2, P, frozenset({1, 2}), None)
    assert refused is not None and "[1]" in refused and str(T1) in refused
    assert holds.conflict(T1, P, frozenset({1}), None) is None  # its own hold again


def test_an_index_the_cursor_acknowledged_is_a_conflict() -> None:
    holds = BatchIndexHolds()
    cursor_remaining = remaining_words({0}, 4)  # message 0 acknowledged outside transactions
    refused = holds.conflict(T1, P, frozenset({0, 2}), cursor_remaining)
    assert refused is not None and "acknowledged already" in refused
    assert holds.conflict(T1, P, frozenset({2}), cursor_remaining) is None


@given(
    st.integers(1, 130),
    st.data(),
)
def test_mask_and_covers_match_a_set_model(count: int, data: st.DataObject) -> None:
    indexes = st.sets(st.integers(0, count - 1))
    first, second = data.draw(indexes), data.draw(indexes)
    cursor_acked = data.draw(indexes)
    holds = BatchIndexHolds()
    if first:
        holds.add(T1, P, count, frozenset(first))
    if second:
        holds.add(T2, P, count, frozenset(second))
    held = first | second
    mask = holds.mask(P, count)
    if not held:
        assert mask is None and not holds.covers(P, None)
        return
    assert mask is not None and set(ack_set.indexes(mask)) == set(range(count)) - held
    cursor = remaining_words(cursor_acked, count) if cursor_acked else None
    assert holds.covers(P, cursor) == (held | cursor_acked >= set(range(count)))
    released = holds.release(T1)
    assert released == ({P: (count, frozenset(first))} if first else {})
    assert holds.of(T2) == ({P: (count, frozenset(second))} if second else {})
    holds.release(T2)
    assert P not in holds and holds.mask(P, count) is None
