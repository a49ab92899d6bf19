"""Property tests of drain gating and round-robin assignment over random segment DAGs."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.assignment import (
    assign_round_robin,
    changed_consumers,
    compute_assignment,
    deal_sticky,
)
from braid.core.drain import DrainFrontier, next_segments, readable_segments
from braid.core.layout import SegmentLayout


@st.composite
def layouts(draw: st.DrawFn) -> SegmentLayout:
    """A layout reached from ``initial(1..4)`` by up to 12 random splits and merges."""
    layout = SegmentLayout.initial(draw(st.integers(1, 4)))
    for step in range(draw(st.integers(0, 12))):
        active = layout.active_segments
        if len(active) >= 2 and draw(st.booleans()):
            width = draw(st.integers(2, min(3, len(active))))
            first = draw(st.integers(0, len(active) - width))
            ids = [s.segment_id for s in active[first : first + width]]
            layout = layout.merge_segments(ids, step)
        else:
            layout = layout.split_segment(draw(st.sampled_from(active)).segment_id, step)
    return layout


@st.composite
def layouts_with_drained(draw: st.DrawFn) -> tuple[SegmentLayout, frozenset[int]]:
    """A layout and an arbitrary set of drained sealed segments.

    Arbitrary, not only ancestor-closed: after a seek, or with empty intermediate segments,
    any sealed segment may be drained while an ancestor is not.
    """
    layout = draw(layouts())
    sealed = sorted(s.segment_id for s in layout.sealed_segments)
    drained = draw(st.sets(st.sampled_from(sealed))) if sealed else set()
    return layout, frozenset(drained)


@settings(max_examples=200, deadline=None)
@given(case=layouts_with_drained())
def test_no_segment_is_readable_while_any_ancestor_holds_data(
    case: tuple[SegmentLayout, frozenset[int]],
) -> None:
    layout, drained = case
    ready = readable_segments(layout, drained)
    for segment in ready:
        assert segment.segment_id not in drained
        undrained_ancestors = layout.ancestors(segment.segment_id) - drained
        assert not undrained_ancestors, (segment.segment_id, undrained_ancestors)
    # And nothing that qualifies is left out.
    expected = {
        sid for sid in layout.segments if sid not in drained and layout.ancestors(sid) <= drained
    }
    assert {s.segment_id for s in ready} == expected


@settings(max_examples=200, deadline=None)
@given(case=layouts_with_drained())
def test_readable_segments_never_overlap_and_are_sorted(
    case: tuple[SegmentLayout, frozenset[int]],
) -> None:
    layout, drained = case
    ready = readable_segments(layout, drained)
    assert ready == sorted(ready, key=lambda s: (s.hash_range.start, s.segment_id))
    for first, second in itertools.pairwise(ready):
        assert first.hash_range.end < second.hash_range.start


@settings(max_examples=200, deadline=None)
@given(layout=layouts())
def test_draining_ancestors_in_order_reaches_exactly_the_active_segments(
    layout: SegmentLayout,
) -> None:
    # Drain whatever is readable and sealed, round after round, as a caught-up reader would.
    drained: set[int] = set()
    while True:
        ready = readable_segments(layout, drained)
        sealed_ready = {s.segment_id for s in ready if not s.is_active}
        if not sealed_ready:
            break
        drained |= sealed_ready
    assert ready == layout.active_segments
    assert drained == {s.segment_id for s in layout.sealed_segments}


@settings(max_examples=200, deadline=None)
@given(
    case=layouts_with_drained(),
    consumers=st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f"]), max_size=6),
    data=st.data(),
)
def test_round_robin_covers_each_readable_segment_once_and_balances_within_one(
    case: tuple[SegmentLayout, frozenset[int]], consumers: list[str], data: st.DataObject
) -> None:
    layout, drained = case
    ready = readable_segments(layout, drained)
    dealt = assign_round_robin(ready, consumers)
    if not consumers:
        assert dealt == {}
        return
    assert sorted(dealt) == sorted(set(consumers))
    every = [sid for ids in dealt.values() for sid in ids]
    assert sorted(every) == sorted(s.segment_id for s in ready)
    sizes = [len(ids) for ids in dealt.values()]
    assert max(sizes) - min(sizes) <= 1
    # Deterministic whatever the order segments and consumers come in.
    shuffled_segments = data.draw(st.permutations(ready))
    shuffled_consumers = data.draw(st.permutations(consumers))
    assert assign_round_robin(shuffled_segments, shuffled_consumers) == dealt
    assignment = compute_assignment(layout, shuffled_consumers, drained)
    assert assignment.as_dict() == dealt
    assert assignment.layout_epoch == layout.epoch
    assert changed_consumers(assignment, assignment) == ()


@st.composite
def walks(draw: st.DrawFn) -> tuple[SegmentLayout, frozenset[int], frozenset[int], list[str]]:
    """A layout, a drained set, a larger drained set one walk step later (some readable sealed
    segments drained), and the consumers."""
    layout, drained = draw(layouts_with_drained())
    ready_sealed = sorted(
        s.segment_id for s in readable_segments(layout, drained) if not s.is_active
    )
    more = draw(st.sets(st.sampled_from(ready_sealed))) if ready_sealed else set()
    consumers = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4))
    return layout, drained, drained | frozenset(more), consumers


@settings(max_examples=200, deadline=None)
@given(case=walks(), data=st.data())
def test_a_sticky_deal_covers_each_segment_once_keeps_what_it_can_and_balances_within_one(
    case: tuple[SegmentLayout, frozenset[int], frozenset[int], list[str]], data: st.DataObject
) -> None:
    layout, drained, later, consumers = case
    before = compute_assignment(layout, consumers, drained).as_dict()
    ready = readable_segments(layout, later)
    # Segments opened ahead (any of them, by any consumer) only steer where new ones go.
    ahead = {
        name: tuple(data.draw(st.sets(st.sampled_from([s.segment_id for s in ready]))))
        for name in consumers
        if ready and data.draw(st.booleans())
    }
    dealt = deal_sticky(ready, consumers, before, ahead)
    assert sorted(dealt) == sorted(set(consumers))
    every = [sid for ids in dealt.values() for sid in ids]
    assert sorted(every) == sorted(s.segment_id for s in ready)
    sizes = [len(ids) for ids in dealt.values()]
    assert max(sizes) - min(sizes) <= 1
    # A deal of the same segments from its own result moves nothing.
    assert deal_sticky(ready, consumers, dealt) == dealt
    # Segments still readable stay with their consumer unless the counts had to be evened.
    moved = sum(
        1 for name, ids in before.items() for sid in ids if sid in every and sid not in dealt[name]
    )
    kept_sizes = [len([sid for sid in ids if sid in every]) for ids in before.values()]
    assert moved <= max(0, max(kept_sizes) - min(kept_sizes) - 1) * len(kept_sizes)
    assignment = compute_assignment(layout, consumers, later, before, ahead=ahead)
    assert assignment.as_dict() == dealt


def test_a_split_child_goes_to_the_consumer_that_drained_its_parent() -> None:
    layout = SegmentLayout.initial(2).split_segment(1)  # 1 sealed -> 2, 3; 0 still active
    before = {"a": (0,), "b": (1,)}  # "b" just drained 1
    dealt = deal_sticky(readable_segments(layout, {1}), ["a", "b"], before)
    # 0 stays with "a"; both children of 1 go to "b" (counts 1 and 2: within one).
    assert dealt == {"a": (0,), "b": (2, 3)}
    # Round-robin would have moved 0's neighbour and split the children.
    assert assign_round_robin(readable_segments(layout, {1}), ["a", "b"]) == {
        "a": (0, 3),
        "b": (2,),
    }


@settings(max_examples=200, deadline=None)
@given(case=layouts_with_drained())
def test_the_next_segments_become_readable_exactly_when_the_segments_listed_drain(
    case: tuple[SegmentLayout, frozenset[int]],
) -> None:
    layout, drained = case
    ready = {s.segment_id for s in readable_segments(layout, drained)}
    waiting = next_segments(layout, drained)
    for sid, parents in waiting.items():
        assert sid not in ready and sid not in drained
        assert parents and set(parents) <= ready
        assert all(not layout.segments[p].is_active for p in parents)
        # Draining the listed parents (sealed, readable) makes it readable; draining all but
        # one of them does not.
        after = {s.segment_id for s in readable_segments(layout, drained | set(parents))}
        assert sid in after
        for missing in parents:
            partial = drained | (set(parents) - {missing})
            assert sid not in {s.segment_id for s in readable_segments(layout, partial)}


@settings(max_examples=300, deadline=None)
@given(case=layouts_with_drained())
def test_the_next_segments_are_those_whose_undrained_ancestors_are_all_readable(
    case: tuple[SegmentLayout, frozenset[int]],
) -> None:
    """An independent definition: a segment is one step away when every ancestor still holding
    data is readable now - however many drained (empty) segments lie between."""
    layout, drained = case
    ready = {s.segment_id for s in readable_segments(layout, drained)}
    expected = {}
    for sid in layout.segments:
        waits_for = layout.ancestors(sid) - drained
        if sid not in drained and sid not in ready and waits_for and waits_for <= ready:
            expected[sid] = tuple(sorted(waits_for))
    assert next_segments(layout, drained) == expected
    assert DrainFrontier(layout, drained).next_segments() == expected


def test_a_segment_below_empty_drained_ones_is_next_to_the_readable_segment_above_them() -> None:
    """A sparse DAG: 1 holds data, its children 3 and 4 are empty (drained), and 5 merges them:
    5 waits only for 1, so the consumer reading 1 may open 5 ahead."""
    layout = SegmentLayout.initial(1).split_segment(0, 1).split_segment(1, 2)
    layout = layout.merge_segments([3, 4], 3)
    drained = frozenset({0, 3, 4})
    assert {s.segment_id for s in readable_segments(layout, drained)} == {1, 2}
    assert next_segments(layout, drained) == {5: (1,)}
    assert DrainFrontier(layout, drained).next_segments() == {5: (1,)}


@settings(max_examples=300, deadline=None)
@given(case=layouts_with_drained(), data=st.data())
def test_the_incremental_frontier_equals_the_one_pass_definition_after_every_drain(
    case: tuple[SegmentLayout, frozenset[int]], data: st.DataObject
) -> None:
    layout, drained = case
    if layout.sealed_segments and data.draw(st.booleans()):
        # A pruned ancestor counts as drained: the frontier must ignore ids gone from the layout.
        oldest = min(layout.sealed_segments, key=lambda s: s.segment_id)
        if not oldest.parent_ids:
            layout = layout.prune_segment(oldest.segment_id)
            drained = drained - {oldest.segment_id}
    frontier = DrainFrontier(layout, drained)
    sealed = [s.segment_id for s in layout.sealed_segments]
    order = data.draw(st.permutations(sealed)) if sealed else []
    done = set(drained)
    for sid in [-1, *order]:
        if sid >= 0:
            frontier.drain([sid, sid])  # a repeated id is harmless
            done.add(sid)
        assert frontier.readable == readable_segments(layout, done)
        assert frontier.next_segments() == next_segments(layout, done)
        assert frontier.drained == frozenset(done)
