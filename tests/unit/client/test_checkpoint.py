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
    CursorKind,
    SegmentCursor,
    StartKind,
    checkpoint_cursors,
    checkpoint_of,
    plan_restore,
    start_for,
)
from braid.core.errors import InvalidInputError
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


_MAX = "0..9223372036854775807"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("01", "a serialized Checkpoint has at least 2 bytes, got 1"),
        ("0201", "unknown Checkpoint format version 2 (this client reads 1)"),
        ("0103", "unknown checkpoint kind 3"),
        ("0100000200010001", "checkpoint segments are not in ascending order"),
        ("0100000100", "checkpoint truncated before a cursor tag"),
        ("010000010003", "unknown checkpoint cursor tag 3"),
        ("0100010000ff", "2 unexpected bytes after a checkpoint"),
        (
            "010000010000ffffffffffffffffff010000",
            f"checkpoint cursor out of range: checkpoint ledger id must be an integer in {_MAX}: "
            "18446744073709551615",
        ),
        (
            "0100ffffffffffffffffff0100",
            f"checkpoint out of range: checkpoint layout epoch must be an integer in {_MAX}: "
            "18446744073709551615",
        ),
    ],
)
def test_a_refused_encoding_says_what_is_wrong(bad: str, reason: str) -> None:
    with pytest.raises(CorruptEncoding) as caught:
        Checkpoint.from_bytes(bytes.fromhex(bad))
    assert str(caught.value) == reason


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("after",), "cursor kind must be a CursorKind, got 'after'"),
        ((CursorKind.AFTER, -1), f"checkpoint ledger id must be an integer in {_MAX}: -1"),
        ((CursorKind.AFTER, True), f"checkpoint ledger id must be an integer in {_MAX}: True"),
        ((CursorKind.AFTER, 0, -1), f"checkpoint entry id must be an integer in {_MAX}: -1"),
        ((CursorKind.AFTER, 0, 0.0), f"checkpoint entry id must be an integer in {_MAX}: 0.0"),
        (
            (CursorKind.AFTER, 0, 0, -2),
            "checkpoint batch index must be an integer in -1..2147483647: -2",
        ),
        (
            (CursorKind.AFTER, 0, 0, 2**31),
            "checkpoint batch index must be an integer in -1..2147483647: 2147483648",
        ),
        ((CursorKind.DRAINED, 1, 0), "a drained cursor carries no position"),
        ((CursorKind.LATEST, 0, 1), "a latest cursor carries no position"),
    ],
)
def test_a_malformed_cursor_is_refused_naming_the_field(
    args: tuple[object, ...], reason: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        SegmentCursor(*args)  # type: ignore[arg-type]
    assert str(caught.value) == reason


def test_the_edges_of_each_field_are_accepted() -> None:
    top = 2**63 - 1
    assert SegmentCursor.after(top, top, 2**31 - 1).batch_index == 2**31 - 1
    assert SegmentCursor.after(0, 0, -1).entry_id == 0
    assert checkpoint_of(top, {top: DRAINED}) == checkpoint_of(top, {top: DRAINED})


@pytest.mark.parametrize(
    ("epoch", "cursors", "reason"),
    [
        (-1, {}, f"checkpoint layout epoch must be an integer in {_MAX}: -1"),
        (1.0, {}, f"checkpoint layout epoch must be an integer in {_MAX}: 1.0"),
        (0, {-1: DRAINED}, f"checkpoint segment id must be an integer in {_MAX}: -1"),
        (0, {1: "x"}, "segment 1: 'x' is not a SegmentCursor"),
    ],
)
def test_a_checkpoint_of_bad_parts_is_refused_naming_the_part(
    epoch: object, cursors: dict[object, object], reason: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        checkpoint_of(epoch, cursors)  # type: ignore[arg-type]
    assert str(caught.value) == reason
