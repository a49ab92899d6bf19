"""Load reports: what each broker tells the leader about itself (Pulsar's ``LocalBrokerData``).

Every broker writes its report into its own registry node ``/loadbalance/brokers/{host:port}``
(ephemeral, as Pulsar's modular load manager does), next to the registry fields
(``pulsarServiceUrl``, ``webServiceUrl``, ...): so one read gives the leader a broker's address
and load, and a dead broker's report disappears with it. The JSON keys are Pulsar's:

* resource usages ``cpu``, ``memory``, ``directMemory``, ``bandwidthIn``, ``bandwidthOut``, each
  ``{"usage", "limit"}`` (percent of the limit is what counts; a limit of 0 counts as 0 %);
* totals ``msgRateIn``, ``msgRateOut``, ``msgThroughputIn``, ``msgThroughputOut`` (bytes/s),
  ``numTopics``, ``numBundles``, ``numConsumers``, ``numProducers``;
* ``bundles`` (the owned bundles, ``tenant/ns/0xLO_0xHI``) and ``lastStats`` (per bundle,
  Pulsar's ``NamespaceBundleStats``: rates, throughputs, ``consumerCount``, ``producerCount``,
  ``topics``); ``lastUpdate`` in epoch milliseconds.

Immutable values and pure arithmetic; no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _float(doc: Mapping[str, Any], key: str) -> float:
    value = doc.get(key, 0.0)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


@dataclass(frozen=True)
class ResourceUsage:
    """One resource: ``usage`` out of ``limit`` (Pulsar's ``ResourceUsage``)."""

    usage: float = 0.0
    limit: float = 0.0

    @property
    def percent(self) -> float:
        """Usage in percent of the limit (0 without a limit)."""
        return 100.0 * self.usage / self.limit if self.limit > 0 else 0.0

    def to_json(self) -> dict[str, float]:
        return {"usage": self.usage, "limit": self.limit}

    @classmethod
    def from_json(cls, doc: object) -> ResourceUsage:
        return cls(_float(doc, "usage"), _float(doc, "limit")) if isinstance(doc, dict) else cls()


@dataclass(frozen=True)
class BundleStats:
    """One bundle's traffic on its owner (Pulsar's ``NamespaceBundleStats``)."""

    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    consumer_count: int = 0
    producer_count: int = 0
    topics: int = 0

    @property
    def throughput(self) -> float:
        """Bytes per second in and out: what ThresholdShedder moves."""
        return self.msg_throughput_in + self.msg_throughput_out

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def sessions(self) -> int:
        return self.consumer_count + self.producer_count

    def to_json(self) -> dict[str, Any]:
        return {
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
            "msgThroughputIn": self.msg_throughput_in,
            "msgThroughputOut": self.msg_throughput_out,
            "consumerCount": self.consumer_count,
            "producerCount": self.producer_count,
            "topics": self.topics,
        }

    @classmethod
    def from_json(cls, doc: object) -> BundleStats:
        if not isinstance(doc, dict):
            return cls()
        return cls(
            _float(doc, "msgRateIn"),
            _float(doc, "msgRateOut"),
            _float(doc, "msgThroughputIn"),
            _float(doc, "msgThroughputOut"),
            int(_float(doc, "consumerCount")),
            int(_float(doc, "producerCount")),
            int(_float(doc, "topics")),
        )


@dataclass(frozen=True)
class ResourceWeights:
    """How much each resource counts in a broker's usage (the ``loadBalancer*ResourceWeight``
    keys)."""

    cpu: float = 1.0
    memory: float = 1.0
    direct_memory: float = 1.0
    bandwidth_in: float = 1.0
    bandwidth_out: float = 1.0


@dataclass(frozen=True)
class LocalBrokerData:
    """One broker's load report (see the module docstring)."""

    cpu: ResourceUsage = ResourceUsage()
    memory: ResourceUsage = ResourceUsage()
    direct_memory: ResourceUsage = ResourceUsage()
    bandwidth_in: ResourceUsage = ResourceUsage()
    bandwidth_out: ResourceUsage = ResourceUsage()
    #: Per owned bundle (``tenant/ns/0xLO_0xHI``).
    bundle_stats: Mapping[str, BundleStats] = field(default_factory=dict)
    last_update_ms: int = 0

    @property
    def bundles(self) -> tuple[str, ...]:
        return tuple(sorted(self.bundle_stats))

    @property
    def msg_throughput_in(self) -> float:
        return sum(s.msg_throughput_in for s in self.bundle_stats.values())

    @property
    def msg_throughput_out(self) -> float:
        return sum(s.msg_throughput_out for s in self.bundle_stats.values())

    def max_resource_usage_with_weight(self, weights: ResourceWeights) -> float:
        """The most used resource, weighted, as a fraction (Pulsar's
        ``getMaxResourceUsageWithWeight``: ``max(percent * weight) / 100``)."""
        return (
            max(
                self.cpu.percent * weights.cpu,
                self.memory.percent * weights.memory,
                self.direct_memory.percent * weights.direct_memory,
                self.bandwidth_in.percent * weights.bandwidth_in,
                self.bandwidth_out.percent * weights.bandwidth_out,
            )
            / 100.0
        )

    def to_json(self) -> dict[str, Any]:
        stats = self.bundle_stats.values()
        return {
            "cpu": self.cpu.to_json(),
            "memory": self.memory.to_json(),
            "directMemory": self.direct_memory.to_json(),
            "bandwidthIn": self.bandwidth_in.to_json(),
            "bandwidthOut": self.bandwidth_out.to_json(),
            "msgRateIn": sum(s.msg_rate_in for s in stats),
            "msgRateOut": sum(s.msg_rate_out for s in stats),
            "msgThroughputIn": self.msg_throughput_in,
            "msgThroughputOut": self.msg_throughput_out,
            "numTopics": sum(s.topics for s in stats),
            "numBundles": len(self.bundle_stats),
            "numConsumers": sum(s.consumer_count for s in stats),
            "numProducers": sum(s.producer_count for s in stats),
            "bundles": list(self.bundles),
            "lastStats": {name: s.to_json() for name, s in sorted(self.bundle_stats.items())},
            "lastUpdate": self.last_update_ms,
        }

    @classmethod
    def from_json(cls, doc: object) -> LocalBrokerData:
        """The report in ``doc``; missing parts read as zero (a broker that has not reported)."""
        if not isinstance(doc, dict):
            return cls()
        raw_stats = doc.get("lastStats")
        stats = (
            {str(k): BundleStats.from_json(v) for k, v in raw_stats.items()}
            if isinstance(raw_stats, dict)
            else {}
        )
        for name in doc.get("bundles") or ():
            stats.setdefault(str(name), BundleStats())
        return cls(
            ResourceUsage.from_json(doc.get("cpu")),
            ResourceUsage.from_json(doc.get("memory")),
            ResourceUsage.from_json(doc.get("directMemory")),
            ResourceUsage.from_json(doc.get("bandwidthIn")),
            ResourceUsage.from_json(doc.get("bandwidthOut")),
            stats,
            int(_float(doc, "lastUpdate")),
        )

    @classmethod
    def decode(cls, raw: bytes) -> LocalBrokerData:
        try:
            return cls.from_json(json.loads(raw))
        except ValueError:
            return cls()


__all__ = ["BundleStats", "LocalBrokerData", "ResourceUsage", "ResourceWeights"]
