"""The offset JSON: stable order, strict reading, round trips, golden text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.spark.offsets import (
    BEGINNING,
    DRAINED,
    WHOLE_ENTRY,
    InvalidOffset,
    SegmentProgress,
    SourceOffset,
    TopicProgress,
)

GOLDEN = (
    '{"version":1,"topics":{"topic://public/default/orders":{"epoch":3,"segments":'
    '{"0":{"drained":true},"3":{"after":[3,1,2147483647]},"10":{"after":null}}}}}'
)


def test_offset_json_is_golden_and_ordered_by_numeric_segment_id() -> None:
    offset = SourceOffset(
        {
            "topic://public/default/orders": TopicProgress(
                3, {10: BEGINNING, 3: SegmentProgress((3, 1, WHOLE_ENTRY)), 0: DRAINED}
            )
        }
    )
    assert offset.dumps() == GOLDEN
    assert SourceOffset.loads(GOLDEN) == offset


positions = st.tuples(st.integers(0, 2**40), st.integers(0, 2**40), st.integers(-1, WHOLE_ENTRY))
progress = st.one_of(
    st.just(BEGINNING), st.just(DRAINED), positions.map(lambda p: SegmentProgress(p))
)
offsets = st.dictionaries(
    st.sampled_from(["topic://public/default/a", "persistent://public/default/b"]),
    st.builds(
        TopicProgress,
        st.integers(0, 1000),
        st.dictionaries(st.integers(0, 5000), progress, max_size=8),
    ),
    max_size=2,
).map(SourceOffset)


@given(offsets)
def test_offsets_round_trip_through_json_with_the_same_text(offset: SourceOffset) -> None:
    text = offset.dumps()
    again = SourceOffset.from_json(json.loads(text))
    assert again == offset
    assert again.dumps() == text


@pytest.mark.parametrize(
    "doc",
    [
        {"version": 2, "topics": {}},
        {"version": 1},
        {"version": 1, "topics": {}, "extra": 1},
        {"version": 1, "topics": {"t": {"epoch": -1, "segments": {}}}},
        {"version": 1, "topics": {"t": {"epoch": 0, "segments": {"x": {"after": None}}}}},
        {"version": 1, "topics": {"t": {"epoch": 0, "segments": {"1": {"after": [1, 2]}}}}},
        {"version": 1, "topics": {"t": {"segments": {"1": {"drained": True, "after": [1, 2, 3]}}}}},
        {"version": 1, "topics": {"t": {"segments": {"1": {"drained": "yes"}}}}},
        {"version": 1, "topics": {"t": {"segments": {"1": {"after": [1, 2, 3], "x": 0}}}}},
        [],
    ],
)
def test_malformed_offsets_are_refused(doc: object) -> None:
    with pytest.raises(InvalidOffset):
        SourceOffset.from_json(doc)


def test_progress_orders_beginning_positions_drained() -> None:
    a, b = SegmentProgress((1, 5, 0)), SegmentProgress((1, 5, WHOLE_ENTRY))
    assert BEGINNING.rank() < a.rank() < b.rank() < DRAINED.rank()
    assert SegmentProgress((2, 0, -1)).rank() > b.rank()
