"""PIP-483's per-topic auto-scale counters, kept per broker for ``/metrics`` and topic stats.

The auto-scaler of a topic's controller leader bumps them; the Prometheus collector of the admin
API reads them at scrape time (``pulsar_scalable_topic_auto_splits_total`` and friends, labelled
by topic). They live in the broker's :class:`AutoScaleMetrics`, not in the auto-scaler, so a
controller that is released and started again on this broker keeps counting from where it was.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TopicAutoScaleCounters:
    """What the auto-scaler of one topic did, or was kept from doing, on this broker."""

    auto_splits: int = 0
    auto_merges: int = 0
    #: Evaluations that wanted a split while the topic had maxSegments active segments.
    split_suppressed_max_segments: int = 0
    #: Evaluations that found a durably cold pair whose lineage is at maxDagDepth merges.
    merge_suppressed_max_depth: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "autoSplits": self.auto_splits,
            "autoMerges": self.auto_merges,
            "splitSuppressedMaxSegments": self.split_suppressed_max_segments,
            "mergeSuppressedMaxDepth": self.merge_suppressed_max_depth,
        }


class AutoScaleMetrics:
    """The counters of every topic this broker has auto-scaled, by topic name."""

    def __init__(self) -> None:
        self._by_topic: dict[str, TopicAutoScaleCounters] = {}

    def of(self, topic: str) -> TopicAutoScaleCounters:
        """The topic's counters (created at zero on first use)."""
        counters = self._by_topic.get(topic)
        if counters is None:
            counters = self._by_topic[topic] = TopicAutoScaleCounters()
        return counters

    def get(self, topic: str) -> TopicAutoScaleCounters | None:
        return self._by_topic.get(topic)

    def items(self) -> list[tuple[str, TopicAutoScaleCounters]]:
        """``(topic, counters)`` sorted by topic."""
        return sorted(self._by_topic.items())

    def forget(self, topic: str) -> None:
        """Drop a deleted topic's counters."""
        self._by_topic.pop(topic, None)


__all__ = ["AutoScaleMetrics", "TopicAutoScaleCounters"]
