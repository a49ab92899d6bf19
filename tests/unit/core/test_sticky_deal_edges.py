"""Sticky deals at their edges: a consumer new to the subscription, segments whose ring order
differs from their ids, and a segment listed twice."""

from __future__ import annotations

import pytest

from braid.core.assignment import deal_sticky
from braid.core.drain import readable_segments
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout


def test_a_consumer_that_had_nothing_before_joins_the_deal() -> None:
    layout = SegmentLayout.initial(4)
    dealt = deal_sticky(layout.active_segments, ["a", "b"], {"a": (0, 1, 2, 3)})
    assert dealt == {"a": (0, 1), "b": (2, 3)}  # evened out: counts within one
    assert deal_sticky(layout.active_segments, ["a", "b"], {}) == {"a": (0, 2), "b": (1, 3)}


def test_each_consumers_segments_come_in_ring_order_not_id_order() -> None:
    # Splitting segment 0 of two gives children 2 (lower quarter) and 3 (second quarter):
    # around the ring they come before segment 1 (the upper half) although their ids are larger.
    layout = SegmentLayout.initial(2).split_segment(0)
    ready = readable_segments(layout, {0})
    assert deal_sticky(ready, ["a"], {"a": (1,)}) == {"a": (2, 3, 1)}


def test_a_segment_listed_twice_is_refused_with_the_ids() -> None:
    layout = SegmentLayout.initial(2)
    twice = [layout.segments[1], layout.segments[0], layout.segments[1]]
    with pytest.raises(InvalidInputError, match=r"listed twice for assignment: \[0, 1, 1\]"):
        deal_sticky(twice, ["a"], {})


def test_a_segment_below_empty_ones_goes_to_the_consumer_that_opened_it_ahead() -> None:
    # 0 split into 3 and 4, merged again into 5; 3 and 4 stayed empty (drained), so 5 waited only
    # for 0, which b read - and b opened 5 ahead. By parents alone (3, 4: nobody's) the tie of
    # counts would go to a, and b's open segment would be wasted.
    layout = SegmentLayout.initial(3).split_segment(0, 1).merge_segments([3, 4], 2)
    ready = readable_segments(layout, {0, 3, 4})
    assert [s.segment_id for s in ready] == [5, 1, 2]
    before = {"a": (1,), "b": (0, 2)}
    assert deal_sticky(ready, ["a", "b"], before) == {"a": (5, 1), "b": (2,)}
    assert deal_sticky(ready, ["a", "b"], before, {"b": (5,)}) == {"a": (1,), "b": (5, 2)}
