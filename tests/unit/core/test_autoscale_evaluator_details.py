"""The auto-scale decision's edge choices and the words it explains itself with.

``NoAction.detail`` and the ``reason`` of a split or merge feed the stats endpoint that tells an
operator why the controller did (not) act, so they are pinned word for word; the edge cases are
the ones an off-by-one or a wrong default would get wrong (two-hash segments, segments without a
load record, ties between subscriptions, ratios on metrics with very different thresholds).
"""

from __future__ import annotations

import pytest

from braid.core.autoscale_evaluator import (
    AutoScaleState,
    Merge,
    NoAction,
    NoActionReason,
    Split,
    decide,
)
from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.segment_load import SegmentLoad

NOW = 100_000_000
POLICY = AutoScalePolicy()
DEAD_BAND = SegmentLoad(5_000.0, 1_000.0, 10.0, 1_000.0, modified_ms=0)
COLD = SegmentLoad(10.0, 1_000.0, 10.0, 1_000.0, modified_ms=0)


def layout_with_a_two_hash_segment() -> SegmentLayout:
    """Split the lowest segment down to [0x0000, 0x0001]; the others are wider."""
    layout = SegmentLayout.initial(1)
    for _ in range(15):
        layout = layout.split_segment(layout.active_segments[0].segment_id)
    assert layout.active_segments[0].hash_range.size == 2
    return layout


def test_state_after_an_operation_clears_the_in_flight_flag() -> None:
    busy = AutoScaleState(last_split_at_ms=1, last_merge_at_ms=2, operation_in_flight=True)
    assert busy.after_split(10) == AutoScaleState(last_split_at_ms=10, last_merge_at_ms=2)
    assert busy.after_merge(20) == AutoScaleState(last_split_at_ms=1, last_merge_at_ms=20)
    assert busy.after_split(10).operation_in_flight is False


def test_guards_explain_themselves() -> None:
    layout = SegmentLayout.initial(1)
    disabled = decide(layout, {}, {}, AutoScalePolicy(enabled=False), AutoScaleState(), NOW)
    assert disabled == NoAction(
        NoActionReason.DISABLED, "auto split/merge is disabled for this topic"
    )
    busy = decide(layout, {}, {}, POLICY, AutoScaleState(operation_in_flight=True), NOW)
    assert busy == NoAction(
        NoActionReason.OPERATION_IN_FLIGHT, "a split or merge is still in progress"
    )


def test_consumer_driven_split_names_the_first_subscription_among_equals() -> None:
    decision = decide(SegmentLayout.initial(1), {}, {"b": 3, "a": 3}, POLICY, AutoScaleState(), NOW)
    assert decision == Split(
        0,
        "consumer-driven: subscription 'a' has 3 consumers for 1 active segments; "
        "splitting segment 0",
    )


def test_consumer_driven_split_counts_a_segment_without_a_record_as_idle() -> None:
    layout = SegmentLayout.initial(2)
    loads = {1: SegmentLoad(0.5, 0.0, 0.0, 0.0, modified_ms=0)}  # segment 0 has no record
    decision = decide(layout, loads, {"s": 3}, POLICY, AutoScaleState(), NOW)
    assert isinstance(decision, Split)
    assert decision.segment_id == 1


def test_a_two_hash_segment_can_still_split() -> None:
    layout = layout_with_a_two_hash_segment()
    smallest = layout.active_segments[0].segment_id
    loads = {s.segment_id: DEAD_BAND for s in layout.active_segments}
    loads[smallest] = SegmentLoad(90_000.0, 0.0, 0.0, 0.0, modified_ms=0)
    decision = decide(layout, loads, {}, POLICY, AutoScaleState(), NOW)
    assert isinstance(decision, Split) and decision.segment_id == smallest
    # Consumer-driven: the two-hash segment is the busiest.
    consumers = {"s": len(layout.active_segments) + 1}
    decision = decide(layout, loads, consumers, POLICY, AutoScaleState(), NOW)
    assert isinstance(decision, Split) and decision.segment_id == smallest
    layout.split_segment(smallest)  # and the layout agrees it can


def test_a_ring_of_one_hash_segments_reports_the_cap_not_a_crash() -> None:
    layout = SegmentLayout.initial(65_536)
    policy = AutoScalePolicy(max_segments=65_536)
    decision = decide(layout, {}, {"s": 70_000}, policy, AutoScaleState(), NOW)
    assert decision == NoAction(
        NoActionReason.MAX_SEGMENTS,
        "a split is warranted but the topic has 65536 active segments (maxSegments=65536)",
    )


def test_a_hot_segment_one_hash_wide_explains_why_it_cannot_split() -> None:
    layout = SegmentLayout.initial(1)
    for _ in range(16):
        layout = layout.split_segment(layout.active_segments[0].segment_id)
    loads = {s.segment_id: DEAD_BAND for s in layout.active_segments}
    loads[layout.active_segments[0].segment_id] = SegmentLoad(90_000.0, 0, 0, 0, modified_ms=0)
    decision = decide(layout, loads, {}, POLICY, AutoScaleState(), NOW)
    assert decision == NoAction(
        NoActionReason.UNSPLITTABLE,
        "every segment over a split threshold covers a single hash position",
    )


def test_overload_is_a_ratio_to_each_threshold_not_a_raw_rate() -> None:
    # 3x the msgRateIn threshold beats 1.5x the (5000x larger) bytesRateIn threshold.
    layout = SegmentLayout.initial(2)
    loads = {
        0: SegmentLoad(30_000.0, 0.0, 0.0, 0.0, modified_ms=0),
        1: SegmentLoad(0.0, 75_000_000.0, 0.0, 0.0, modified_ms=0),
    }
    decision = decide(layout, loads, {}, POLICY, AutoScaleState(), NOW)
    assert decision == Split(
        0, "load-driven: a rate is at 3.00x its split threshold; splitting segment 0"
    )


def test_the_reported_reason_is_the_lowest_pair_that_got_furthest() -> None:
    layout = SegmentLayout.initial(3)
    loads = {0: DEAD_BAND, 1: DEAD_BAND, 2: DEAD_BAND}
    decision = decide(layout, loads, {}, POLICY, AutoScaleState(), NOW)
    assert decision == NoAction(
        NoActionReason.DEAD_BAND, "segment 0 is between its merge and split thresholds"
    )


def test_merge_and_consumer_demand_explain_themselves() -> None:
    layout = SegmentLayout.initial(2)
    loads = {0: COLD, 1: COLD}
    decision = decide(layout, loads, {}, POLICY, AutoScaleState(), NOW)
    assert decision == Merge(0, 1, "cold for at least 300000 ms: merging adjacent segments 0 and 1")
    held = decide(layout, loads, {"s": 2}, POLICY, AutoScaleState(), NOW)
    assert held == NoAction(
        NoActionReason.CONSUMER_DEMAND,
        "a merge would leave 1 segments for a subscription with 2 consumers",
    )


def test_a_load_entry_of_the_wrong_type_is_refused_naming_the_segment() -> None:
    with pytest.raises(InvalidInputError) as info:
        decide(SegmentLayout.initial(1), {0: 5}, {}, POLICY, AutoScaleState(), NOW)  # type: ignore[dict-item]
    assert str(info.value) == "load of segment 0 must be a SegmentLoad, got int"
