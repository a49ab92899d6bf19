"""Checkpoint: versioned bytes; where each segment restarts across splits and merges (C9, C10)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core.checkpoint import (
    ALREADY_DRAINED,
    AT_LATEST,
    BEGINNING,
    DRAINED,
    LATEST_CURSOR,
    Checkpoint,
    SegmentCursor,
    StartKind,
    checkpoint_cursors,
    checkpoint_of,
    plan_restore,
    start_for,
)
from braid.core.layout import SegmentLayout
from braid.core.varint import CorruptEncoding

LONG = st.integers(0, 2**63 - 1)
cursors = st.one_of(
    st.just(DRAINED),
    st.just(LATEST_CURSOR),
    st.builds(SegmentCursor.after, LONG, LONG, st.integers(-1, 2**31 - 1)),
)


GOLDEN = [
    (Checkpoint.earliest(), "0101"),
    (Checkpoint.latest(), "0102"),
    (checkpoint_of(0, {}), "01000000"),
    (
        checkpoint_of(3, {0: DRAINED, 2: SegmentCursor.after(9, 4), 3: LATEST_CURSOR}),
        "0100" + "03" + "03" + "0001" + "0200090400" + "0302",
    ),
]


@pytest.mark.parametrize(("cp", "hex_bytes"), GOLDEN)
def test_golden_encoding(cp: Checkpoint, hex_bytes: str) -> None:
    assert cp.to_bytes().hex() == hex_bytes
    assert Checkpoint.from_bytes(bytes.fromhex(hex_bytes)) == cp


@given(LONG, st.dictionaries(LONG, cursors, max_size=8))
def test_round_trip(epoch: int, entries: dict[int, SegmentCursor]) -> None:
    cp = checkpoint_of(epoch, entries)
    back = Checkpoint.from_bytes(cp.to_bytes())
    assert back == cp
    assert checkpoint_cursors(back) == entries
    assert pickle.loads(pickle.dumps(cp)) == cp


@given(st.binary(max_size=60))
def test_decoding_arbitrary_bytes_yields_a_checkpoint_or_a_typed_error(data: bytes) -> None:
    try:
        cp = Checkpoint.from_bytes(data)
    except CorruptEncoding:
        return
    assert cp.to_bytes() == data


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "01",
        "0201",
        "0103",
        "010000",
        "01000001",
        "0100000100",
        "0100000200010001",
        "010000010003",
    ],
)
def test_corrupt_bytes_are_refused(bad: str) -> None:
    with pytest.raises(CorruptEncoding):
        Checkpoint.from_bytes(bytes.fromhex(bad))


def test_checkpoints_are_opaque() -> None:
    with pytest.raises(TypeError):
        Checkpoint()
    assert checkpoint_cursors(Checkpoint.latest()) is None


def test_cursor_reads_only_later_messages() -> None:
    cursor = SegmentCursor.after(5, 10, 2)
    assert not cursor.is_after(5, 10, 2)
    assert not cursor.is_after(5, 9, 7)
    assert cursor.is_after(5, 10, 3)
    assert cursor.is_after(6, 0, -1)
    assert not DRAINED.is_after(9, 9, 9)


def test_restore_after_two_later_splits_reads_new_children_from_their_start() -> None:
    at_capture = SegmentLayout.initial(2)
    cp = checkpoint_of(
        at_capture.epoch, {0: SegmentCursor.after(3, 7), 1: SegmentCursor.after(4, 1, 5)}
    )
    later = at_capture.split_segment(0).split_segment(1)  # 0 -> 2, 3 ; 1 -> 4, 5
    plan = plan_restore(cp, later)
    assert plan[0].kind is StartKind.AFTER and plan[0].cursor == SegmentCursor.after(3, 7)
    assert plan[1].kind is StartKind.AFTER
    assert {plan[s] for s in (2, 3, 4, 5)} == {BEGINNING}


def test_sentinels_plan_beginning_or_latest() -> None:
    layout = SegmentLayout.initial(1).split_segment(0)
    assert plan_restore(Checkpoint.earliest(), layout) == {0: BEGINNING, 1: BEGINNING, 2: BEGINNING}
    assert plan_restore(Checkpoint.latest(), layout) == {
        0: ALREADY_DRAINED,
        1: AT_LATEST,
        2: AT_LATEST,
    }
    drained = checkpoint_of(1, {0: DRAINED, 1: LATEST_CURSOR})
    assert start_for(drained, layout, 0) is ALREADY_DRAINED
    assert start_for(drained, layout, 1) is AT_LATEST
    assert start_for(drained, layout, 2) is BEGINNING
