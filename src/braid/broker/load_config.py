"""The load manager's settings: Pulsar's ``loadBalancer*`` keys of ``broker.conf`` (ADR 0050).

One table, :data:`LOAD_BALANCER_KEYS`, names each key, its Pulsar default and its parser;
:class:`LoadBalancerSettings` is the validated, immutable result the load manager reads. The
configuration loader keeps these keys' raw text (like the ``scalableTopic*`` keys) and checks them
with :func:`check_load_balancer_settings` when the configuration is built, so a bad value stops
the broker at start with the key named.

Differences from Pulsar, on purpose: the ``...Minutes`` intervals accept fractions (``0.05`` is
3 s: the cluster tests shed within seconds); ``loadBalancerOverrideBrokerNicSpeedGbps`` is the
only source of the NIC speed (unset: bandwidth does not count, as in Pulsar when the NIC speed
cannot be read).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from braid.broker.config_values import parse_bool, parse_int, parse_number, parse_ratio
from braid.core.errors import InvalidInputError


class InvalidLoadBalancerSetting(InvalidInputError):
    """A ``loadBalancer*`` key with a value that does not parse."""

    def __init__(self, key: str, value: str, reason: str) -> None:
        self.key, self.value, self.reason = key, value, reason
        super().__init__(f"invalid configuration {key}={value!r}: {reason}")


@dataclass(frozen=True)
class LoadBalancerSettings:
    """What the load manager does and when (defaults: Pulsar's)."""

    #: ``loadBalancerEnabled``: the leader places bundles by load, sheds and splits.
    enabled: bool = True
    #: ``loadBalancerSheddingEnabled``: the leader unloads bundles from overloaded brokers.
    shedding_enabled: bool = True
    shedding_interval_minutes: float = 1.0
    #: A bundle unloaded less than this ago is not shed again.
    shedding_grace_period_minutes: float = 30.0
    #: ThresholdShedder: a broker more than this many percentage points above the average
    #: (weighted, smoothed) resource usage sheds.
    broker_threshold_shedder_percentage: float = 10.0
    #: Weight of the history in the smoothed usage (``0.9``: new = 0.9 old + 0.1 current).
    history_resource_percentage: float = 0.9
    #: A broker sheds only when it would move at least this many MB/s of throughput.
    bundle_unload_min_throughput_threshold: float = 10.0
    cpu_resource_weight: float = 1.0
    memory_resource_weight: float = 1.0
    direct_memory_resource_weight: float = 1.0
    bandwith_in_resource_weight: float = 1.0
    bandwith_out_resource_weight: float = 1.0
    #: Placement: a broker whose weighted usage is above this percentage gets no new bundle
    #: while another broker is below it.
    broker_overloaded_threshold_percentage: float = 85.0
    #: Load reports: written at most this often, ...
    report_update_min_interval_millis: int = 5000
    #: ... when the usage moved more than this percentage, and at least this often.
    report_update_threshold_percentage: float = 10.0
    report_update_max_interval_minutes: float = 15.0
    #: The NIC speed that bandwidth usage is measured against (``None``: bandwidth not counted).
    override_broker_nic_speed_gbps: float | None = None
    #: Bundle splits: the leader splits a bundle over any of these limits (sustained for
    #: ``split_condition_hit_count_threshold`` checks) while its namespace has fewer than
    #: ``namespace_maximum_bundles`` bundles.
    auto_bundle_split_enabled: bool = True
    auto_unload_split_bundles_enabled: bool = True
    namespace_bundle_max_topics: int = 1000
    namespace_bundle_max_sessions: int = 1000
    namespace_bundle_max_msg_rate: int = 30000
    namespace_bundle_max_bandwidth_mbytes: int = 100
    namespace_maximum_bundles: int = 128
    namespace_bundle_split_condition_hit_count_threshold: int = 3
    #: ``brokerShutdownTimeoutMs``: how long SIGTERM's hand-over of the bundles may take.
    broker_shutdown_timeout_ms: int = 60000

    @property
    def shedding_interval_s(self) -> float:
        return self.shedding_interval_minutes * 60.0

    @property
    def shedding_grace_period_s(self) -> float:
        return self.shedding_grace_period_minutes * 60.0

    @property
    def report_interval_s(self) -> float:
        return self.report_update_min_interval_millis / 1000.0

    @property
    def report_max_interval_s(self) -> float:
        return self.report_update_max_interval_minutes * 60.0

    @classmethod
    def from_raw(cls, raw: Mapping[str, str]) -> LoadBalancerSettings:
        """Settings from ``broker.conf`` text (unknown keys ignored; empty = default).

        Raises:
            InvalidLoadBalancerSetting: a value that does not parse, naming its key.
        """
        values: dict[str, Any] = {}
        for key, text in raw.items():
            spec = LOAD_BALANCER_KEYS.get(key)
            if spec is None or not text.strip():
                continue
            attribute, parse = spec
            try:
                values[attribute] = parse(text.strip())
            except ValueError as exc:
                raise InvalidLoadBalancerSetting(key, text.strip(), str(exc)) from None
        return cls(**values)


_PCT = parse_number(0.0, 100.0)
_WEIGHT = parse_number(0.0)

#: Every key: ``broker.conf`` name -> (:class:`LoadBalancerSettings` attribute, parser).
LOAD_BALANCER_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "loadBalancerEnabled": ("enabled", parse_bool),
    "loadBalancerSheddingEnabled": ("shedding_enabled", parse_bool),
    "loadBalancerSheddingIntervalMinutes": ("shedding_interval_minutes", parse_number(0.001)),
    "loadBalancerSheddingGracePeriodMinutes": ("shedding_grace_period_minutes", parse_number(0.0)),
    "loadBalancerBrokerThresholdShedderPercentage": ("broker_threshold_shedder_percentage", _PCT),
    "loadBalancerHistoryResourcePercentage": ("history_resource_percentage", parse_ratio),
    "loadBalancerBundleUnloadMinThroughputThreshold": (
        "bundle_unload_min_throughput_threshold",
        parse_number(0.0),
    ),
    "loadBalancerCPUResourceWeight": ("cpu_resource_weight", _WEIGHT),
    "loadBalancerMemoryResourceWeight": ("memory_resource_weight", _WEIGHT),
    "loadBalancerDirectMemoryResourceWeight": ("direct_memory_resource_weight", _WEIGHT),
    "loadBalancerBandwithInResourceWeight": ("bandwith_in_resource_weight", _WEIGHT),
    "loadBalancerBandwithOutResourceWeight": ("bandwith_out_resource_weight", _WEIGHT),
    "loadBalancerBrokerOverloadedThresholdPercentage": (
        "broker_overloaded_threshold_percentage",
        parse_number(0.0),
    ),
    "loadBalancerReportUpdateMinIntervalMillis": (
        "report_update_min_interval_millis",
        parse_int(100),
    ),
    "loadBalancerReportUpdateThresholdPercentage": ("report_update_threshold_percentage", _PCT),
    "loadBalancerReportUpdateMaxIntervalMinutes": (
        "report_update_max_interval_minutes",
        parse_number(0.001),
    ),
    "loadBalancerOverrideBrokerNicSpeedGbps": (
        "override_broker_nic_speed_gbps",
        parse_number(0.000001),
    ),
    "loadBalancerAutoBundleSplitEnabled": ("auto_bundle_split_enabled", parse_bool),
    "loadBalancerAutoUnloadSplitBundlesEnabled": (
        "auto_unload_split_bundles_enabled",
        parse_bool,
    ),
    "loadBalancerNamespaceBundleMaxTopics": ("namespace_bundle_max_topics", parse_int(1)),
    "loadBalancerNamespaceBundleMaxSessions": ("namespace_bundle_max_sessions", parse_int(0)),
    "loadBalancerNamespaceBundleMaxMsgRate": ("namespace_bundle_max_msg_rate", parse_int(1)),
    "loadBalancerNamespaceBundleMaxBandwidthMbytes": (
        "namespace_bundle_max_bandwidth_mbytes",
        parse_int(1),
    ),
    "loadBalancerNamespaceMaximumBundles": ("namespace_maximum_bundles", parse_int(1)),
    "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": (
        "namespace_bundle_split_condition_hit_count_threshold",
        parse_int(1),
    ),
    "brokerShutdownTimeoutMs": ("broker_shutdown_timeout_ms", parse_int(0)),
}


def check_load_balancer_settings(raw: Mapping[str, str]) -> None:
    """Raise :class:`InvalidLoadBalancerSetting` when a key's value does not parse."""
    LoadBalancerSettings.from_raw(raw)


__all__ = [
    "LOAD_BALANCER_KEYS",
    "InvalidLoadBalancerSetting",
    "LoadBalancerSettings",
    "check_load_balancer_settings",
]
