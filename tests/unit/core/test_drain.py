"""Drain gating (``SegmentDrainChecker``): what an ordered subscription may read now."""

from __future__ import annotations

import pytest

from braid.core.assignment import changed_consumers, compute_assignment
from braid.core.drain import readable_segments
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout

NOTHING_DRAINED: frozenset[int] = frozenset()


def ids(layout: SegmentLayout, drained: frozenset[int] | set[int]) -> list[int]:
    return [segment.segment_id for segment in readable_segments(layout, drained)]


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
        readable_segments(layout, {0, 1})
