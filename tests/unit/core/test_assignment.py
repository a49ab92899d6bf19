"""Round-robin assignment and drain gating of ordered subscriptions (SubscriptionCoordinator)."""

from __future__ import annotations

import pytest

from braid.core.assignment import (
    ConsumerAssignment,
    SubscriptionAssignment,
    assign_round_robin,
    changed_consumers,
    compute_assignment,
)
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout

NOTHING_DRAINED: frozenset[int] = frozenset()


# --------------------------------------------------------------------------- round robin


def test_one_consumer_gets_all_four_segments() -> None:
    layout = SegmentLayout.initial(4)
    assignment = compute_assignment(layout, ["c1"], NOTHING_DRAINED)
    assert assignment.as_dict() == {"c1": (0, 1, 2, 3)}
    assert assignment.layout_epoch == 0


def test_two_consumers_get_two_segments_each() -> None:
    assignment = compute_assignment(SegmentLayout.initial(4), ["c2", "c1"], NOTHING_DRAINED)
    assert assignment.as_dict() == {"c1": (0, 2), "c2": (1, 3)}


def test_three_consumers_get_disjoint_sets_totalling_four() -> None:
    assignment = compute_assignment(SegmentLayout.initial(4), ["a", "b", "c"], NOTHING_DRAINED)
    dealt = [set(entry.segment_ids) for entry in assignment.consumers]
    assert sorted(len(s) for s in dealt) == [1, 1, 2]
    assert set().union(*dealt) == {0, 1, 2, 3}
    assert sum(len(s) for s in dealt) == 4


def test_removing_a_consumer_rebalances_its_segments() -> None:
    layout = SegmentLayout.initial(4)
    before = compute_assignment(layout, ["a", "b", "c"], NOTHING_DRAINED)
    after = compute_assignment(layout, ["a", "c"], NOTHING_DRAINED)
    assert after.as_dict() == {"a": (0, 2), "c": (1, 3)}
    assert "b" not in after.consumer_names
    assert before.as_dict() == {"a": (0, 3), "b": (1,), "c": (2,)}
    assert changed_consumers(before, after) == ("a", "c")


def test_layout_change_gives_a_new_assignment_at_the_new_epoch() -> None:
    layout = SegmentLayout.initial(2)
    before = compute_assignment(layout, ["a", "b"], NOTHING_DRAINED)
    split = layout.split_segment(0, 5)  # 0 sealed into 2 and 3
    # Segment 0 still holds undrained data: it stays assigned, its children wait.
    waiting = compute_assignment(split, ["a", "b"], NOTHING_DRAINED)
    assert waiting.layout_epoch == 1
    assert waiting.as_dict() == before.as_dict() == {"a": (0,), "b": (1,)}
    assert changed_consumers(before, waiting) == ()
    drained = compute_assignment(split, ["a", "b"], {0})
    assert drained.as_dict() == {"a": (2, 1), "b": (3,)}
    assert changed_consumers(waiting, drained) == ("a", "b")


def test_assignment_is_deterministic_whatever_the_input_order() -> None:
    layout = SegmentLayout.initial(3).split_segment(1)
    segments = list(layout.active_segments)
    expected = assign_round_robin(segments, ["x", "y"])
    assert assign_round_robin(list(reversed(segments)), ["y", "x", "y"]) == expected
    assert assign_round_robin(segments, iter({"y", "x"})) == expected
    assert compute_assignment(layout, ["y", "x"], NOTHING_DRAINED) == compute_assignment(
        layout, ["x", "y"], NOTHING_DRAINED
    )


def test_segments_are_dealt_by_range_start_not_by_id() -> None:
    layout = SegmentLayout.initial(2).split_segment(0)  # active by start: 2, 3, 1
    assert assign_round_robin(layout.active_segments, ["a", "b", "c"]) == {
        "a": (2,),
        "b": (3,),
        "c": (1,),
    }


def test_assignment_is_empty_after_all_consumers_leave() -> None:
    layout = SegmentLayout.initial(4)
    assert compute_assignment(layout, [], NOTHING_DRAINED).as_dict() == {}
    assert assign_round_robin(layout.active_segments, []) == {}


def test_more_consumers_than_segments_leaves_some_idle_but_listed() -> None:
    assignment = compute_assignment(SegmentLayout.initial(2), ["a", "b", "c"], NOTHING_DRAINED)
    assert assignment.as_dict() == {"a": (0,), "b": (1,), "c": ()}
    assert assignment.segments_of("c") == ()
    assert assignment.segments_of("nobody") == ()


def test_bad_round_robin_input_is_rejected() -> None:
    segments = SegmentLayout.initial(2).active_segments
    with pytest.raises(InvalidInputError, match="listed twice"):
        assign_round_robin([*segments, segments[0]], ["a"])
    with pytest.raises(InvalidInputError, match="strings"):
        assign_round_robin(segments, ["a", 7])  # type: ignore[list-item]


# --------------------------------------------------------------------------- changes to push


def test_only_consumers_whose_segments_changed_are_pushed() -> None:
    layout = SegmentLayout.initial(4)
    before = compute_assignment(layout, ["a", "b"], NOTHING_DRAINED)
    after = compute_assignment(layout, ["a", "b", "c"], NOTHING_DRAINED)
    # a: (0, 2) -> (0, 3); b: (1, 3) -> (1,); c is new.
    assert changed_consumers(before, after) == ("a", "b", "c")
    assert changed_consumers(after, after) == ()
    assert changed_consumers(None, after) == ("a", "b", "c")
    assert changed_consumers(before.as_dict(), before) == ()


def test_an_epoch_change_alone_is_not_a_change_to_push() -> None:
    same = (ConsumerAssignment("a", (0, 1)),)
    assert changed_consumers(SubscriptionAssignment(3, same), SubscriptionAssignment(4, same)) == ()


# --------------------------------------------------------------------------- drain-gated assignment


def test_sealed_segment_with_data_is_assigned_alongside_unrelated_active_ones() -> None:
    layout = SegmentLayout.initial(2).split_segment(1)  # 1 sealed -> 2, 3; 0 still active
    assignment = compute_assignment(layout, ["a", "b"], NOTHING_DRAINED)
    assert assignment.as_dict() == {"a": (0,), "b": (1,)}
