"""PIP-486 read scaling inside a segment: which Stream consumers share a segment by bucket, the
boundary lists a topic advertises, and the auto-scaler preferring sharing to a consumer-driven
split (ADR 0055)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core.assignment import ConsumerAssignment, SubscriptionAssignment, compute_assignment
from braid.core.autoscale_evaluator import (
    AutoScaleState,
    NoAction,
    NoActionReason,
    Split,
    decide,
)
from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.bucket_sharing import bucket_ranges, share_buckets, shared_segments
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import layout_from_metadata, layout_to_metadata
from braid.core.ranges import HashRange
from braid.core.segment_info import CorruptLayout
from braid.core.segment_load import SegmentLoad


def shared(layout: SegmentLayout, consumers: list[str]) -> dict[str, tuple[int, ...]]:
    return share_buckets(compute_assignment(layout, consumers, frozenset()), layout).as_dict()


def test_idle_consumers_share_the_segment_with_the_fewest_sharers() -> None:
    layout = SegmentLayout.initial(2, entry_buckets=4)
    got = shared(layout, ["a", "b", "c", "d", "e"])
    # a and b own one segment each; c, d, e share them, the least shared first (ring order).
    assert got == {"a": (0,), "b": (1,), "c": (0,), "d": (1,), "e": (0,)}
    assert shared_segments(got) == {0, 1}


def test_no_segment_gets_more_sharers_than_it_has_buckets() -> None:
    layout = SegmentLayout.initial(1, entry_buckets=2)
    got = shared(layout, ["a", "b", "c"])
    assert got == {"a": (0,), "b": (0,), "c": ()}  # c stays idle


def test_a_topic_with_one_bucket_per_segment_never_shares() -> None:
    layout = SegmentLayout.initial(1)
    assert shared(layout, ["a", "b"]) == {"a": (0,), "b": ()}
    assert bucket_ranges(layout) == ()
    assert layout.entry_bucket_splits == ()


def test_the_boundary_list_tiles_the_bucket_hash_space() -> None:
    layout = SegmentLayout.initial(1, entry_buckets=4)
    assert layout.entry_bucket_splits == (0x4000, 0x8000, 0xC000)
    assert bucket_ranges(layout) == (
        HashRange(0, 0x3FFF),
        HashRange(0x4000, 0x7FFF),
        HashRange(0x8000, 0xBFFF),
        HashRange(0xC000, 0xFFFF),
    )


@given(st.integers(1, 6), st.integers(1, 8), st.integers(0, 30))
def test_sharing_depends_only_on_its_inputs_and_gives_everyone_work_while_buckets_last(
    segments: int, buckets: int, consumers: int
) -> None:
    layout = SegmentLayout.initial(segments, entry_buckets=buckets)
    names = [f"c{i:02d}" for i in range(consumers)]
    got = shared(layout, names)
    assert got == shared(layout, list(reversed(names)))
    busy = sum(1 for ids in got.values() if ids)
    assert busy == min(consumers, segments * buckets)
    load = [sum(1 for ids in got.values() if sid in ids) for sid in range(segments)]
    if consumers >= segments:
        assert max(load) - min(load) <= 1 and max(load) <= buckets


def test_entry_buckets_are_stored_with_the_topic_and_checked() -> None:
    layout = SegmentLayout.initial(2, entry_buckets=8).split_segment(0)
    doc = layout_to_metadata(layout)
    assert doc["entryBuckets"] == 8
    assert layout_from_metadata(doc) == layout
    assert layout_from_metadata(doc).entry_buckets == 8
    assert "entryBuckets" not in layout_to_metadata(SegmentLayout.initial(1))
    with pytest.raises(CorruptLayout, match="entryBuckets"):
        layout_from_metadata({**doc, "entryBuckets": 0})


def _decide(layout: SegmentLayout, consumers: int, msg_rate_in: float = 0.0) -> object:
    loads = {0: SegmentLoad(msg_rate_in, 0.0, 0.0, 0.0, modified_ms=0)}
    return decide(layout, loads, {"s": consumers}, AutoScalePolicy(), AutoScaleState(), 10**8)


def test_the_auto_scaler_prefers_bucket_sharing_to_a_consumer_driven_split() -> None:
    shared_topic = SegmentLayout.initial(1, entry_buckets=4)
    decision = _decide(shared_topic, 3)
    assert isinstance(decision, NoAction) and decision.reason is NoActionReason.BUCKET_SHARING
    # More consumers than the buckets can serve: split as before.
    assert isinstance(_decide(shared_topic, 5), Split)
    # A write rate over the split threshold still splits.
    hot = _decide(shared_topic, 3, msg_rate_in=20_000.0)
    assert isinstance(hot, Split) and "load-driven" in hot.reason
    # Without buckets the consumer-driven split fires.
    assert isinstance(_decide(SegmentLayout.initial(1), 3), Split)


def test_only_segments_given_to_two_consumers_count_as_shared() -> None:
    layout = SegmentLayout.initial(3, entry_buckets=4)
    assignment = share_buckets(
        compute_assignment(layout, ["a", "b", "c", "d"], frozenset()), layout
    )
    # a, b, c own a segment each; d shares the first in ring order: only it is shared.
    assert assignment.as_dict() == {"a": (0,), "b": (1,), "c": (2,), "d": (0,)}
    assert shared_segments(assignment) == {0}
    assert shared_segments({"a": (0, 1), "b": (2,)}) == frozenset()


def test_sharing_counts_consumers_already_sharing_a_segment_and_keeps_the_layout_epoch() -> None:
    layout = SegmentLayout.initial(2, entry_buckets=2).split_segment(0)  # epoch 1: 2, 3, 1
    given_ = SubscriptionAssignment(
        layout.epoch,
        (
            ConsumerAssignment("a", (2,)),
            ConsumerAssignment("b", (2,)),  # 2 already has two sharers: full at two buckets
            ConsumerAssignment("c", (3, 1)),
            ConsumerAssignment("d", ()),
        ),
    )
    got = share_buckets(given_, layout)
    assert got.layout_epoch == 1
    assert got.as_dict() == {"a": (2,), "b": (2,), "c": (3, 1), "d": (3,)}
