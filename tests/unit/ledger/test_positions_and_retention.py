"""Pure position arithmetic over a ledger list, and the retention rule choosing what to trim."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.ledger.api import (
    EARLIEST,
    LATEST,
    LedgerInfo,
    ManagedLedgerConfig,
    Position,
    new_position,
)
from braid.ledger.positions import (
    count_after,
    first_marker,
    is_acknowledgeable,
    last_confirmed,
    next_position,
    normalize,
)
from braid.ledger.retention import select_trimmable

NOW = 1_700_000_000_000


def _ledger(ledger_id: int, entries: int, size: int = 0, ts: int = NOW) -> LedgerInfo:
    return LedgerInfo(ledger_id, entries, size or entries * 10, ts, "standalone")


VIEW = [_ledger(3, 2), _ledger(5, 0), _ledger(7, 3), _ledger(9, 0)]  # 9 is being written


def test_next_position_crosses_ledgers_and_skips_empty_ones() -> None:
    assert next_position(VIEW, 9, Position(3, 0)) == Position(3, 1)
    assert next_position(VIEW, 9, Position(3, 1)) == Position(7, 0)
    assert next_position(VIEW, 9, Position(7, 2)) == Position(9, 0)
    assert next_position(VIEW, 9, EARLIEST) == Position(3, 0)
    assert next_position(VIEW, 9, first_marker(VIEW)) == Position(3, 0)
    assert next_position(VIEW, 9, LATEST) == Position(9, 0)
    # With no open ledger, the position after the end is just past the last entry.
    assert next_position(VIEW[:3], None, Position(7, 2)) == Position(7, 3)


def test_normalize_moves_into_existing_ledgers() -> None:
    assert normalize(VIEW, 9, Position(4, 7)) == Position(7, 0)
    assert normalize(VIEW, 9, Position(9, 0)) == Position(9, 0)
    assert normalize(VIEW, 9, Position(1, 0)) == Position(3, 0)


def test_last_confirmed_and_counts() -> None:
    assert last_confirmed(VIEW) == Position(7, 2)
    assert last_confirmed([_ledger(4, 0)]) == Position(4, -1)
    assert last_confirmed([]) == EARLIEST
    assert count_after(VIEW, Position(3, -1)) == 5
    assert count_after(VIEW, Position(3, 0)) == 4
    assert count_after(VIEW, Position(7, 2)) == 0


def test_acknowledgeable_positions() -> None:
    assert is_acknowledgeable(VIEW, Position(7, 2))
    assert is_acknowledgeable(VIEW, Position(9, -1))
    assert is_acknowledgeable(VIEW, Position(1, 50))  # trimmed away: a no-op ack
    assert not is_acknowledgeable(VIEW, Position(7, 3))
    assert not is_acknowledgeable(VIEW, Position(6, 0))
    assert not is_acknowledgeable(VIEW, Position(10, -1))
    assert not is_acknowledgeable(VIEW, Position(7, -2))


@settings(deadline=None)  # a shared CI machine must not make timing flaky
@given(st.lists(st.integers(0, 4), min_size=1, max_size=6))
def test_walking_next_position_visits_every_entry_once(entries: list[int]) -> None:
    view = [_ledger(i * 2, n) for i, n in enumerate(entries)]
    expected = [Position(li.ledger_id, e) for li in view for e in range(li.entries)]
    seen: list[Position] = []
    position = first_marker(view)
    while True:
        position = next_position(view, None, position)
        if count_after(view, Position(position.ledger_id, position.entry_id - 1)) == 0:
            break
        seen.append(position)
    assert seen == expected


def _cfg(time_s: float, size: int) -> ManagedLedgerConfig:
    return ManagedLedgerConfig(retention_time_s=time_s, retention_size_bytes=size)


def test_retention_never_takes_the_last_ledger_or_unconsumed_ones() -> None:
    view = [_ledger(1, 2), _ledger(2, 2), _ledger(3, 2)]
    all_consumed = select_trimmable(view, slowest_mark_delete=None, config=_cfg(0, 0), now_ms=NOW)
    assert all_consumed == view[:2]
    partly = select_trimmable(
        view, slowest_mark_delete=Position(2, 0), config=_cfg(0, 0), now_ms=NOW
    )
    assert partly == view[:1]
    assert (
        select_trimmable(view, slowest_mark_delete=Position(1, 0), config=_cfg(0, 0), now_ms=NOW)
        == []
    )


def test_retention_time_or_size_either_releases_a_consumed_ledger() -> None:
    view = [_ledger(1, 1, 100, NOW - 60_000), _ledger(2, 1, 100, NOW - 1_000), _ledger(3, 1, 100)]
    done = Position(3, 0)
    by_time = select_trimmable(view, slowest_mark_delete=done, config=_cfg(30, -1), now_ms=NOW)
    assert by_time == view[:1]
    by_size = select_trimmable(view, slowest_mark_delete=done, config=_cfg(-1, 150), now_ms=NOW)
    assert by_size == view[:2]  # 300 -> 200 -> 100 bytes
    either = select_trimmable(view, slowest_mark_delete=done, config=_cfg(30, 250), now_ms=NOW)
    assert either == view[:1]
    forever = select_trimmable(view, slowest_mark_delete=done, config=_cfg(-1, -1), now_ms=NOW)
    assert forever == []


@settings(deadline=None)  # a shared CI machine must not make timing flaky
@given(
    st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)),
    st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)),
)
def test_positions_order_by_ledger_then_entry_between_the_sentinels(
    a: tuple[int, int], b: tuple[int, int]
) -> None:
    pa, pb = Position(*a), Position(*b)
    assert (pa < pb) == (a < b)
    assert EARLIEST < pa < LATEST
    assert str(pa) == f"{a[0]}:{a[1]}"


@settings(deadline=None)
@given(st.integers(0, 2**63 - 1), st.integers(-1, 2**62))
def test_new_position_is_the_same_position_as_the_constructor_builds(
    ledger_id: int, entry_id: int
) -> None:
    fast, built = new_position(ledger_id, entry_id), Position(ledger_id, entry_id)
    assert type(fast) is Position
    assert fast == built and hash(fast) == hash(built) and str(fast) == str(built)
    assert not fast < built and not built < fast
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.entry_id = entry_id + 1  # type: ignore[misc]
