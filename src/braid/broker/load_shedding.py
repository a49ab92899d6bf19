"""Load shedding with Pulsar's ``ThresholdShedder`` semantics: which bundles the leader unloads.

Each round (every ``loadBalancerSheddingIntervalMinutes``) the leader feeds the brokers' latest
reports to :meth:`ThresholdShedder.find_bundles_for_unloading`:

1. each broker's usage is its most used resource, weighted
   (:meth:`~braid.broker.load_data.LocalBrokerData.max_resource_usage_with_weight`), smoothed
   over rounds: ``avg = old * h + current * (1 - h)`` with ``h =
   loadBalancerHistoryResourcePercentage`` (the first round takes the current usage);
2. the cluster's average is the mean of those; a broker sheds when its usage is at least the
   average plus ``loadBalancerBrokerThresholdShedderPercentage`` points;
3. it moves ``usage - average - threshold + 5 %`` of its throughput (in + out): its bundles,
   the busiest first, until that much is marked (at least one bundle). It sheds nothing when that
   is less than ``loadBalancerBundleUnloadMinThroughputThreshold`` MB/s, when it owns a single
   bundle, or for bundles unloaded less than ``loadBalancerSheddingGracePeriodMinutes`` ago.

Pure: the caller passes the time and keeps the returned decisions; the only state is the smoothed
usage per broker (forgotten when a broker leaves).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from braid.broker.load_config import LoadBalancerSettings
from braid.broker.load_data import LocalBrokerData, ResourceWeights

#: Pulsar's ``ADDITIONAL_THRESHOLD_PERCENT_MARGIN``: shed a little more than the excess.
ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05
_MB = 1024 * 1024


def weights_of(settings: LoadBalancerSettings) -> ResourceWeights:
    return ResourceWeights(
        settings.cpu_resource_weight,
        settings.memory_resource_weight,
        settings.direct_memory_resource_weight,
        settings.bandwith_in_resource_weight,
        settings.bandwith_out_resource_weight,
    )


@dataclass(frozen=True)
class Unload:
    """Unload ``bundle`` from ``broker`` (and why)."""

    broker: str
    bundle: str
    reason: str


@dataclass
class ThresholdShedder:
    """Pulsar's ``ThresholdShedder`` (see the module docstring)."""

    settings: LoadBalancerSettings
    #: Smoothed usage (fraction) per broker id.
    avg_usage: dict[str, float] = field(default_factory=dict)

    def update_usage(self, brokers: Mapping[str, LocalBrokerData]) -> dict[str, float]:
        """Fold this round's reports into the smoothed usages; returns them."""
        weights = weights_of(self.settings)
        history = self.settings.history_resource_percentage
        for gone in set(self.avg_usage) - set(brokers):
            del self.avg_usage[gone]
        for broker, data in brokers.items():
            current = data.max_resource_usage_with_weight(weights)
            old = self.avg_usage.get(broker)
            self.avg_usage[broker] = (
                current if old is None else old * history + current * (1.0 - history)
            )
        return dict(self.avg_usage)

    def find_bundles_for_unloading(
        self,
        brokers: Mapping[str, LocalBrokerData],
        recently_unloaded: Mapping[str, float],
        now: float,
    ) -> list[Unload]:
        """The bundles to unload this round.

        Args:
            brokers: every live broker's latest report, by broker id.
            recently_unloaded: bundle name -> when it was last unloaded (the caller's clock).
            now: the caller's clock now.
        """
        usages = self.update_usage(brokers)
        if len(usages) < 2:
            return []
        average = sum(usages.values()) / len(usages)
        if average <= 0:
            return []
        threshold = self.settings.broker_threshold_shedder_percentage / 100.0
        grace = self.settings.shedding_grace_period_s
        min_throughput = self.settings.bundle_unload_min_throughput_threshold * _MB
        decisions: list[Unload] = []
        for broker, usage in sorted(usages.items()):
            if usage < average + threshold:
                continue
            data = brokers[broker]
            share = usage - average - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            to_offload = (data.msg_throughput_in + data.msg_throughput_out) * share
            if to_offload < min_throughput or len(data.bundle_stats) <= 1:
                continue
            candidates = sorted(
                (
                    (stats.throughput, name)
                    for name, stats in data.bundle_stats.items()
                    if now - recently_unloaded.get(name, float("-inf")) >= grace
                ),
                key=lambda pair: (-pair[0], pair[1]),
            )
            marked = 0.0
            for throughput, name in candidates:
                if decisions and decisions[-1].broker == broker and marked >= to_offload:
                    break
                marked += throughput
                decisions.append(
                    Unload(
                        broker,
                        name,
                        f"usage {usage:.1%} >= average {average:.1%} + threshold "
                        f"{threshold:.0%}: moving {to_offload / _MB:.2f} MB/s",
                    )
                )
        return decisions


__all__ = ["ADDITIONAL_THRESHOLD_PERCENT_MARGIN", "ThresholdShedder", "Unload", "weights_of"]
