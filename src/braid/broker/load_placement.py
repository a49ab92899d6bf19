"""Where the leader puts a bundle, and which bundles it splits: the load manager's two pure
decisions besides shedding.

**Placement** (:func:`least_loaded`, Pulsar's default ``LeastLongTermMessageRate``): a broker
whose weighted maximum resource usage is above ``loadBalancerBrokerOverloadedThresholdPercentage``
is overloaded and is chosen only when every candidate is; among the others, the lowest message
rate (in + out, over every bundle it reports) wins; ties - an idle cluster - go to the broker
with the fewest bundles, counting the bundles the leader assigned that its report does not list
yet (a burst of lookups spreads before any report changes), then by the caller's tie-break -
the load manager passes each broker's rendezvous score for the bundle, so equals are told apart
differently for each bundle yet deterministically (Pulsar picks at random among equals); the
default is the lowest broker id. A broker that has not reported yet counts as idle with no
bundle.

**Splits** (:class:`BundleSplitDecider`, after Pulsar's ``BundleSplitterTask``): a bundle with at
least two topics goes over a limit when it has more than ``loadBalancerNamespaceBundleMaxTopics``
topics, more than ``...MaxSessions`` producers + consumers (0: no limit), more than
``...MaxMsgRate`` messages/s in + out, or more than ``...MaxBandwidthMbytes`` MB/s in + out. It
is split once it has been over a limit in
``loadBalancerNamespaceBundleSplitConditionHitCountThreshold`` consecutive checks and its
namespace has fewer than ``loadBalancerNamespaceMaximumBundles`` bundles (counting the splits
decided in the same check).

No I/O; the caller passes the reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from braid.broker.load_config import LoadBalancerSettings
from braid.broker.load_data import BundleStats, LocalBrokerData, ResourceWeights

_MB = 1024 * 1024


def least_loaded(
    candidates: Iterable[str],
    reports: Mapping[str, LocalBrokerData],
    weights: ResourceWeights,
    *,
    overloaded_threshold_percentage: float,
    pending: Mapping[str, int] | None = None,
    tie_break: Callable[[str], Any] | None = None,
) -> str | None:
    """The broker to give a bundle to (see the module docstring); ``None`` without candidates.

    Args:
        candidates: broker ids that may take the bundle.
        reports: the brokers' load reports (a missing one reads as idle).
        pending: bundles assigned to each broker that it does not own yet.
        tie_break: orders brokers equal on everything else (lowest first; default: their id).
    """
    pending = pending or {}
    limit = overloaded_threshold_percentage / 100.0
    order = tie_break or str
    scored: list[tuple[bool, float, int, Any, str]] = []
    for broker in candidates:
        report = reports.get(broker, LocalBrokerData())
        overloaded = report.max_resource_usage_with_weight(weights) > limit
        rate = sum(s.msg_rate for s in report.bundle_stats.values())
        bundles = len(report.bundle_stats) + pending.get(broker, 0)
        scored.append((overloaded, rate, bundles, order(broker), broker))
    return min(scored)[-1] if scored else None


def namespace_of(bundle_name: str) -> str:
    """``tenant/ns`` of ``tenant/ns/0xLO_0xHI``."""
    return bundle_name.rsplit("/", 1)[0]


@dataclass
class BundleSplitDecider:
    """Pulsar's ``BundleSplitterTask`` (see the module docstring)."""

    settings: LoadBalancerSettings
    #: Consecutive checks each bundle has been over a limit.
    hit_counts: dict[str, int] = field(default_factory=dict)

    def over_limit(self, stats: BundleStats) -> str | None:
        """Which limit ``stats`` is over (``None``: none, or fewer than two topics)."""
        s = self.settings
        if stats.topics < 2:
            return None
        if stats.topics > s.namespace_bundle_max_topics:
            return f"{stats.topics} topics > {s.namespace_bundle_max_topics}"
        if 0 < s.namespace_bundle_max_sessions < stats.sessions:
            return f"{stats.sessions} sessions > {s.namespace_bundle_max_sessions}"
        if stats.msg_rate > s.namespace_bundle_max_msg_rate:
            return f"{stats.msg_rate:.0f} msg/s > {s.namespace_bundle_max_msg_rate}"
        if stats.throughput > s.namespace_bundle_max_bandwidth_mbytes * _MB:
            return f"{stats.throughput / _MB:.1f} MB/s > {s.namespace_bundle_max_bandwidth_mbytes}"
        return None

    def find_bundles_to_split(
        self, reports: Mapping[str, LocalBrokerData], namespace_bundles: Mapping[str, int]
    ) -> list[tuple[str, str]]:
        """``(bundle, reason)`` of the bundles to split now.

        Args:
            reports: every live broker's report (their ``lastStats`` are the owned bundles).
            namespace_bundles: how many bundles each namespace (``tenant/ns``) has now.
        """
        counts = dict(namespace_bundles)
        over: dict[str, str] = {}
        for report in reports.values():
            for name, stats in report.bundle_stats.items():
                reason = self.over_limit(stats)
                if reason is not None:
                    over[name] = reason
        self.hit_counts = {name: self.hit_counts.get(name, 0) + 1 for name in over}
        needed = self.settings.namespace_bundle_split_condition_hit_count_threshold
        chosen: list[tuple[str, str]] = []
        for name in sorted(over):
            namespace = namespace_of(name)
            if self.hit_counts[name] < needed:
                continue
            if counts.get(namespace, 1) >= self.settings.namespace_maximum_bundles:
                continue
            counts[namespace] = counts.get(namespace, 1) + 1
            chosen.append((name, over[name]))
            del self.hit_counts[name]
        return chosen


__all__ = ["BundleSplitDecider", "least_loaded", "namespace_of"]
