"""The transaction buffer snapshot's model (ADR 0071): its JSON round-trips any content, a node
that does not decode is refused with a typed error, and pruning keeps exactly the aborted
transactions whose marker lies in a retained ledger."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.broker.transactions.buffer_snapshot import BufferSnapshot, CorruptSnapshot
from braid.broker.transactions.ids import TxnId
from braid.ledger.api import Position

_U64 = st.integers(0, 2**64 - 1)
_POSITIONS = st.builds(Position, st.integers(0, 2**40), st.integers(-1, 2**30))
_ABORTED = st.dictionaries(st.builds(TxnId, _U64, _U64), _POSITIONS, max_size=30)


@given(_ABORTED, _POSITIONS, st.integers(0, 2**40), st.integers(0, 2**50))
def test_a_snapshot_round_trips_through_its_json(
    aborted: dict[TxnId, Position], limit: Position, ahead: int, timestamp: int
) -> None:
    position = Position(limit.ledger_id + ahead, limit.entry_id)
    snapshot = BufferSnapshot(aborted, limit, position, timestamp)
    decoded = BufferSnapshot.decode(snapshot.encode(), 7)
    assert decoded == snapshot and decoded.version == 7


@pytest.mark.parametrize(
    "data",
    [b"", b"{}", b"not json", b'{"aborted": [[1]], "maxReadPosition": [1, 2], "position": [1, 2]'],
)
def test_a_node_that_does_not_decode_is_a_corrupt_snapshot(data: bytes) -> None:
    with pytest.raises(CorruptSnapshot):
        BufferSnapshot.decode(data, 0)


def test_a_max_read_position_past_the_snapshot_position_is_refused() -> None:
    with pytest.raises(ValueError, match="past its position"):
        BufferSnapshot({}, Position(5, 1), Position(4, 9), 0)


@given(_ABORTED, st.sets(st.integers(0, 2**40), max_size=5))
def test_pruning_keeps_markers_from_the_first_retained_ledger_on(
    aborted: dict[TxnId, Position], retained: set[int]
) -> None:
    snapshot = BufferSnapshot(aborted, Position(0, -1), Position(0, -1), 0)
    kept = snapshot.pruned(retained)
    if not retained:
        assert kept == aborted
    else:
        assert kept == {t: p for t, p in aborted.items() if p.ledger_id >= min(retained)}
