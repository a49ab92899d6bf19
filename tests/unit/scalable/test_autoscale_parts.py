"""The auto-scaler's pure parts: cooldown memory from the layout, decision records, counters."""

from __future__ import annotations

from braid.core.layout import SegmentLayout
from braid.scalable.autoscale_metrics import AutoScaleMetrics
from braid.scalable.autoscaler import DecisionRecord, Trigger, last_changes_in


def test_a_new_leader_remembers_the_last_split_and_merge_from_the_layout() -> None:
    layout = SegmentLayout.initial(2, now_ms=1_000)
    assert last_changes_in(layout) == (None, None)  # initial segments have no parents
    split = layout.split_segment(0, now_ms=5_000)
    assert last_changes_in(split) == (5_000, None)
    merged = split.merge_segments([3, 1], now_ms=9_000)
    assert last_changes_in(merged) == (5_000, 9_000)
    again = merged.split_segment(4, now_ms=12_000)
    assert last_changes_in(again) == (12_000, 9_000)


def test_a_decision_record_as_stats_show_it() -> None:
    record = DecisionRecord(7, "tick", "split", "load-driven", "hot", (3,), 0xC000)
    assert record.to_json() == {
        "atMs": 7,
        "trigger": "tick",
        "action": "split",
        "reason": "load-driven",
        "detail": "hot",
        "segmentIds": [3],
        "splitHash": 0xC000,
    }
    quiet = DecisionRecord(8, "membership", "none", "split_cooldown", "wait").to_json()
    assert "segmentIds" not in quiet and "splitHash" not in quiet


def test_only_membership_evaluations_are_partial() -> None:
    assert [t for t in Trigger if not t.full] == [Trigger.MEMBERSHIP]


def test_counters_are_per_topic_and_forgotten_with_it() -> None:
    metrics = AutoScaleMetrics()
    metrics.of("topic://a/b/c").auto_splits += 2
    metrics.of("topic://a/b/a").merge_suppressed_max_depth += 1
    assert [name for name, _ in metrics.items()] == ["topic://a/b/a", "topic://a/b/c"]
    assert metrics.of("topic://a/b/c").to_json() == {
        "autoSplits": 2,
        "autoMerges": 0,
        "splitSuppressedMaxSegments": 0,
        "mergeSuppressedMaxDepth": 0,
    }
    metrics.forget("topic://a/b/c")
    assert metrics.get("topic://a/b/c") is None
