"""Edges of the deduplication state carried across splits and merges that the property tests do
not pin: sequence id 0, keys no floor covers, parents listed in any order, the exact refusals,
and the storage round trips of an empty floor."""

from __future__ import annotations

import pytest

from braid.core.errors import InvalidInputError
from braid.core.inherited_sequence_ids import (
    InheritedSequenceIds,
    SegmentSequenceIds,
    SequenceFloor,
    by_base_name,
)
from braid.core.ranges import HashRange

LOW, HIGH, ALL = HashRange(0, 49), HashRange(50, 99), HashRange(0, 99)


def test_the_highest_of_a_producers_per_segment_names_wins_whatever_their_order() -> None:
    assert by_base_name({"p-seg-1": 5, "p-seg-2": 3, "q": 0}) == {"p": 5, "q": 0}
    assert by_base_name({"p-seg-2": 3, "p-seg-1": 5}) == {"p": 5}


def test_nothing_inherited_means_no_sequence_id_is_known_stored() -> None:
    empty = InheritedSequenceIds()
    assert empty.highest("p") == -1
    assert empty.floor("p", 7) == -1 and empty.floor("p", None) == -1
    state = InheritedSequenceIds(ALL, (SequenceFloor(LOW, {"p": 4}),))
    assert state.highest("other") == -1
    assert state.floor("other", 10) == -1
    assert state.floor("p", 60) == -1  # no floor covers that key


def test_a_keyless_resend_is_judged_against_the_lowest_floor_over_the_span() -> None:
    # Only the low half inherited p's 5: the high half knows nothing of p.
    half = InheritedSequenceIds(ALL, (SequenceFloor(LOW, {"p": 5}),))
    assert half.floor("p", None) == -1
    both = InheritedSequenceIds(ALL, (SequenceFloor(LOW, {"p": 5}), SequenceFloor(HIGH, {"p": 3})))
    assert both.floor("p", None) == 3
    # A floor ending just before the span's end: the cut after it is looked at too.
    inner = InheritedSequenceIds(
        ALL, (SequenceFloor(HashRange(0, 97), {"p": 8}), SequenceFloor(HashRange(99, 99), {"p": 8}))
    )
    assert inner.floor("p", None) == -1  # position 98 is covered by no floor
    starts_late = InheritedSequenceIds(ALL, (SequenceFloor(HashRange(1, 99), {"p": 8}),))
    assert starts_late.floor("p", None) == -1  # position 0 is covered by no floor


def test_sequence_id_zero_is_inherited_like_any_other() -> None:
    child = InheritedSequenceIds.for_child(
        ALL,
        [
            (LOW, SegmentSequenceIds({"p-seg-1": 0})),
            (HIGH, SegmentSequenceIds({"p-seg-2": 0})),
        ],
    )
    assert child.floor("p", 10) == 0 and child.floor("p", 60) == 0
    assert child.highest("p") == 0
    merged = child.merged(InheritedSequenceIds(ALL, (SequenceFloor(LOW, {"q": 0}),)))
    assert merged.floor("q", 10) == 0


def test_a_child_inherits_from_every_overlapping_parent_in_any_order() -> None:
    parents = [
        (HashRange(200, 299), SegmentSequenceIds({"p-seg-9": 99})),  # not the child's range
        (LOW, SegmentSequenceIds({"p-seg-1": 5})),
        (HIGH, SegmentSequenceIds({"p-seg-2": 7})),
    ]
    child = InheritedSequenceIds.for_child(ALL, parents)
    assert (child.floor("p", 10), child.floor("p", 60)) == (5, 7)


def test_a_parents_inherited_floor_adds_only_what_it_did_not_store_itself() -> None:
    grand = InheritedSequenceIds(
        ALL,
        (
            SequenceFloor(HashRange(90, 99), {"p": 1}),  # outside the child: skipped
            SequenceFloor(LOW, {"p": 5, "q": 2}),
        ),
    )
    parent = SegmentSequenceIds({"p-seg-3": 5}, grand)
    child = InheritedSequenceIds.for_child(HashRange(0, 59), [(ALL, parent)])
    # p's inherited 5 equals the parent's own 5: no second floor for it; q's 2 is kept.
    assert [(f.hash_range, dict(f.sequence_ids)) for f in child.floors] == [
        (HashRange(0, 49), {"q": 2}),
        (HashRange(0, 59), {"p": 5}),
    ]


def test_refusals_name_what_is_wrong() -> None:
    with pytest.raises(InvalidInputError) as span:
        InheritedSequenceIds(None, (SequenceFloor(LOW, {"p": 1}),))
    assert str(span.value) == "inherited sequence ids need the segment's hash range"
    with pytest.raises(InvalidInputError) as outside:
        InheritedSequenceIds(LOW, (SequenceFloor(ALL, {"p": 1}),))
    assert str(outside.value) == f"an inherited floor over {ALL} lies outside {LOW}"
    for bad in ({"p": True}, {"p": "3"}, {3: 1}):
        with pytest.raises(InvalidInputError) as floor:
            SequenceFloor(LOW, bad)  # type: ignore[arg-type]
        (name, seq) = next(iter(bad.items()))
        assert str(floor.value) == f"a sequence floor maps names to ints: {name!r}={seq!r}"
    with pytest.raises(InvalidInputError) as malformed:
        InheritedSequenceIds.from_json({"span": [0, 9]})
    assert str(malformed.value) == "malformed inherited sequence ids: 'floors'"


def test_a_floors_ids_are_a_private_copy() -> None:
    ids = {"p": 1}
    floor = SequenceFloor(LOW, ids)
    ids["p"] = 9
    assert floor.sequence_ids == {"p": 1}
    with pytest.raises(TypeError):
        floor.sequence_ids["p"] = 2  # type: ignore[index]


def test_storage_round_trips_keep_an_empty_floor_and_skip_an_empty_state() -> None:
    assert InheritedSequenceIds(ALL).to_properties() == {}
    state = InheritedSequenceIds(ALL, (SequenceFloor(LOW, {}), SequenceFloor(HIGH, {"p": 2})))
    back = InheritedSequenceIds.from_properties({**state.to_properties(), "unrelated": 5})
    assert back == state
    assert InheritedSequenceIds.from_json(state.to_json()) == state
