"""PIP-483's auto split/merge decision, policy, overrides and load records (example-based)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import pytest

from braid.core.autoscale_evaluator import (
    AutoScaleState,
    Decision,
    Merge,
    NoAction,
    NoActionReason,
    Split,
    decide,
)
from braid.core.autoscale_policy import (
    AutoScalePolicy,
    AutoScalePolicyOverride,
    InvalidAutoScalePolicy,
    broker_config_key,
    resolve_policy,
)
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import layout_to_metadata
from braid.core.segment_load import SegmentLoad, is_material_change

NOW = 100_000_000
MINUTE = 60_000
POLICY = AutoScalePolicy()
FRESH = AutoScaleState()


def load(
    msg_in: float = 0.0,
    bytes_in: float = 0.0,
    msg_out: float = 0.0,
    bytes_out: float = 0.0,
    *,
    modified_ms: int = 0,
) -> SegmentLoad:
    return SegmentLoad(msg_in, bytes_in, msg_out, bytes_out, modified_ms=modified_ms)


def cold(msg_in: float = 10.0, *, since_ms: int = 0) -> SegmentLoad:
    """Below every default merge threshold, last written at ``since_ms``."""
    return load(msg_in, 1_000.0, msg_in, 1_000.0, modified_ms=since_ms)


def warm() -> SegmentLoad:
    """In the dead band: above the msgRateIn merge threshold, below its split threshold."""
    return load(5_000.0, 1_000.0, 10.0, 1_000.0)


def run(
    layout: SegmentLayout,
    loads: Mapping[int, SegmentLoad],
    consumers: Mapping[str, int] | None = None,
    policy: AutoScalePolicy = POLICY,
    state: AutoScaleState = FRESH,
    now_ms: int = NOW,
) -> Decision:
    return decide(layout, loads, consumers or {}, policy, state, now_ms)


def no_action(decision: Decision) -> NoActionReason:
    assert isinstance(decision, NoAction), decision
    assert decision.detail
    return decision.reason


# --------------------------------------------------------------------------- guards


def test_disabled_policy_takes_no_action_even_when_hot() -> None:
    layout = SegmentLayout.initial(2)
    decision = run(layout, {0: load(50_000.0), 1: load()}, {"s": 9}, AutoScalePolicy(enabled=False))
    assert no_action(decision) is NoActionReason.DISABLED


def test_operation_in_flight_blocks_any_action() -> None:
    layout = SegmentLayout.initial(2)
    state = AutoScaleState(operation_in_flight=True)
    decision = run(layout, {0: load(50_000.0), 1: load()}, state=state)
    assert no_action(decision) is NoActionReason.OPERATION_IN_FLIGHT


# --------------------------------------------------------------------------- split pass


def test_consumer_driven_split_targets_the_busiest_segment_by_msg_rate_in() -> None:
    layout = SegmentLayout.initial(4)
    loads = {0: warm(), 1: load(900.0), 2: load(7_000.0), 3: load(100.0)}
    decision = run(layout, loads, {"orders": 5})
    assert isinstance(decision, Split)
    assert decision.segment_id == 2
    assert "consumer-driven" in decision.reason


def test_consumer_count_is_the_per_subscription_maximum_not_the_sum() -> None:
    layout = SegmentLayout.initial(2)
    loads = {0: warm(), 1: warm()}
    # 2 + 2 consumers over two subscriptions: each subscription still has one segment each.
    assert no_action(run(layout, loads, {"a": 2, "b": 2})) is NoActionReason.DEAD_BAND
    assert isinstance(run(layout, loads, {"a": 3, "b": 1}), Split)


def test_consumer_driven_split_with_no_load_records_picks_the_lowest_range() -> None:
    layout = SegmentLayout.initial(2).split_segment(1)  # active: 0, 2, 3
    decision = run(layout, {}, {"s": 4})
    assert isinstance(decision, Split)
    assert decision.segment_id == 0


def test_consumer_driven_busiest_tie_goes_to_lowest_range_start() -> None:
    layout = SegmentLayout.initial(2).split_segment(0)  # active by start: 2, 3, 1
    loads = {1: load(500.0), 2: load(100.0), 3: load(500.0)}
    decision = run(layout, loads, {"s": 4})
    assert isinstance(decision, Split)
    assert decision.segment_id == 3


def test_as_many_consumers_as_segments_does_not_split() -> None:
    layout = SegmentLayout.initial(3)
    loads = {i: warm() for i in range(3)}
    assert no_action(run(layout, loads, {"s": 3})) is NoActionReason.DEAD_BAND


def test_split_cooldown_holds_a_wanted_split_until_it_expires() -> None:
    layout = SegmentLayout.initial(2)
    loads = {0: load(20_000.0), 1: warm()}
    recent = AutoScaleState(last_split_at_ms=NOW - 30_000)
    assert no_action(run(layout, loads, state=recent)) is NoActionReason.SPLIT_COOLDOWN
    just_expired = AutoScaleState(last_split_at_ms=NOW - MINUTE)
    assert isinstance(run(layout, loads, state=just_expired), Split)
    # The event-driven consumer rule is bound by the same cooldown.
    consumers = {"s": 3}
    assert no_action(run(layout, {}, consumers, state=recent)) is NoActionReason.SPLIT_COOLDOWN


def test_manual_split_starts_the_split_cooldown() -> None:
    layout = SegmentLayout.initial(2)
    after_manual = FRESH.after_split(NOW - 1_000)
    assert after_manual.last_split_at_ms == NOW - 1_000
    decision = run(layout, {0: load(20_000.0), 1: warm()}, state=after_manual)
    assert no_action(decision) is NoActionReason.SPLIT_COOLDOWN


def test_load_split_on_msg_rate_in() -> None:
    layout = SegmentLayout.initial(2)
    decision = run(layout, {0: warm(), 1: load(10_001.0)})
    assert isinstance(decision, Split)
    assert decision.segment_id == 1
    assert "load-driven" in decision.reason


def test_load_split_on_bytes_rate_out() -> None:
    layout = SegmentLayout.initial(2)
    decision = run(layout, {0: load(bytes_out=251_000_000.0), 1: warm()})
    assert isinstance(decision, Split)
    assert decision.segment_id == 0


@pytest.mark.parametrize(
    "hot",
    [
        load(msg_in=10_000.5),
        load(bytes_in=50_000_001.0),
        load(msg_out=50_001.0),
        load(bytes_out=250_000_001.0),
    ],
)
def test_any_single_metric_over_its_split_threshold_splits(hot: SegmentLoad) -> None:
    layout = SegmentLayout.initial(2)
    decision = run(layout, {0: warm(), 1: hot})
    assert isinstance(decision, Split)
    assert decision.segment_id == 1


def test_rate_exactly_at_the_split_threshold_is_not_over_it() -> None:
    layout = SegmentLayout.initial(2)
    decision = run(layout, {0: load(10_000.0), 1: load(msg_out=50_000.0)})
    assert no_action(decision) is NoActionReason.DEAD_BAND


def test_load_split_picks_the_most_overloaded_segment_relative_to_thresholds() -> None:
    layout = SegmentLayout.initial(3)
    loads = {
        0: load(msg_in=20_000.0),  # 2x
        1: load(bytes_in=200_000_000.0),  # 4x
        2: load(msg_out=150_000.0),  # 3x
    }
    decision = run(layout, loads)
    assert isinstance(decision, Split)
    assert decision.segment_id == 1


def test_nothing_over_a_split_threshold_and_nothing_cold_takes_no_action() -> None:
    layout = SegmentLayout.initial(4)
    decision = run(layout, {i: warm() for i in range(4)})
    assert no_action(decision) is NoActionReason.DEAD_BAND


def test_max_segments_suppresses_load_and_consumer_splits() -> None:
    layout = SegmentLayout.initial(4)
    policy = AutoScalePolicy(max_segments=4)
    loads = {0: load(30_000.0), 1: warm(), 2: warm(), 3: warm()}
    assert no_action(run(layout, loads, policy=policy)) is NoActionReason.MAX_SEGMENTS
    calm = {i: warm() for i in range(4)}
    assert no_action(run(layout, calm, {"s": 6}, policy)) is NoActionReason.MAX_SEGMENTS
    below_cap = AutoScalePolicy(max_segments=5)
    assert isinstance(run(layout, loads, policy=below_cap), Split)


def test_segments_without_a_load_record_never_load_split() -> None:
    layout = SegmentLayout.initial(2)
    assert no_action(run(layout, {0: warm()})) is NoActionReason.NO_LOAD_RECORD


def test_a_hot_segment_one_hash_wide_cannot_split_so_the_next_hottest_does() -> None:
    layout = SegmentLayout.initial(1)
    for _ in range(16):  # keep splitting the lowest segment down to a single hash
        layout = layout.split_segment(layout.active_segments[0].segment_id)
    tiny = layout.active_segments[0]
    assert tiny.hash_range.size == 1
    loads = {seg.segment_id: warm() for seg in layout.active_segments}
    loads[tiny.segment_id] = load(90_000.0)
    assert no_action(run(layout, loads)) is NoActionReason.UNSPLITTABLE
    other = layout.active_segments[5].segment_id
    loads[other] = load(11_000.0)
    decision = run(layout, loads)
    assert isinstance(decision, Split)
    assert decision.segment_id == other


def test_loads_of_sealed_or_unknown_segments_are_ignored() -> None:
    layout = SegmentLayout.initial(2).split_segment(0)  # 0 sealed; 1, 2, 3 active
    loads = {0: load(99_000.0), 42: load(99_000.0), 1: warm(), 2: warm(), 3: warm()}
    assert no_action(run(layout, loads)) is NoActionReason.DEAD_BAND


def test_only_stream_subscriptions_drive_consumer_splits() -> None:
    # QUEUE subscriptions are not passed in at all; a topic with none never consumer-splits.
    layout = SegmentLayout.initial(1)
    assert no_action(run(layout, {0: warm()}, {})) is NoActionReason.MIN_SEGMENTS


# --------------------------------------------------------------------------- merge pass


def test_merges_a_cold_adjacent_pair() -> None:
    layout = SegmentLayout.initial(2)
    decision = run(layout, {0: cold(), 1: cold()})
    assert isinstance(decision, Merge)
    assert (decision.segment_id1, decision.segment_id2) == (0, 1)
    merged = layout.merge_segments([decision.segment_id1, decision.segment_id2], NOW)
    assert len(merged.active_segments) == 1


def test_min_segments_stops_merging() -> None:
    layout = SegmentLayout.initial(2)
    decision = run(layout, {0: cold(), 1: cold()}, policy=AutoScalePolicy(min_segments=2))
    assert no_action(decision) is NoActionReason.MIN_SEGMENTS
    single = SegmentLayout.initial(1)
    assert no_action(run(single, {0: cold()})) is NoActionReason.MIN_SEGMENTS


def test_merge_cooldown_holds_a_wanted_merge_until_it_expires() -> None:
    layout = SegmentLayout.initial(2)
    loads = {0: cold(), 1: cold()}
    recent = AutoScaleState(last_merge_at_ms=NOW - 4 * MINUTE)
    assert no_action(run(layout, loads, state=recent)) is NoActionReason.MERGE_COOLDOWN
    expired = AutoScaleState(last_merge_at_ms=NOW - 5 * MINUTE)
    assert isinstance(run(layout, loads, state=expired), Merge)
    manual = FRESH.after_merge(NOW - MINUTE)
    assert no_action(run(layout, loads, state=manual)) is NoActionReason.MERGE_COOLDOWN


def test_merge_needs_both_segments_cold_for_the_window_measured_from_modified_time() -> None:
    layout = SegmentLayout.initial(2)
    long_ago = NOW - 5 * MINUTE
    recently = NOW - 4 * MINUTE
    assert isinstance(run(layout, {0: cold(since_ms=long_ago), 1: cold(since_ms=long_ago)}), Merge)
    decision = run(layout, {0: cold(since_ms=long_ago), 1: cold(since_ms=recently)})
    assert no_action(decision) is NoActionReason.MERGE_WINDOW
    # A record modified "in the future" (clock skew) is not old enough either.
    decision = run(layout, {0: cold(since_ms=NOW + 1), 1: cold()})
    assert no_action(decision) is NoActionReason.MERGE_WINDOW


def test_merge_requires_a_load_record_for_both_segments() -> None:
    layout = SegmentLayout.initial(2)
    assert no_action(run(layout, {0: cold()})) is NoActionReason.NO_LOAD_RECORD
    assert no_action(run(layout, {})) is NoActionReason.NO_LOAD_RECORD


def test_dead_band_neither_splits_nor_merges() -> None:
    layout = SegmentLayout.initial(2)
    # One cold, one between the thresholds: the pair is not cold, nothing is hot.
    assert no_action(run(layout, {0: cold(), 1: warm()})) is NoActionReason.DEAD_BAND
    exactly_at_merge_threshold = load(1_000.0, 1_000.0, 10.0, 1_000.0)
    decision = run(layout, {0: cold(), 1: exactly_at_merge_threshold})
    assert no_action(decision) is NoActionReason.DEAD_BAND


def test_split_has_priority_over_merge() -> None:
    layout = SegmentLayout.initial(4)
    loads = {0: load(12_000.0), 1: warm(), 2: cold(), 3: cold()}
    decision = run(layout, loads)
    assert isinstance(decision, Split)
    assert decision.segment_id == 0


def test_a_split_held_by_cooldown_still_lets_a_cold_pair_merge() -> None:
    layout = SegmentLayout.initial(3)
    loads = {0: load(12_000.0), 1: cold(), 2: cold()}
    state = AutoScaleState(last_split_at_ms=NOW - 1_000)
    decision = run(layout, loads, state=state)
    assert isinstance(decision, Merge)
    assert (decision.segment_id1, decision.segment_id2) == (1, 2)
    # With nothing to merge, the held split is what gets reported.
    loads[2] = warm()
    assert no_action(run(layout, loads, state=state)) is NoActionReason.SPLIT_COOLDOWN


def _merged_once() -> SegmentLayout:
    """Segments 0 and 1 merged into 3 (depth 1), next to segment 2 (depth 0)."""
    return SegmentLayout.initial(3).merge_segments([0, 1], 1)


def test_max_dag_depth_stops_merging_a_lineage_at_the_cap() -> None:
    layout = _merged_once()
    assert layout.merge_depth(3) == 1
    loads = {3: cold(), 2: cold()}
    decision = run(layout, loads, policy=AutoScalePolicy(max_dag_depth=1))
    assert no_action(decision) is NoActionReason.MAX_DAG_DEPTH
    allowed = run(layout, loads, policy=AutoScalePolicy(max_dag_depth=2))
    assert isinstance(allowed, Merge)
    child = layout.merge_segments([allowed.segment_id1, allowed.segment_id2], 2)
    assert child.merge_depth(child.active_segments[0].segment_id) == 2


def test_max_dag_depth_zero_disables_merges_entirely() -> None:
    decision = run(
        SegmentLayout.initial(2), {0: cold(), 1: cold()}, policy=AutoScalePolicy(max_dag_depth=0)
    )
    assert no_action(decision) is NoActionReason.MAX_DAG_DEPTH


def test_max_dag_depth_never_blocks_a_split() -> None:
    layout = _merged_once()
    decision = run(layout, {3: load(20_000.0), 2: cold()}, policy=AutoScalePolicy(max_dag_depth=1))
    assert isinstance(decision, Split)
    assert decision.segment_id == 3


def test_depth_capped_pair_is_skipped_for_another_cold_pair() -> None:
    layout = SegmentLayout.initial(4).merge_segments([0, 1], 1)  # active: 4 (depth 1), 2, 3
    loads = {4: cold(1.0), 2: cold(50.0), 3: cold(50.0)}
    decision = run(layout, loads, policy=AutoScalePolicy(max_dag_depth=1))
    assert isinstance(decision, Merge)
    assert (decision.segment_id1, decision.segment_id2) == (2, 3)


def test_merge_picks_the_coldest_pair_by_combined_rate() -> None:
    layout = SegmentLayout.initial(4)
    loads = {0: cold(500.0), 1: cold(500.0), 2: cold(5.0), 3: cold(5.0)}
    decision = run(layout, loads)
    assert isinstance(decision, Merge)
    assert (decision.segment_id1, decision.segment_id2) == (2, 3)


def test_coldness_weighs_each_metric_relative_to_its_threshold() -> None:
    layout = SegmentLayout.initial(3)
    # Pair (0,1) has fewer bytes in absolute terms but is far closer to the msg thresholds.
    loads = {
        0: load(900.0, 10.0, 10.0, 10.0),
        1: load(900.0, 10.0, 10.0, 10.0),
        2: load(1.0, 100_000.0, 1.0, 100_000.0),
    }
    decision = run(layout, loads)
    assert isinstance(decision, Merge)
    assert (decision.segment_id1, decision.segment_id2) == (1, 2)


def test_equally_cold_pairs_tie_break_to_the_lowest_range_start() -> None:
    layout = SegmentLayout.initial(4)
    decision = run(layout, {i: cold() for i in range(4)})
    assert isinstance(decision, Merge)
    assert (decision.segment_id1, decision.segment_id2) == (0, 1)


def test_merged_pair_is_adjacent_and_ordered_by_range_start_not_id() -> None:
    layout = SegmentLayout.initial(2).split_segment(0)  # active by start: 2, 3, 1
    decision = run(layout, {2: warm(), 3: cold(), 1: cold()})
    assert isinstance(decision, Merge)
    assert (decision.segment_id1, decision.segment_id2) == (3, 1)
    first = layout.segment(decision.segment_id1).hash_range
    second = layout.segment(decision.segment_id2).hash_range
    assert first.end + 1 == second.start
    layout.merge_segments([decision.segment_id1, decision.segment_id2], NOW)


def test_no_merge_below_the_stream_consumer_count() -> None:
    layout = SegmentLayout.initial(2)
    loads = {0: cold(), 1: cold()}
    assert no_action(run(layout, loads, {"s": 2})) is NoActionReason.CONSUMER_DEMAND
    assert isinstance(run(layout, loads, {"s": 1}), Merge)


def test_decide_does_not_change_its_inputs() -> None:
    layout = SegmentLayout.initial(2)
    loads = {0: cold(), 1: cold()}
    before = (layout_to_metadata(layout), dict(loads))
    run(layout, loads)
    assert (layout_to_metadata(layout), dict(loads)) == before


def test_bad_decide_inputs_raise_typed_errors() -> None:
    layout = SegmentLayout.initial(2)
    with pytest.raises(InvalidInputError, match="consumer count"):
        run(layout, {}, {"s": -1})
    with pytest.raises(InvalidInputError, match="consumer count"):
        run(layout, {}, {"s": 1.5})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match="SegmentLoad"):
        run(layout, {0: {"msgRateIn": 1.0}})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match="now_ms"):
        run(layout, {}, now_ms=1.5)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- policy


def test_policy_defaults_are_pip_483s() -> None:
    p = AutoScalePolicy()
    assert p.enabled is True
    assert p.auto_scale_interval_ms == 60_000
    assert (p.max_segments, p.min_segments, p.max_dag_depth) == (64, 1, 10)
    assert (p.split_cooldown_ms, p.merge_cooldown_ms, p.merge_window_ms) == (
        60_000,
        300_000,
        300_000,
    )
    assert p.split_thresholds == (10_000.0, 50_000_000.0, 50_000.0, 250_000_000.0)
    assert p.merge_thresholds == (1_000.0, 5_000_000.0, 5_000.0, 25_000_000.0)
    assert p.load_report_interval_ms == 10_000
    assert p.load_report_rate_change_threshold == 0.25


PIP_483_BROKER_CONF = {
    "scalableTopicAutoScaleEnabled": "true",
    "scalableTopicAutoScaleInterval": "60s",
    "scalableTopicMaxSegments": "64",
    "scalableTopicMinSegments": "1",
    "scalableTopicMaxDagDepth": "10",
    "scalableTopicSplitCooldown": "1m",
    "scalableTopicMergeCooldown": "5m",
    "scalableTopicMergeWindow": "5m",
    "scalableTopicSplitMsgRateInThreshold": "10000",
    "scalableTopicSplitBytesRateInThreshold": "50MB",
    "scalableTopicSplitMsgRateOutThreshold": "50000",
    "scalableTopicSplitBytesRateOutThreshold": "250MB",
    "scalableTopicMergeMsgRateInThreshold": "1000",
    "scalableTopicMergeBytesRateInThreshold": "5MB",
    "scalableTopicMergeMsgRateOutThreshold": "5000",
    "scalableTopicMergeBytesRateOutThreshold": "25MB",
    "scalableTopicLoadReportInterval": "10s",
    "scalableTopicLoadReportRateChangeThreshold": "25%",
}


def test_broker_config_with_the_pip_table_defaults_gives_the_default_policy() -> None:
    assert AutoScalePolicy.from_broker_config(PIP_483_BROKER_CONF) == AutoScalePolicy()
    assert AutoScalePolicy.from_broker_config({}) == AutoScalePolicy()


def test_broker_config_reads_every_key_of_the_pip_table() -> None:
    conf = {
        "scalableTopicAutoScaleEnabled": "false",
        "scalableTopicAutoScaleInterval": "30s",
        "scalableTopicMaxSegments": "128",
        "scalableTopicMinSegments": "2",
        "scalableTopicMaxDagDepth": "3",
        "scalableTopicSplitCooldown": "2m",
        "scalableTopicMergeCooldown": "10m",
        "scalableTopicMergeWindow": "15m",
        "scalableTopicSplitMsgRateInThreshold": "20000",
        "scalableTopicSplitBytesRateInThreshold": "100MB",
        "scalableTopicSplitMsgRateOutThreshold": "60000",
        "scalableTopicSplitBytesRateOutThreshold": "1GiB",
        "scalableTopicMergeMsgRateInThreshold": "10",
        "scalableTopicMergeBytesRateInThreshold": "1KB",
        "scalableTopicMergeMsgRateOutThreshold": "20",
        "scalableTopicMergeBytesRateOutThreshold": "2KiB",
        "scalableTopicLoadReportInterval": "5s",
        "scalableTopicLoadReportRateChangeThreshold": "10%",
        "someOtherBrokerSetting": "whatever",
    }
    assert AutoScalePolicy.from_broker_config(conf) == AutoScalePolicy(
        enabled=False,
        auto_scale_interval_ms=30_000,
        max_segments=128,
        min_segments=2,
        max_dag_depth=3,
        split_cooldown_ms=120_000,
        merge_cooldown_ms=600_000,
        merge_window_ms=900_000,
        split_msg_rate_in_threshold=20_000.0,
        split_bytes_rate_in_threshold=100_000_000.0,
        split_msg_rate_out_threshold=60_000.0,
        split_bytes_rate_out_threshold=float(2**30),
        merge_msg_rate_in_threshold=10.0,
        merge_bytes_rate_in_threshold=1_000.0,
        merge_msg_rate_out_threshold=20.0,
        merge_bytes_rate_out_threshold=2_048.0,
        load_report_interval_ms=5_000,
        load_report_rate_change_threshold=0.10,
    )


def test_unparsable_broker_config_value_names_its_key() -> None:
    with pytest.raises(InvalidAutoScalePolicy, match="scalableTopicSplitCooldown"):
        AutoScalePolicy.from_broker_config({"scalableTopicSplitCooldown": "soon"})
    with pytest.raises(InvalidAutoScalePolicy, match="scalableTopicAutoScaleEnabled"):
        AutoScalePolicy.from_broker_config({"scalableTopicAutoScaleEnabled": "yes"})


@pytest.mark.parametrize(
    "field",
    [
        "msg_rate_in_threshold",
        "bytes_rate_in_threshold",
        "msg_rate_out_threshold",
        "bytes_rate_out_threshold",
    ],
)
def test_split_threshold_must_be_above_its_merge_threshold(field: str) -> None:
    merge_value = getattr(POLICY, f"merge_{field}")
    with pytest.raises(InvalidAutoScalePolicy, match="dead band"):
        AutoScalePolicy(**{f"split_{field}": merge_value})
    with pytest.raises(InvalidAutoScalePolicy, match="dead band"):
        AutoScalePolicy(**{f"split_{field}": merge_value / 2})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"min_segments": 5, "max_segments": 4}, "must not exceed maxSegments"),
        ({"min_segments": 0}, "minSegments must be >= 1"),
        ({"max_segments": 65_537}, "65536"),
        ({"max_dag_depth": -1}, "maxDagDepth"),
        ({"split_cooldown_ms": -5}, "splitCooldownMs"),
        ({"auto_scale_interval_ms": 0}, "autoScaleIntervalMs"),
        ({"load_report_interval_ms": 0}, "loadReportIntervalMs"),
        ({"merge_msg_rate_in_threshold": -1.0}, "mergeMsgRateInThreshold"),
        ({"split_msg_rate_in_threshold": float("nan")}, "splitMsgRateInThreshold"),
        ({"split_bytes_rate_in_threshold": float("inf")}, "splitBytesRateInThreshold"),
        ({"load_report_rate_change_threshold": -0.1}, "loadReportRateChangeThreshold"),
        ({"max_segments": True}, "maxSegments must be an integer"),
        ({"max_segments": 64.0}, "maxSegments must be an integer"),
        ({"enabled": 1}, "enabled must be a boolean"),
        ({"merge_window_ms": "5m"}, "mergeWindowMs must be an integer"),
        ({"split_msg_rate_in_threshold": "fast"}, "must be a number"),
        ({"split_msg_rate_in_threshold": 10**400}, "finite"),
    ],
)
def test_invalid_policy_is_rejected_with_a_clear_message(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidAutoScalePolicy, match=message):
        AutoScalePolicy(**overrides)  # type: ignore[arg-type]


def test_integer_thresholds_are_normalised_to_floats() -> None:
    policy = AutoScalePolicy(split_msg_rate_in_threshold=20_000)
    assert isinstance(policy.split_msg_rate_in_threshold, float)
    assert policy == AutoScalePolicy(split_msg_rate_in_threshold=20_000.0)


def test_invalid_policy_error_is_an_invalid_input_error() -> None:
    assert issubclass(InvalidAutoScalePolicy, InvalidInputError)


# --------------------------------------------------------------------------- overrides


def test_override_json_round_trips_with_camel_case_keys() -> None:
    override = AutoScalePolicyOverride(
        enabled=False, max_segments=16, split_cooldown_ms=30_000, merge_bytes_rate_in_threshold=1e6
    )
    doc = override.to_json()
    assert doc == {
        "enabled": False,
        "maxSegments": 16,
        "splitCooldownMs": 30_000,
        "mergeBytesRateInThreshold": 1_000_000.0,
    }
    assert AutoScalePolicyOverride.from_json(json.loads(json.dumps(doc))) == override


def test_override_json_keys_cover_every_knob() -> None:
    full = AutoScalePolicy().to_json()
    assert sorted(full) == sorted(
        [
            "enabled",
            "autoScaleIntervalMs",
            "maxSegments",
            "minSegments",
            "maxDagDepth",
            "splitCooldownMs",
            "mergeCooldownMs",
            "mergeWindowMs",
            "splitMsgRateInThreshold",
            "splitBytesRateInThreshold",
            "splitMsgRateOutThreshold",
            "splitBytesRateOutThreshold",
            "mergeMsgRateInThreshold",
            "mergeBytesRateInThreshold",
            "mergeMsgRateOutThreshold",
            "mergeBytesRateOutThreshold",
            "loadReportIntervalMs",
            "loadReportRateChangeThreshold",
        ]
    )
    # Every knob set in an override survives the codec and resolves to the same policy.
    override = AutoScalePolicyOverride.from_json(full)
    assert override.to_json() == full
    assert resolve_policy(AutoScalePolicy(max_segments=3), None, override) == AutoScalePolicy()


def test_override_json_null_and_absent_keys_mean_unset() -> None:
    override = AutoScalePolicyOverride.from_json({"maxSegments": None})
    assert override == AutoScalePolicyOverride()
    assert override.to_json() == {}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"maxSegmentz": 4}, "unknown auto-scale policy key 'maxSegmentz'"),
        ({"maxSegments": "64"}, "maxSegments must be an integer"),
        ({"enabled": "true"}, "enabled must be a boolean"),
        ({"splitCooldownMs": 1.5}, "splitCooldownMs must be an integer"),
        ({"splitMsgRateInThreshold": True}, "must be a number"),
        ({"minSegments": 0}, "minSegments must be >= 1"),
        ([], "must be a JSON object"),
        ("enabled", "must be a JSON object"),
    ],
)
def test_bad_override_json_is_rejected_with_a_clear_message(doc: object, message: str) -> None:
    with pytest.raises(InvalidAutoScalePolicy, match=message):
        AutoScalePolicyOverride.from_json(doc)


def test_topic_override_is_read_from_the_layouts_auto_scale_policy() -> None:
    layout = SegmentLayout.initial(1).with_auto_scale_policy({"maxSegments": 8, "enabled": True})
    assert layout.auto_scale_policy is not None
    override = AutoScalePolicyOverride.from_json(layout.auto_scale_policy)
    assert override == AutoScalePolicyOverride(max_segments=8, enabled=True)


def test_resolution_without_overrides_is_the_broker_policy() -> None:
    broker = AutoScalePolicy(max_segments=32)
    assert resolve_policy(broker, None, None) is broker


def test_most_specific_level_wins_per_field_and_unset_fields_fall_through() -> None:
    broker = AutoScalePolicy(max_segments=32, max_dag_depth=5)
    namespace = AutoScalePolicyOverride(max_segments=16, merge_window_ms=60_000)
    topic = AutoScalePolicyOverride(max_segments=8)
    resolved = resolve_policy(broker, namespace, topic)
    assert resolved.max_segments == 8  # topic
    assert resolved.merge_window_ms == 60_000  # namespace
    assert resolved.max_dag_depth == 5  # broker
    assert resolved.split_cooldown_ms == 60_000  # PIP default via broker


def test_enabled_false_at_the_namespace_opts_out_unless_the_topic_opts_back_in() -> None:
    broker = AutoScalePolicy()
    off = AutoScalePolicyOverride(enabled=False)
    assert resolve_policy(broker, off, None).enabled is False
    assert resolve_policy(broker, off, AutoScalePolicyOverride(max_segments=4)).enabled is False
    assert resolve_policy(broker, off, AutoScalePolicyOverride(enabled=True)).enabled is True
    assert resolve_policy(broker, None, off).enabled is False
    cluster_off = AutoScalePolicy(enabled=False)
    assert resolve_policy(cluster_off, None, None).enabled is False
    assert resolve_policy(cluster_off, AutoScalePolicyOverride(enabled=True), None).enabled


def test_resolution_that_breaks_the_dead_band_is_rejected_naming_the_level() -> None:
    namespace = AutoScalePolicyOverride(merge_msg_rate_in_threshold=4_000.0)
    topic = AutoScalePolicyOverride(split_msg_rate_in_threshold=3_000.0)
    with pytest.raises(InvalidAutoScalePolicy, match="topic auto-scale override"):
        resolve_policy(AutoScalePolicy(), namespace, topic)
    with pytest.raises(InvalidAutoScalePolicy, match="namespace auto-scale override"):
        resolve_policy(AutoScalePolicy(), AutoScalePolicyOverride(min_segments=99), None)


def test_an_override_setting_a_pair_is_checked_after_resolution_not_against_defaults() -> None:
    # split 300 alone is below the broker's default merge threshold (1000); with merge 30 set at
    # the same level the pair is fine, whichever level sets it.
    pair = AutoScalePolicyOverride(split_msg_rate_in_threshold=300, merge_msg_rate_in_threshold=30)
    for namespace, topic in ((pair, None), (None, pair)):
        resolved = resolve_policy(AutoScalePolicy(), namespace, topic)
        assert resolved.split_msg_rate_in_threshold == 300
        assert resolved.merge_msg_rate_in_threshold == 30
    # Split across levels: the topic's split is checked against the namespace's merge.
    resolved = resolve_policy(
        AutoScalePolicy(),
        AutoScalePolicyOverride(merge_msg_rate_in_threshold=30),
        AutoScalePolicyOverride(split_msg_rate_in_threshold=300),
    )
    assert (resolved.split_msg_rate_in_threshold, resolved.merge_msg_rate_in_threshold) == (
        300,
        30,
    )
    # The same for minSegments/maxSegments: min 80 alone exceeds the default max of 64.
    resolved = resolve_policy(
        AutoScalePolicy(), None, AutoScalePolicyOverride(min_segments=80, max_segments=100)
    )
    assert (resolved.min_segments, resolved.max_segments) == (80, 100)


def test_an_override_value_alone_is_only_checked_for_type_and_range() -> None:
    # Building the override never compares a value with a default ...
    override = AutoScalePolicyOverride(split_msg_rate_in_threshold=300, min_segments=500)
    assert override.set_fields() == {"split_msg_rate_in_threshold": 300.0, "min_segments": 500}
    # ... but a value out of range on its own is refused at once, naming its field.
    with pytest.raises(InvalidAutoScalePolicy, match="maxSegments must be <= 65536") as info:
        AutoScalePolicyOverride(max_segments=70_000)
    assert info.value.fields == ("max_segments",)


def test_an_override_conflict_names_the_level_both_keys_and_where_each_value_came_from() -> None:
    namespace = AutoScalePolicyOverride(
        split_msg_rate_in_threshold=300, merge_msg_rate_in_threshold=30
    )
    topic = AutoScalePolicyOverride(merge_msg_rate_in_threshold=500)
    with pytest.raises(InvalidAutoScalePolicy) as info:
        resolve_policy(AutoScalePolicy(), namespace, topic)
    assert str(info.value) == (
        "the topic auto-scale override makes the policy invalid: splitMsgRateInThreshold "
        "(300, from the namespace) must be above mergeMsgRateInThreshold (500, from the topic): "
        "the gap is the dead band that prevents flip-flopping"
    )
    assert set(info.value.fields) == {"split_msg_rate_in_threshold", "merge_msg_rate_in_threshold"}
    with pytest.raises(InvalidAutoScalePolicy) as info:
        resolve_policy(
            AutoScalePolicy(max_segments=100),
            AutoScalePolicyOverride(min_segments=80),
            AutoScalePolicyOverride(max_segments=50),
        )
    assert (
        "minSegments (80, from the namespace) must not exceed maxSegments (50, from the topic)"
        in (str(info.value))
    )
    # A lone override value that conflicts with the broker's value says so.
    with pytest.raises(
        InvalidAutoScalePolicy, match=r"mergeMsgRateInThreshold \(1000, from the broker\)"
    ):
        resolve_policy(
            AutoScalePolicy(), AutoScalePolicyOverride(split_msg_rate_in_threshold=300), None
        )


def test_a_broken_namespace_override_is_reported_even_if_the_topic_would_fix_it() -> None:
    # The namespace's own effective policy (over the broker's) must be valid: topics without an
    # override of their own get it.
    namespace = AutoScalePolicyOverride(merge_msg_rate_in_threshold=20_000)
    topic = AutoScalePolicyOverride(split_msg_rate_in_threshold=50_000)
    with pytest.raises(InvalidAutoScalePolicy, match="the namespace auto-scale override"):
        resolve_policy(AutoScalePolicy(), namespace, topic)


def test_broker_config_pair_consistent_only_together_is_accepted() -> None:
    policy = AutoScalePolicy.from_broker_config(
        {
            "scalableTopicSplitMsgRateInThreshold": "300",
            "scalableTopicMergeMsgRateInThreshold": "30",
        }
    )
    assert (policy.split_msg_rate_in_threshold, policy.merge_msg_rate_in_threshold) == (300, 30)
    with pytest.raises(InvalidAutoScalePolicy) as info:
        AutoScalePolicy.from_broker_config(
            {
                "scalableTopicSplitMsgRateInThreshold": "300",
                "scalableTopicMergeMsgRateInThreshold": "500",
            }
        )
    assert str(info.value).startswith(
        "scalableTopicSplitMsgRateInThreshold=300 must be above "
        "scalableTopicMergeMsgRateInThreshold=500"
    )
    assert (
        broker_config_key("merge_msg_rate_in_threshold") == "scalableTopicMergeMsgRateInThreshold"
    )


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: AutoScalePolicy(min_segments=5, max_segments=4),
            "minSegments (5) must not exceed maxSegments (4)",
        ),
        (
            lambda: AutoScalePolicy(split_msg_rate_in_threshold=999.5),
            "splitMsgRateInThreshold (999.5) must be above mergeMsgRateInThreshold (1000): the gap "
            "is the dead band that prevents flip-flopping",
        ),
        (
            lambda: AutoScalePolicy(
                split_bytes_rate_in_threshold=1e18, merge_bytes_rate_in_threshold=1e18
            ),
            "splitBytesRateInThreshold (1e+18) must be above mergeBytesRateInThreshold (1e+18): "
            "the gap is the dead band that prevents flip-flopping",
        ),
        (
            lambda: AutoScalePolicy.from_broker_config({"scalableTopicMaxSegments": "0"}),
            "scalableTopicMaxSegments must be >= 1, got 0",
        ),
        (
            lambda: AutoScalePolicy.from_broker_config({"scalableTopicMinSegments": "65"}),
            "scalableTopicMinSegments=65 must not exceed scalableTopicMaxSegments (default 64)",
        ),
        (
            lambda: AutoScalePolicyOverride.from_json([]),
            "an auto-scale policy override must be a JSON object, got list",
        ),
        (
            lambda: AutoScalePolicyOverride.from_json({5: 1}),
            "unknown auto-scale policy key 5; known keys: autoScaleIntervalMs, enabled, "
            "loadReportIntervalMs, loadReportRateChangeThreshold, maxDagDepth, maxSegments, "
            "mergeBytesRateInThreshold, mergeBytesRateOutThreshold, mergeCooldownMs, "
            "mergeMsgRateInThreshold, mergeMsgRateOutThreshold, mergeWindowMs, minSegments, "
            "splitBytesRateInThreshold, splitBytesRateOutThreshold, splitCooldownMs, "
            "splitMsgRateInThreshold, splitMsgRateOutThreshold",
        ),
    ],
)
def test_policy_errors_word_for_word(build: Callable[[], object], message: str) -> None:
    with pytest.raises(InvalidAutoScalePolicy) as info:
        build()
    assert str(info.value) == message


# --------------------------------------------------------------------------- load records


PIP_EXAMPLE_LOAD = {
    "msgRateIn": 12000.0,
    "bytesRateIn": 64000000.0,
    "msgRateOut": 48000.0,
    "bytesRateOut": 256000000.0,
}


def test_segment_load_stats_json_matches_the_pip_example() -> None:
    record = SegmentLoad.from_json(PIP_EXAMPLE_LOAD, modified_ms=1234)
    assert record == SegmentLoad(12000.0, 64e6, 48000.0, 256e6, modified_ms=1234)
    assert record.to_json() == PIP_EXAMPLE_LOAD
    assert "modified" not in json.dumps(record.to_json())
    assert SegmentLoad.decode(record.encode(), modified_ms=1234) == record


def test_segment_load_accepts_integers_and_ignores_unknown_fields() -> None:
    doc = {"msgRateIn": 1, "bytesRateIn": 2, "msgRateOut": 3, "bytesRateOut": 4, "extra": "x"}
    record = SegmentLoad.from_json(doc, modified_ms=0)
    assert record.rates == (1.0, 2.0, 3.0, 4.0)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"msgRateIn": 1, "bytesRateIn": 2, "msgRateOut": 3}', "lacks bytesRateOut"),
        (b'{"msgRateIn": "1", "bytesRateIn": 2, "msgRateOut": 3, "bytesRateOut": 4}', "number"),
        (b'{"msgRateIn": -1, "bytesRateIn": 2, "msgRateOut": 3, "bytesRateOut": 4}', ">= 0"),
        (b'{"msgRateIn": NaN, "bytesRateIn": 2, "msgRateOut": 3, "bytesRateOut": 4}', "finite"),
        (b'{"msgRateIn": true, "bytesRateIn": 2, "msgRateOut": 3, "bytesRateOut": 4}', "number"),
        (
            b'{"msgRateIn": 1'
            + b"0" * 400
            + b', "bytesRateIn": 2, "msgRateOut": 3, "bytesRateOut": 4}',
            "finite",
        ),
    ],
)
def test_corrupt_load_record_is_rejected(data: bytes, message: str) -> None:
    with pytest.raises(InvalidAutoScalePolicy, match=message):
        SegmentLoad.decode(data, modified_ms=0)


def test_first_load_report_always_writes() -> None:
    assert is_material_change(None, load(), 0.25)
    assert is_material_change(None, load(5.0), 0.25)


def test_immaterial_load_changes_are_skipped() -> None:
    last = load(100.0, 1_000.0, 200.0, 2_000.0)
    assert not is_material_change(last, last, 0.25)
    assert not is_material_change(last, load(125.0, 750.0, 240.0, 2_490.0), 0.25)


@pytest.mark.parametrize("metric", range(4))
def test_a_change_beyond_the_threshold_on_any_metric_is_material(metric: int) -> None:
    base = [100.0, 1_000.0, 200.0, 2_000.0]
    up, down = list(base), list(base)
    up[metric] *= 1.26
    down[metric] *= 0.74
    last = load(*base)
    assert is_material_change(last, load(*up), 0.25)
    assert is_material_change(last, load(*down), 0.25)


def test_crossing_zero_in_either_direction_is_material() -> None:
    assert is_material_change(load(0.0), load(0.001), 0.25)
    assert is_material_change(load(5.0), load(0.0), 5.0)  # even past a 500 % threshold
    assert not is_material_change(load(0.0), load(0.0), 0.25)


def test_material_change_threshold_is_validated() -> None:
    with pytest.raises(InvalidAutoScalePolicy):
        is_material_change(None, load(), -0.1)
    with pytest.raises(InvalidAutoScalePolicy):
        is_material_change(None, load(), float("nan"))


def test_load_record_needs_an_integer_modified_time() -> None:
    with pytest.raises(InvalidAutoScalePolicy, match="modified time"):
        SegmentLoad(1.0, 1.0, 1.0, 1.0, modified_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidAutoScalePolicy, match="modified time"):
        SegmentLoad.from_json(PIP_EXAMPLE_LOAD, modified_ms=None)  # type: ignore[arg-type]


def test_an_override_parses_from_text_with_broker_conf_units() -> None:
    override = AutoScalePolicyOverride.from_text(
        {
            "enabled": "false",
            "split_cooldown_ms": "30s",
            "merge_window_ms": "250ms",
            "max_segments": "16",
            "split_bytes_rate_in_threshold": "20MB",
            "merge_msg_rate_in_threshold": "200",
            "load_report_rate_change_threshold": "10%",
        }
    )
    assert override.to_json() == {
        "enabled": False,
        "maxSegments": 16,
        "splitCooldownMs": 30_000,
        "mergeWindowMs": 250,
        "splitBytesRateInThreshold": 20_000_000.0,
        "mergeMsgRateInThreshold": 200.0,
        "loadReportRateChangeThreshold": 0.1,
    }
    assert AutoScalePolicyOverride.from_text({}) == AutoScalePolicyOverride()


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"split_cooldown_ms": "soon"}, "splitCooldownMs"),
        ({"max_segments": "-3"}, "maxSegments"),
        ({"enabled": "maybe"}, "enabled"),
        ({"merge_bytes_rate_in_threshold": "5 parsecs"}, "mergeBytesRateInThreshold"),
    ],
)
def test_an_override_from_bad_text_names_its_key(settings: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidAutoScalePolicy, match=named) as caught:
        AutoScalePolicyOverride.from_text(settings)
    assert caught.value.fields == (next(iter(settings)),)
    with pytest.raises(InvalidAutoScalePolicy, match="unknown auto-scale policy setting 'bogus'"):
        AutoScalePolicyOverride.from_text({"bogus": "1"})
