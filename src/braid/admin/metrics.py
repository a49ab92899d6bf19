"""``/metrics``: the broker's Prometheus text exposition, read at scrape time.

A custom ``prometheus_client`` collector walks the broker's state when scraped, so the hot paths
pay nothing (they only bump the integer counters they already keep):

* per topic loaded here (label ``topic``, plus ``cluster`` and ``namespace`` as Pulsar's):
  ``pulsar_in_messages_total``, ``pulsar_in_bytes_total``, ``pulsar_out_messages_total``,
  ``pulsar_out_bytes_total`` (cumulative since the topic was loaded), ``pulsar_producers_count``,
  ``pulsar_subscriptions_count`` and ``pulsar_msg_backlog`` (entries, all subscriptions);
* per subscription: ``pulsar_subscription_back_log`` (entries not yet acknowledged) and
  ``pulsar_subscription_consumers_count``;
* per scalable topic this broker leads (PIP-483, label ``topic``):
  ``pulsar_scalable_topic_active_segments``, ``pulsar_scalable_topic_auto_splits_total``,
  ``pulsar_scalable_topic_auto_merges_total``,
  ``pulsar_scalable_topic_split_suppressed_max_segments_total`` and
  ``pulsar_scalable_topic_merge_suppressed_max_depth_total``.
* PIP-470 storage-cluster switching (``braid.clusters.metrics.SwitchMetrics``):
  ``pulsar_bookie_cluster_active{cluster}`` (1 for the active cluster),
  ``pulsar_bookie_cluster_switch_state{state}`` (1 for the current one of PIP-470's states),
  ``pulsar_bookie_cluster_switch_total{result}``, ``pulsar_bookie_cluster_rollback_total``,
  ``migration_ledgers_built_total{kind}``, ``migration_ledgers_failed_total{kind}``,
  ``migration_ledger_id_conflict_total``, ``migration_ledgers_promoted_total{kind}``,
  ``migration_ledgers_promoted_via_rollover_total``, ``migration_promote_cas_retries_total``,
  ``migration_promote_deferred_total``, ``migration_ledgers_cleaned_total`` and
  ``migration_ledgers_reverted_total``, ``migration_ledgers_discarded_total``,
  ``migration_cursor_promote_forwarded_total``, ``migration_cursor_promote_served_total``,
  ``migration_cursor_promote_node_total``.

Each app gets its own registry (several brokers in one test process do not collide).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from braid.core.names import TopicName
from braid.core.storage_switch import SwitchPhase

if TYPE_CHECKING:
    from braid.clusters.service import StorageClusterService
    from braid.scalable.service import ScalableTopicService


class BrokerCollector(Collector):
    """Reads topic counters, backlogs and the auto-scale counters when scraped."""

    def __init__(
        self,
        topics: Mapping[str, Any],
        cluster: str,
        scalable: ScalableTopicService | None = None,
    ) -> None:
        self._topics = topics
        self._cluster = cluster
        self._scalable = scalable

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_metrics()
        if self._scalable is not None:
            yield from self._scalable_metrics(self._scalable)

    def _topic_metrics(self) -> Iterator[Metric]:
        labels = ["cluster", "namespace", "topic"]
        sub_labels = [*labels, "subscription"]
        in_messages = CounterMetricFamily(
            "pulsar_in_messages", "Messages published to the topic", labels=labels
        )
        in_bytes = CounterMetricFamily(
            "pulsar_in_bytes", "Bytes published to the topic", labels=labels
        )
        out_messages = CounterMetricFamily(
            "pulsar_out_messages", "Messages dispatched to the topic's consumers", labels=labels
        )
        out_bytes = CounterMetricFamily(
            "pulsar_out_bytes", "Bytes dispatched to the topic's consumers", labels=labels
        )
        producers = GaugeMetricFamily(
            "pulsar_producers_count", "Producers connected to the topic", labels=labels
        )
        subscriptions = GaugeMetricFamily(
            "pulsar_subscriptions_count", "Subscriptions of the topic", labels=labels
        )
        backlog = GaugeMetricFamily(
            "pulsar_msg_backlog", "Entries not yet acknowledged, all subscriptions", labels=labels
        )
        sub_backlog = GaugeMetricFamily(
            "pulsar_subscription_back_log",
            "Entries the subscription has not acknowledged yet",
            labels=sub_labels,
        )
        sub_consumers = GaugeMetricFamily(
            "pulsar_subscription_consumers_count",
            "Consumers attached to the subscription",
            labels=sub_labels,
        )
        for name, topic in sorted(self._topics.items()):
            if getattr(topic, "closed", False):
                continue
            values = [self._cluster, _namespace(name), name]
            counters = topic.counters
            in_messages.add_metric(values, counters.messages_in)
            in_bytes.add_metric(values, counters.bytes_in)
            out_messages.add_metric(values, counters.messages_out)
            out_bytes.add_metric(values, counters.bytes_out)
            producers.add_metric(values, len(topic.producers))
            subscriptions.add_metric(values, len(topic.subscriptions))
            total = 0
            for sub_name, sub in sorted(topic.subscriptions.items()):
                entries = sub.cursor.backlog()
                total += entries
                sub_backlog.add_metric([*values, sub_name], entries)
                sub_consumers.add_metric([*values, sub_name], len(sub.consumers))
            backlog.add_metric(values, total)
        yield from (
            in_messages,
            in_bytes,
            out_messages,
            out_bytes,
            producers,
            subscriptions,
            backlog,
            sub_backlog,
            sub_consumers,
        )

    def _scalable_metrics(self, scalable: ScalableTopicService) -> Iterator[Metric]:
        active = GaugeMetricFamily(
            "pulsar_scalable_topic_active_segments",
            "Active segments of the scalable topics this broker's controllers lead",
            labels=["topic"],
        )
        for scaler in scalable.auto_scale.scalers():
            controller = scaler.controller
            if controller.is_leader:
                try:
                    count = len(controller.layout.active_segments)
                except Exception:  # no layout loaded yet
                    continue
                active.add_metric([str(controller.topic)], count)
        yield active
        families = {
            "auto_splits": CounterMetricFamily(
                "pulsar_scalable_topic_auto_splits",
                "Splits the auto-scaler made",
                labels=["topic"],
            ),
            "auto_merges": CounterMetricFamily(
                "pulsar_scalable_topic_auto_merges",
                "Merges the auto-scaler made",
                labels=["topic"],
            ),
            "split_suppressed_max_segments": CounterMetricFamily(
                "pulsar_scalable_topic_split_suppressed_max_segments",
                "Evaluations that wanted a split while the topic was at maxSegments",
                labels=["topic"],
            ),
            "merge_suppressed_max_depth": CounterMetricFamily(
                "pulsar_scalable_topic_merge_suppressed_max_depth",
                "Evaluations that held back a merge because a lineage was at maxDagDepth",
                labels=["topic"],
            ),
        }
        for topic, counters in scalable.auto_scale.metrics.items():
            for attribute, family in families.items():
                family.add_metric([topic], getattr(counters, attribute))
        yield from families.values()


def _namespace(topic_name: str) -> str:
    try:
        return TopicName.parse(topic_name).namespace_name
    except Exception:
        return ""


class StorageSwitchCollector(Collector):
    """PIP-470's counters, read from the storage-cluster service when scraped."""

    def __init__(self, service: StorageClusterService) -> None:
        self._service = service

    def collect(self) -> Iterator[Metric]:
        m = self._service.metrics
        active = GaugeMetricFamily(
            "pulsar_bookie_cluster_active",
            "1 for the storage cluster new ledgers are created on",
            labels=["cluster"],
        )
        active.add_metric([self._service.active_name], 1)
        yield active
        state = GaugeMetricFamily(
            "pulsar_bookie_cluster_switch_state",
            "1 for the storage-cluster switch's current state (PIP-470's names)",
            labels=["state"],
        )
        for phase in SwitchPhase:
            state.add_metric([phase.value], 1 if phase is m.switch_state else 0)
        yield state
        switches = CounterMetricFamily(
            "pulsar_bookie_cluster_switch", "Storage-cluster switches", labels=["result"]
        )
        switches.add_metric(["success"], m.switch_success)
        switches.add_metric(["failure"], m.switch_failure)
        yield switches
        plain = (
            ("pulsar_bookie_cluster_rollback", "Switches rolled back", m.rollbacks),
            (
                "migration_ledger_id_conflict",
                "BUILD found the ledger id taken on the target (LedgerExists)",
                m.id_conflicts,
            ),
            (
                "migration_ledgers_promoted_via_rollover",
                "Cursors that rolled over to the new cluster instead of being promoted",
                m.promoted_via_rollover,
            ),
            (
                "migration_promote_cas_retries",
                "PROMOTE compare-and-swaps lost and retried",
                m.promote_cas_retries,
            ),
            (
                "migration_promote_deferred",
                "Ledgers whose PROMOTE exhausted its retries (retried by the next switch)",
                m.promote_deferred,
            ),
            (
                "migration_cursor_promote_forwarded",
                "Cursor PROMOTE/ROLLBACK requests forwarded to the broker owning the cursor",
                m.promote_forwarded,
            ),
            (
                "migration_cursor_promote_served",
                "Cursor PROMOTE/ROLLBACK requests served here for another broker's orchestrator",
                m.promote_served,
            ),
            (
                "migration_cursor_promote_node",
                "Cursors re-attributed by a CAS of their node (no broker had them open)",
                m.promote_via_node,
            ),
            ("migration_ledgers_cleaned", "Old-cluster copies deleted by CLEANUP", m.cleaned),
            ("migration_ledgers_reverted", "Attributions returned by ROLLBACK", m.reverted),
            (
                "migration_ledgers_discarded",
                "New-cluster copies deleted after a rollback's delay",
                m.discarded,
            ),
        )
        for name, doc, value in plain:
            family = CounterMetricFamily(name, doc)
            family.add_metric([], value)
            yield family
        for name, doc, counts in (
            ("migration_ledgers_built", "Ledgers copied by BUILD", m.built),
            ("migration_ledgers_failed", "Ledgers BUILD could not copy", m.failed),
            ("migration_ledgers_promoted", "Attributions moved by PROMOTE", m.promoted),
        ):
            family = CounterMetricFamily(name, doc, labels=["kind"])
            for kind in ("SCHEMA", "CURSOR"):
                family.add_metric([kind], counts.get(kind, 0))
            yield family


def metrics_registry(
    topics: Mapping[str, Any],
    cluster: str,
    scalable: ScalableTopicService | None = None,
    storage_clusters: StorageClusterService | None = None,
) -> CollectorRegistry:
    """A registry holding the broker's collector (and PIP-470's, when given)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(topics, cluster, scalable))
    if storage_clusters is not None:
        registry.register(StorageSwitchCollector(storage_clusters))
    return registry


__all__ = ["BrokerCollector", "StorageSwitchCollector", "metrics_registry"]
