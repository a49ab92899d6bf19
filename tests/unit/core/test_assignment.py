"""Round-robin assignment and drain gating of ordered subscriptions (SubscriptionCoordinator)."""

from __future__ import annotations

import pytest

from braid.core.assignment import (
    ConsumerAssignment,
    SubscriptionAssignment,
    assign_round_robin,
    assignable_segments,
    changed_consumers,
    compute_assignment,
)
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout

NOTHING_DRAINED: frozenset[int] = frozenset()


def ids(layout: SegmentLayout, drained: frozenset[int] | set[int]) -> list[int]:
    return [segment.segment_id for segment in assignable_segments(layout, drained)]


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


# --------------------------------------------------------------------------- drain gating


def test_children_are_blocked_until_the_parent_drains_then_the_parent_retires() -> None:
    layout = SegmentLayout.initial(1).split_segment(0)  # 0 sealed -> 1, 2
    assert ids(layout, NOTHING_DRAINED) == [0]
    assert ids(layout, {0}) == [1, 2]


def test_merged_child_waits_for_every_parent_with_backlog() -> None:
    layout = SegmentLayout.initial(2).merge_segments([0, 1])  # 0, 1 sealed -> 2
    assert ids(layout, NOTHING_DRAINED) == [0, 1]
    assert ids(layout, {0}) == [1]
    assert ids(layout, {1}) == [0]
    assert ids(layout, {0, 1}) == [2]


def _deep_dag() -> SegmentLayout:
    """0,1 roots; 0 -> 2,3 (split); 3+1 -> 4 (merge); 4 -> 5,6 (split). Active: 2, 5, 6."""
    layout = SegmentLayout.initial(2).split_segment(0)
    layout = layout.merge_segments([3, 1])
    return layout.split_segment(4)


def test_deep_dag_gates_on_every_ancestor_not_only_direct_parents() -> None:
    layout = _deep_dag()
    assert [s.segment_id for s in layout.active_segments] == [2, 5, 6]
    # Upstream #26274: intermediates 3 and 4 were empty and count as drained while root 0 still
    # has backlog. A direct-parent rule would release 5 and 6 (their parent 4 is drained).
    drained = {3, 4}
    assert ids(layout, drained) == [0, 1]
    assert not {5, 6} & set(ids(layout, drained))
    # Root 0 drains: its child 2 opens, but 5/6 still wait for root 1 behind merge 4.
    assert ids(layout, {0, 3, 4}) == [2, 1]
    assert ids(layout, {0, 1, 3, 4}) == [2, 5, 6]


def test_deep_dag_with_backlog_on_every_parent_of_the_merge() -> None:
    layout = _deep_dag()
    assert ids(layout, {0}) == [2, 3, 1]  # both parents of merge 4 hold data
    assert ids(layout, {0, 3}) == [2, 1]  # 1 still holds data: 4 waits
    assert ids(layout, {0, 1}) == [2, 3]  # 3 still holds data: 4 waits
    assert ids(layout, {0, 1, 3}) == [2, 4]  # the sealed merge child itself now has its turn
    assert ids(layout, {0, 1, 3, 4}) == [2, 5, 6]


def test_a_seek_that_rewinds_re_gates_descendants() -> None:
    layout = _deep_dag()
    consumers = ["a", "b"]
    caught_up = compute_assignment(layout, consumers, {0, 1, 3, 4})
    assert sorted(caught_up.segments_of("a") + caught_up.segments_of("b")) == [2, 5, 6]
    # A seek back to the beginning: every sealed segment holds unread data again.
    rewound = compute_assignment(layout, consumers, NOTHING_DRAINED)
    assert rewound.as_dict() == {"a": (0,), "b": (1,)}
    assert changed_consumers(caught_up, rewound) == ("a", "b")
    # A partial rewind into the merge's parents only.
    partial = compute_assignment(layout, consumers, {0, 1})
    assert sorted(partial.segments_of("a") + partial.segments_of("b")) == [2, 3]


def test_pruned_ancestors_count_as_drained() -> None:
    layout = SegmentLayout.initial(1).split_segment(0).prune_segment(0)
    assert ids(layout, NOTHING_DRAINED) == [1, 2]
    # A drained id that is no longer in the layout is simply ignored.
    assert ids(layout, {0}) == [1, 2]


def test_an_active_segment_cannot_be_drained() -> None:
    layout = SegmentLayout.initial(1).split_segment(0)
    with pytest.raises(InvalidInputError, match=r"active segments \[1\]"):
        assignable_segments(layout, {0, 1})


def test_sealed_segment_with_data_is_assigned_alongside_unrelated_active_ones() -> None:
    layout = SegmentLayout.initial(2).split_segment(1)  # 1 sealed -> 2, 3; 0 still active
    assignment = compute_assignment(layout, ["a", "b"], NOTHING_DRAINED)
    assert assignment.as_dict() == {"a": (0,), "b": (1,)}
