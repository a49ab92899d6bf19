"""DrainFrontier.drain with ids it must skip: unknown or already drained ids are ignored and the
rest of the batch still drains; an active segment is refused by id."""

from __future__ import annotations

import pytest

from braid.core.drain import DrainFrontier, readable_segments
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout


def _ids(frontier: DrainFrontier) -> list[int]:
    return [segment.segment_id for segment in frontier.readable]


def test_unknown_and_already_drained_ids_are_skipped_and_the_rest_drains() -> None:
    # 0 and 1 split: 0 -> 2, 3 and 1 -> 4, 5; 0 already drained, 1 drains in this batch.
    layout = SegmentLayout.initial(2).split_segment(0).split_segment(1)
    frontier = DrainFrontier(layout, {0})
    assert _ids(frontier) == [2, 3, 1]
    frontier.drain([999, 0, 1])
    assert frontier.drained == {0, 1}
    assert _ids(frontier) == [2, 3, 4, 5]
    assert _ids(frontier) == [s.segment_id for s in readable_segments(layout, {0, 1})]


def test_draining_an_active_segment_is_refused_naming_it() -> None:
    layout = SegmentLayout.initial(2).split_segment(0)
    frontier = DrainFrontier(layout, set())
    with pytest.raises(InvalidInputError, match=r"active segments \[3\] cannot be drained"):
        frontier.drain([0, 3])
