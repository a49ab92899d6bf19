"""Deduplication state carried across splits and merges (ADR 0055): which resends a child
recognises as stored by an ancestor, and that the state survives its two encodings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core.errors import InvalidInputError
from braid.core.inherited_sequence_ids import (
    InheritedSequenceIds,
    SegmentSequenceIds,
    base_name,
    by_base_name,
)
from braid.core.ranges import HashRange

LOW, HIGH, FULL = HashRange(0, 0x7FFF), HashRange(0x8000, 0xFFFF), HashRange.full()


def test_the_per_segment_suffix_is_stripped_from_producer_names() -> None:
    assert base_name("orders-seg-12") == "orders"
    assert base_name("a-seg-b-seg-3") == "a-seg-b"
    assert base_name("plain") == "plain"
    assert base_name("x-seg-") == "x-seg-"
    assert by_base_name({"p-seg-1": 4, "p-seg-2": 9, "q": 1}) == {"p": 9, "q": 1}


def test_a_split_child_inherits_its_parents_last_sequence_id_per_producer() -> None:
    parent = SegmentSequenceIds({"p-seg-0": 41, "q-seg-0": 7})
    child = InheritedSequenceIds.for_child(LOW, [(FULL, parent)])
    assert child.span == LOW
    assert child.highest("p") == 41 and child.highest("q") == 7 and child.highest("r") == -1
    assert child.floor("p", 0x10) == 41
    assert child.floor("p", None) == 41  # one parent: keyless resends are judged exactly too


def test_a_merge_judges_a_keyed_resend_by_the_parent_its_key_came_from() -> None:
    # The producer stored 22 in the upper parent, while 21 (sent to the lower one just before it
    # was sealed) was refused there: the merged child must not drop the resent 21.
    lower, upper = SegmentSequenceIds({"p-seg-1": 20}), SegmentSequenceIds({"p-seg-2": 22})
    child = InheritedSequenceIds.for_child(FULL, [(LOW, lower), (HIGH, upper)])
    assert child.highest("p") == 22  # where a restarted producer continues from
    assert child.floor("p", 0x1000) == 20  # 21 with a key in the lower half: not a duplicate
    assert child.floor("p", 0x9000) == 22  # 22 with a key in the upper half: a duplicate
    assert child.floor("p", None) == 20  # keyless: never judged stored unless it is everywhere


def test_a_grandchild_keeps_the_floors_its_parent_inherited_over_its_range() -> None:
    merged = InheritedSequenceIds.for_child(
        FULL,
        [(LOW, SegmentSequenceIds({"p-seg-1": 20})), (HIGH, SegmentSequenceIds({"p-seg-2": 22}))],
    )
    # The merged segment stored nothing of p itself before it was split again.
    grandchild = InheritedSequenceIds.for_child(
        HashRange(0x4000, 0xBFFF), [(FULL, SegmentSequenceIds({}, merged))]
    )
    assert grandchild.floor("p", 0x5000) == 20
    assert grandchild.floor("p", 0xA000) == 22
    assert grandchild.floor("p", None) == 20
    # Once the merged segment stored 30 of p, that covers everything below.
    after = InheritedSequenceIds.for_child(
        HashRange(0x4000, 0xBFFF), [(FULL, SegmentSequenceIds({"p-seg-3": 30}, merged))]
    )
    assert after.floors[0].sequence_ids == {"p": 30} and len(after.floors) == 1


def test_carrying_twice_changes_nothing_and_order_does_not_matter() -> None:
    a = InheritedSequenceIds.for_child(LOW, [(FULL, SegmentSequenceIds({"p-seg-0": 5}))])
    b = InheritedSequenceIds.for_child(LOW, [(FULL, SegmentSequenceIds({"p-seg-0": 9}))])
    assert a.merged(a) == a
    assert a.merged(b) == b.merged(a)
    assert a.merged(b).highest("p") == 9


def test_a_parent_without_state_gives_nothing() -> None:
    assert not InheritedSequenceIds.for_child(LOW, [(FULL, SegmentSequenceIds())])


_ranges = st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)).map(
    lambda t: HashRange(min(t), max(t))
)


@given(
    st.lists(
        st.tuples(
            _ranges,
            st.dictionaries(st.sampled_from(["p", "q", "a.b", "x-seg-1"]), st.integers(-1, 10**12)),
        ),
        max_size=5,
    )
)
def test_the_state_reads_back_from_cursor_properties_and_json(
    floors: list[tuple[HashRange, dict[str, int]]],
) -> None:
    parents = [(r, SegmentSequenceIds(ids)) for r, ids in floors]
    state = InheritedSequenceIds.for_child(FULL, parents)
    assert InheritedSequenceIds.from_properties(state.to_properties()) == state
    assert InheritedSequenceIds.from_json(state.to_json()) == state
    for _, ids in floors:
        for name in ids:
            base = base_name(name)
            assert state.floor(base, None) <= state.highest(base)


def test_a_state_with_floors_is_true_and_one_without_is_false() -> None:
    assert InheritedSequenceIds.for_child(LOW, [(FULL, SegmentSequenceIds({"p-seg-0": 5}))])
    assert not InheritedSequenceIds()


def test_states_of_different_spans_do_not_merge_and_the_error_names_both() -> None:
    low = InheritedSequenceIds.for_child(LOW, [(FULL, SegmentSequenceIds({"p-seg-0": 5}))])
    high = InheritedSequenceIds.for_child(HIGH, [(FULL, SegmentSequenceIds({"p-seg-0": 5}))])
    with pytest.raises(InvalidInputError) as caught:
        low.merged(high)
    assert str(caught.value) == ("cannot merge inherited state of [0000, 7fff] and [8000, ffff]")


# The document a sealed segment's metadata holds (golden: the JSON keys are a stored format).
_SEGMENT_DOC = {
    "own": {"p-seg-0": 5},
    "inherited": {"span": [0, 32767], "floors": [{"range": [0, 32767], "sequenceIds": {"p": 5}}]},
}


def test_a_segments_sequence_ids_encode_to_the_stored_document_and_back() -> None:
    inherited = InheritedSequenceIds.for_child(LOW, [(FULL, SegmentSequenceIds({"p-seg-0": 5}))])
    state = SegmentSequenceIds({"p-seg-0": 5}, inherited)
    assert state.to_json() == _SEGMENT_DOC
    assert SegmentSequenceIds.from_json(_SEGMENT_DOC) == state


def test_a_document_without_keys_reads_as_no_state() -> None:
    assert SegmentSequenceIds.from_json({}) == SegmentSequenceIds()
    assert SegmentSequenceIds.from_json({"own": {}, "inherited": None}) == SegmentSequenceIds()


@pytest.mark.parametrize("own", [[1, 2], "p=5", 7])
def test_a_document_whose_own_ids_are_not_an_object_is_refused(own: object) -> None:
    with pytest.raises(InvalidInputError) as caught:
        SegmentSequenceIds.from_json({"own": own})
    assert str(caught.value) == "malformed segment sequence ids: 'own' is not an object"
