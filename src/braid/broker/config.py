"""The broker's configuration: a ``broker.conf`` file, ``BRAID_*`` environment overrides, flags.

Keys use Pulsar's (and the PIPs') camelCase names so an operator's ``broker.conf`` knowledge
carries over (``brokerServicePort``, ``allowAutoTopicCreation``, ``scalableTopicMaxSegments``, ...);
the resulting :class:`BrokerConfig` exposes them as snake_case attributes.

Precedence, lowest to highest: built-in defaults, the file, the environment
(``BRAID_<key>=<value>``, e.g. ``BRAID_brokerServicePort=6651``), explicit overrides (command-line
flags). An empty value means "use the default", as in Pulsar's own ``broker.conf``. Unknown keys are
reported with a warning that names them (a typo must not pass silently); a value that does not parse
raises :class:`InvalidConfig` naming the key and the value.

The PIP-483 ``scalableTopic*`` auto-scale keys are kept as a raw ``{key: text}`` mapping
(:attr:`BrokerConfig.scalable_topic_settings`) because their parsing (durations such as ``1m``,
sizes such as ``50MB``) belongs to
``braid.core.autoscale_policy.AutoScalePolicy.from_broker_config``; loading runs that parser once,
on the settings merged from every source, so a bad value stops start-up with its key named and two
values that conflict stop it with both keys named — while a pair that is only consistent together
(``scalableTopicSplitMsgRateInThreshold=300`` with ``scalableTopicMergeMsgRateInThreshold=30``,
from the file, the environment or both) is accepted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from braid.broker.backlog_quota import BacklogQuotaDefaults, RetentionPolicy
from braid.broker.config_values import (
    parse_backlog_policy as _parse_backlog_policy,
)
from braid.broker.config_values import (
    parse_bookie_clusters as _parse_bookie_clusters,
)
from braid.broker.config_values import (
    parse_bool as _parse_bool,
)
from braid.broker.config_values import (
    parse_fraction as _parse_fraction,
)
from braid.broker.config_values import (
    parse_gc_thresholds as _parse_gc_thresholds,
)
from braid.broker.config_values import (
    parse_host as _parse_host,
)
from braid.broker.config_values import (
    parse_host_list as _parse_host_list,
)
from braid.broker.config_values import (
    parse_int as _parse_int,
)
from braid.broker.config_values import (
    parse_listeners as _parse_listeners,
)
from braid.broker.config_values import (
    parse_name as _parse_name,
)
from braid.broker.config_values import (
    parse_path as _parse_path,
)
from braid.broker.config_values import (
    parse_ratio as _parse_ratio,
)
from braid.broker.config_values import (
    parse_strategy as _parse_strategy,
)
from braid.broker.config_values import (
    parse_topic_type as _parse_topic_type,
)
from braid.broker.config_values import (
    parse_url as _parse_url,
)
from braid.broker.dispatch_settings import DispatchSettings
from braid.broker.gc_policy import BROKER_DEFAULT_THRESHOLDS, GcPolicy
from braid.broker.malloc_policy import DEFAULT_MMAP_THRESHOLD
from braid.broker.schemas.model import (
    DEFAULT_STRATEGY,
    SchemaCompatibilityStrategy,
)
from braid.core.autoscale_policy import (
    BROKER_CONFIG_KEYS,
    AutoScalePolicy,
    InvalidAutoScalePolicy,
    broker_config_key,
)
from braid.core.errors import InvalidInputError
from braid.ledger.api import ManagedLedgerConfig
from braid.storage.autorecovery.service import AutoRecoverySettings
from braid.storage.bookie.disk import DiskThresholds, InvalidDiskThresholds
from braid.storage.bookie_health import HealthPolicy
from braid.storage.client import ClientSettings
from braid.storage.placement import PlacementPolicy

logger = logging.getLogger(__name__)

#: Prefix of environment variables that override configuration keys.
ENV_PREFIX = "BRAID_"

_MIB = 1024 * 1024


class InvalidConfig(InvalidInputError):
    """A configuration key has a value that does not parse or is out of range, several keys have
    values that conflict, or the configuration file cannot be read.

    Attributes:
        key: the camelCase key of a single bad value (``None`` for a conflict between keys or a
            problem with the file itself).
        value: the offending text (the file's name or line for a file problem).
        keys: every key involved: ``(key,)`` for a single bad value, all of them for a conflict,
            ``()`` for a file problem.
    """

    def __init__(
        self, key: str | None, value: str, reason: str, *, keys: tuple[str, ...] = ()
    ) -> None:
        self.key = key
        self.value = value
        self.reason = reason
        self.keys = keys or ((key,) if key is not None else ())
        where = f" {key}={value!r}" if key is not None else f" {value}" if value else ""
        super().__init__(f"invalid configuration{where}: {reason}")


def _empty_settings() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class BrokerConfig:
    """Everything a broker process needs to know at start-up. Immutable once loaded.

    ``metadata_store_url`` left empty means "an SQLite file in ``data_dir``" (standalone);
    ``advertised_address`` left empty means "the bind address".
    """

    cluster_name: str = "standalone"
    data_dir: Path = Path("data")
    bind_address: str = "127.0.0.1"
    advertised_address: str = ""
    broker_service_port: int = 6650
    web_service_port: int = 8080
    metadata_store_url: str = ""
    #: Where tenants, namespaces and clusters live (Pulsar's configuration store; empty = the
    #: metadata store). ``braid broker`` needs it to be the metadata store for now.
    configuration_metadata_store_url: str = ""
    #: A ZooKeeper session silent this long expires: its ephemeral nodes (the broker's claim on
    #: the store, elections) go, and another process may take them (Pulsar's key).
    metadata_store_session_timeout_millis: int = 10_000
    max_message_size: int = 5 * _MIB
    keep_alive_interval_seconds: int = 30
    #: A connection must complete CONNECT within this many seconds (Braid-specific; Pulsar closes
    #: a connection whose handshake is not done at its first keep-alive tick).
    handshake_timeout_seconds: int = 10
    #: Pulsar's caps on open connections, in total and per client IP address (0 = no cap).
    broker_max_connections: int = 0
    broker_max_connections_per_ip: int = 0
    #: Lookups in flight broker-wide (LOOKUP, PARTITIONED_METADATA, scalable-topic lookups and
    #: namespace watches being established); more are refused with TooManyRequests (Pulsar's).
    max_concurrent_lookup_request: int = 50_000
    #: DAG-watch and namespace-watch sessions open (or opening) on one connection; more are
    #: refused with TooManyRequests (Braid-specific; 0 = no cap; ADR 0044).
    scalable_topic_max_sessions_per_connection: int = 1_000
    #: Producers and consumers per topic / subscription (Pulsar's keys) and per connection
    #: (Braid's); 0 = no cap, the defaults. Over a cap: ProducerBusy / ConsumerBusy.
    max_producers_per_topic: int = 0
    max_consumers_per_topic: int = 0
    max_consumers_per_subscription: int = 0
    max_producers_per_connection: int = 0
    max_consumers_per_connection: int = 0
    broker_deduplication_enabled: bool = False
    allow_auto_topic_creation: bool = True
    #: Whether ``DELETE`` of a namespace / tenant with ``force=true`` may delete what it holds
    #: (Pulsar's keys and defaults; a forced delete is 405 while off).
    force_delete_namespace_allowed: bool = False
    force_delete_tenant_allowed: bool = False
    default_retention_time_in_minutes: int = 0
    default_retention_size_in_mb: int = 0
    #: Backlog quotas, message TTL and the checks enforcing them and retention (Pulsar's keys,
    #: ``docs/broker.md#backlog-quotas-retention-and-ttl``; -1 / 0 = no limit).
    backlog_quota_default_limit_bytes: int = -1
    backlog_quota_default_limit_second: int = -1
    backlog_quota_default_retention_policy: RetentionPolicy = RetentionPolicy.PRODUCER_REQUEST_HOLD
    backlog_quota_check_enabled: bool = True
    backlog_quota_check_interval_in_seconds: int = 60
    ttl_duration_default_in_seconds: int = 0
    message_expiry_check_interval_in_minutes: int = 5
    retention_check_interval_in_seconds: int = 120
    managed_ledger_max_entries_per_ledger: int = 50_000
    managed_ledger_max_size_per_ledger_mbytes: int = 2048
    managed_ledger_max_ledger_rollover_time_minutes: int = 240
    #: Bookies per new ledger, copies of each entry, copies acknowledged before an add is
    #: (Pulsar's keys; 1/1/1 as its standalone.conf; namespace persistence policies override).
    managed_ledger_default_ensemble_size: int = 1
    managed_ledger_default_write_quorum: int = 1
    managed_ledger_default_ack_quorum: int = 1
    #: The storage client (Pulsar's ``bookkeeperClient*`` keys, ``docs/storage.md``).
    bookkeeper_client_rackaware_policy_enabled: bool = True
    bookkeeper_client_min_num_racks_per_write_quorum: int = 2
    bookkeeper_client_enforce_min_num_racks_per_write_quorum: bool = False
    bookkeeper_client_speculative_read_timeout_in_millis: int = 0
    bookkeeper_client_health_check_enabled: bool = True
    bookkeeper_client_health_check_interval_seconds: int = 60
    bookkeeper_client_health_check_error_threshold_per_interval: int = 5
    bookkeeper_client_health_check_quarantine_time_in_seconds: int = 1800
    bookkeeper_client_quarantine_ratio: float = 1.0
    #: Auto-recovery hosted by this broker (BookKeeper's bookkeeper.conf keys, in seconds).
    auto_recovery_daemon_enabled: bool = False
    lost_bookie_recovery_delay: int = 0
    auditor_periodic_check_interval: int = 604_800
    dispatcher_max_read_batch_size: int = 100
    #: PIP-54 batch-index acknowledgements (Pulsar's default since 4.1, PIP-391).
    acknowledgment_at_batch_index_level_enabled: bool = True
    delayed_delivery_enabled: bool = True
    delayed_delivery_tick_time_millis: int = 1000
    subscription_key_shared_enable: bool = True
    subscription_key_shared_use_consistent_hashing: bool = True
    subscription_key_shared_consistent_hashing_replica_points: int = 100
    key_shared_look_ahead_msg_in_replay_threshold_per_subscription: int = 20_000
    #: Compact a topic once its data after the compaction horizon exceeds this (0 = never).
    broker_service_compaction_threshold_in_bytes: int = 0
    broker_service_compaction_monitor_interval_in_seconds: int = 60
    scalable_topic_enabled: bool = True
    #: How long a disconnected STREAM/CHECKPOINT consumer keeps its segments (PIP-468 session).
    scalable_topic_consumer_session_grace_seconds: int = 60
    #: How often the controller leader garbage-collects drained sealed segments (0 = never).
    scalable_topic_gc_interval_seconds: int = 60
    #: Braid-specific: a segment topic samples the key of one published entry in this many for
    #: its key-hash histogram (where a load-driven split cuts); 0 turns sampling off.
    scalable_topic_key_hash_sample_interval: int = 8
    #: Raw PIP-483 ``scalableTopic*`` keys (other than ``scalableTopicEnabled``) as written.
    scalable_topic_settings: Mapping[str, str] = field(default_factory=_empty_settings)
    #: Braid-specific (CPython has a cyclic GC, Pulsar's JVM keys do not apply): freeze the
    #: start-up heap with ``gc.freeze()`` once the broker serves (see ``broker/gc_policy.py``).
    python_gc_freeze_after_startup: bool = True
    #: ``gc.set_threshold`` for a high-allocation server (CPython's default is 700,10,10).
    python_gc_thresholds: tuple[int, int, int] = BROKER_DEFAULT_THRESHOLDS
    #: glibc's ``M_MMAP_THRESHOLD``, fixed so freed large buffers return to the OS (0 = glibc's
    #: adaptive default; see ``broker/malloc_policy.py``).
    malloc_mmap_threshold_bytes: int = DEFAULT_MMAP_THRESHOLD
    #: BookKeeper's disk keys: the in-process bookie turns read-only at or above this used
    #: fraction of its file system, read-write again below the low-water mark, checked every
    #: ``diskCheckInterval`` milliseconds (see ``storage/bookie/disk.py``).
    disk_usage_threshold: float = 0.95
    disk_usage_lwm_threshold: float = 0.90
    disk_check_interval: int = 10_000
    #: The schema compatibility strategy of namespaces that set none (Pulsar's default FULL).
    schema_compatibility_strategy: SchemaCompatibilityStrategy = DEFAULT_STRATEGY
    #: Refuse producers without a schema on topics that have one.
    is_schema_validation_enforced: bool = False
    #: What auto-creation creates: ``non-partitioned`` or ``partitioned`` topics.
    allow_auto_topic_creation_type: str = "non-partitioned"
    #: Partitions of an auto-created partitioned topic.
    default_num_partitions: int = 1
    #: Bundles of a namespace whose policies name none (Pulsar's key): the unit of ownership.
    default_number_of_namespace_bundles: int = 4
    #: ``name:pulsar://host:port`` entries: the URL a LOOKUP with ``listener_name`` gets.
    advertised_listeners: tuple[str, ...] = ()
    #: Host names the admin API accepts state-changing requests for, in ``Host`` and ``Origin``,
    #: besides the broker's own (Braid-specific; ``*`` = any; docs/admin.md, ADR 0044).
    web_service_allowed_hosts: tuple[str, ...] = ()
    #: PIP-470: more storage clusters, ``name=metadataServiceUri`` separated by ``;``, registered
    #: STANDBY at start (standalone runs their bookies in ``<dataDir>/storage/<name>``).
    bookie_clusters: tuple[tuple[str, str], ...] = ()
    #: PIP-470: switch without the I11 idgen precheck (lab/staging only).
    bookie_cluster_switch_skip_idgen_precheck: bool = False
    #: Bookies of the home storage cluster: ``N >= 1`` bookies inside this process
    #: (``<dataDir>/bookie-<i>``; with N > 1 each serves the bookie protocol on 127.0.0.1 and the
    #: broker reaches it over TCP, ADR 0034); ``0``: none - use the ``braid bookie`` processes
    #: registered in ``bookkeeperMetadataServiceUri``.
    standalone_bookies: int = 1
    #: Where the home cluster's bookies register (Pulsar's key); empty = ``metadataStoreUrl``.
    bookkeeper_metadata_service_uri: str = ""
    #: ``bookieId=/region/rack`` lines giving the bookies' racks for placement (Braid's key).
    bookkeeper_client_rack_mapping_file: Path | None = None
    #: A request to a bookie process without an answer after this long fails it (Pulsar's key).
    bookkeeper_client_timeout_in_seconds: int = 30
    #: PIP-470: the rollback window after a switch, before CLEANUP runs on its own.
    bookie_cluster_dual_read_timeout_days: int = 15
    #: PIP-470: ledgers BUILD copies at once.
    bookie_cluster_switch_concurrency: int = 16

    def __post_init__(self) -> None:
        # Resolve the derived defaults once so every reader sees the same values.
        object.__setattr__(self, "data_dir", Path(self.data_dir).absolute())
        if not self.advertised_address:
            object.__setattr__(self, "advertised_address", self.bind_address)
        if not self.metadata_store_url:
            object.__setattr__(
                self, "metadata_store_url", default_metadata_store_url(self.data_dir)
            )
        if not isinstance(self.scalable_topic_settings, MappingProxyType):
            object.__setattr__(
                self,
                "scalable_topic_settings",
                MappingProxyType(dict(self.scalable_topic_settings)),
            )

    def listener_urls(self) -> dict[str, str]:
        """``advertisedListeners`` as listener name -> ``pulsar://`` URL."""
        urls: dict[str, str] = {}
        for entry in self.advertised_listeners:
            name, _, url = entry.partition(":")
            if url.startswith("pulsar://"):
                urls.setdefault(name, url)
        return urls

    @property
    def web_service_url(self) -> str:
        """The admin HTTP URL as configured (the real port may differ when configured as 0)."""
        return f"http://{self.advertised_address}:{self.web_service_port}"

    def disk_thresholds(self) -> DiskThresholds:
        """When the bookie turns read-only and back (checked together at load)."""
        return DiskThresholds(
            self.disk_usage_threshold,
            self.disk_usage_lwm_threshold,
            self.disk_check_interval / 1000.0,
        )

    @property
    def storage_is_process_local(self) -> bool:
        """Whether the home storage cluster's bookies live inside this process, on
        ``data_dir`` (so no other broker can read its ledgers, and the metadata store is bound to
        this data directory: :mod:`braid.broker.store_guard`); ``False`` with external bookies
        (``standaloneBookies=0``)."""
        return self.standalone_bookies > 0

    def gc_policy(self) -> GcPolicy:
        """The process's garbage-collection policy."""
        return GcPolicy(self.python_gc_freeze_after_startup, self.python_gc_thresholds)

    def dispatch_settings(self) -> DispatchSettings:
        """What every subscription's dispatcher follows."""
        return DispatchSettings(
            read_batch=self.dispatcher_max_read_batch_size,
            batch_index_ack=self.acknowledgment_at_batch_index_level_enabled,
            delayed_delivery=self.delayed_delivery_enabled,
            delayed_tick_s=self.delayed_delivery_tick_time_millis / 1000.0,
            key_shared_enabled=self.subscription_key_shared_enable,
            key_shared_consistent_hashing=self.subscription_key_shared_use_consistent_hashing,
            key_shared_replica_points=self.subscription_key_shared_consistent_hashing_replica_points,
            key_shared_look_ahead=self.key_shared_look_ahead_msg_in_replay_threshold_per_subscription,
        )

    def managed_ledger_config(self) -> ManagedLedgerConfig:
        """The broker-wide managed-ledger settings (retention from the broker defaults).

        Namespace retention policies, when set, replace the two retention fields.
        """
        return ManagedLedgerConfig(
            max_entries_per_ledger=self.managed_ledger_max_entries_per_ledger,
            max_size_per_ledger=self.managed_ledger_max_size_per_ledger_mbytes * _MIB,
            max_ledger_age_s=self.managed_ledger_max_ledger_rollover_time_minutes * 60.0,
            retention_time_s=retention_minutes_to_seconds(self.default_retention_time_in_minutes),
            retention_size_bytes=retention_mb_to_bytes(self.default_retention_size_in_mb),
            ensemble=self.managed_ledger_default_ensemble_size,
            write_quorum=self.managed_ledger_default_write_quorum,
            ack_quorum=self.managed_ledger_default_ack_quorum,
        )

    def backlog_quota_defaults(self) -> BacklogQuotaDefaults:
        return BacklogQuotaDefaults(
            self.backlog_quota_default_limit_bytes,
            self.backlog_quota_default_limit_second,
            self.backlog_quota_default_retention_policy,
        )

    def auto_recovery_settings(self) -> AutoRecoverySettings:
        """The auditor's and replication worker's settings."""
        return AutoRecoverySettings(
            lost_bookie_recovery_delay_s=float(self.lost_bookie_recovery_delay),
            periodic_check_interval_s=float(self.auditor_periodic_check_interval),
        )

    def storage_client_settings(self) -> ClientSettings:
        """Placement, health check and read settings of the storage clients."""
        return ClientSettings(
            placement=PlacementPolicy(
                rack_aware=self.bookkeeper_client_rackaware_policy_enabled,
                min_racks_per_write_quorum=self.bookkeeper_client_min_num_racks_per_write_quorum,
                enforce_min_racks=self.bookkeeper_client_enforce_min_num_racks_per_write_quorum,
            ),
            health=HealthPolicy(
                enabled=self.bookkeeper_client_health_check_enabled,
                interval_s=float(self.bookkeeper_client_health_check_interval_seconds),
                error_threshold_per_interval=(
                    self.bookkeeper_client_health_check_error_threshold_per_interval
                ),
                quarantine_s=float(self.bookkeeper_client_health_check_quarantine_time_in_seconds),
                quarantine_ratio=self.bookkeeper_client_quarantine_ratio,
            ),
            speculative_read_timeout_ms=self.bookkeeper_client_speculative_read_timeout_in_millis,
        )


def default_metadata_store_url(data_dir: Path) -> str:
    """The standalone metadata store: an SQLite file inside the data directory."""
    return f"sqlite://{(data_dir / 'metadata' / 'metadata.db').as_posix()}"


def retention_minutes_to_seconds(minutes: int) -> float:
    """Pulsar's retention minutes (``-1`` = forever) as the managed ledger's seconds."""
    return -1.0 if minutes < 0 else minutes * 60.0


def retention_mb_to_bytes(megabytes: int) -> int:
    """Pulsar's retention MB (``-1`` = unlimited) as the managed ledger's bytes."""
    return -1 if megabytes < 0 else megabytes * _MIB


@dataclass(frozen=True)
class _Key:
    name: str  # camelCase, as in broker.conf
    attribute: str  # snake_case BrokerConfig field
    parse: Callable[[str], Any]


def _snake(name: str) -> str:
    """``managedLedgerDefaultAckQuorum`` -> ``managed_ledger_default_ack_quorum``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_PORT = _parse_int(0, 65535)

#: Every recognised key except the raw ``scalableTopic*`` auto-scale ones.
KEYS: tuple[_Key, ...] = (
    _Key("clusterName", "cluster_name", _parse_name),
    _Key("dataDir", "data_dir", _parse_path),
    _Key("bindAddress", "bind_address", _parse_host),
    _Key("advertisedAddress", "advertised_address", _parse_host),
    _Key("brokerServicePort", "broker_service_port", _PORT),
    _Key("webServicePort", "web_service_port", _PORT),
    _Key("metadataStoreUrl", "metadata_store_url", _parse_url),
    _Key("configurationMetadataStoreUrl", "configuration_metadata_store_url", _parse_url),
    _Key(
        "metadataStoreSessionTimeoutMillis",
        "metadata_store_session_timeout_millis",
        _parse_int(1000, 600_000),
    ),
    _Key("maxMessageSize", "max_message_size", _parse_int(1024, 512 * _MIB)),
    _Key("keepAliveIntervalSeconds", "keep_alive_interval_seconds", _parse_int(1)),
    _Key("handshakeTimeoutSeconds", "handshake_timeout_seconds", _parse_int(1)),
    _Key("brokerMaxConnections", "broker_max_connections", _parse_int(0)),
    _Key("brokerMaxConnectionsPerIp", "broker_max_connections_per_ip", _parse_int(0)),
    _Key("maxConcurrentLookupRequest", "max_concurrent_lookup_request", _parse_int(0)),
    _Key(
        "scalableTopicMaxSessionsPerConnection",
        "scalable_topic_max_sessions_per_connection",
        _parse_int(0),
    ),
    _Key("maxProducersPerTopic", "max_producers_per_topic", _parse_int(0)),
    _Key("maxConsumersPerTopic", "max_consumers_per_topic", _parse_int(0)),
    _Key("maxConsumersPerSubscription", "max_consumers_per_subscription", _parse_int(0)),
    _Key("maxProducersPerConnection", "max_producers_per_connection", _parse_int(0)),
    _Key("maxConsumersPerConnection", "max_consumers_per_connection", _parse_int(0)),
    _Key("brokerDeduplicationEnabled", "broker_deduplication_enabled", _parse_bool),
    _Key("allowAutoTopicCreation", "allow_auto_topic_creation", _parse_bool),
    _Key("forceDeleteNamespaceAllowed", "force_delete_namespace_allowed", _parse_bool),
    _Key("forceDeleteTenantAllowed", "force_delete_tenant_allowed", _parse_bool),
    _Key("defaultRetentionTimeInMinutes", "default_retention_time_in_minutes", _parse_int(-1)),
    _Key("defaultRetentionSizeInMB", "default_retention_size_in_mb", _parse_int(-1)),
    *(
        _Key(name, _snake(name), parse)
        for name, parse in (
            ("backlogQuotaDefaultLimitBytes", _parse_int(-1)),
            ("backlogQuotaDefaultLimitSecond", _parse_int(-1)),
            ("backlogQuotaDefaultRetentionPolicy", _parse_backlog_policy),
            ("backlogQuotaCheckEnabled", _parse_bool),
            ("backlogQuotaCheckIntervalInSeconds", _parse_int(1)),
            ("ttlDurationDefaultInSeconds", _parse_int(0)),
            ("messageExpiryCheckIntervalInMinutes", _parse_int(1)),
            ("retentionCheckIntervalInSeconds", _parse_int(1)),
        )
    ),
    _Key(
        "managedLedgerMaxEntriesPerLedger",
        "managed_ledger_max_entries_per_ledger",
        _parse_int(1),
    ),
    _Key(
        "managedLedgerMaxSizePerLedgerMbytes",
        "managed_ledger_max_size_per_ledger_mbytes",
        _parse_int(1),
    ),
    _Key(
        "managedLedgerMaxLedgerRolloverTimeMinutes",
        "managed_ledger_max_ledger_rollover_time_minutes",
        _parse_int(1),
    ),
    *(
        _Key(name, _snake(name), parse)
        for name, parse in (
            ("managedLedgerDefaultEnsembleSize", _parse_int(1, 64)),
            ("managedLedgerDefaultWriteQuorum", _parse_int(1, 64)),
            ("managedLedgerDefaultAckQuorum", _parse_int(1, 64)),
            ("bookkeeperClientRackawarePolicyEnabled", _parse_bool),
            ("bookkeeperClientMinNumRacksPerWriteQuorum", _parse_int(1, 64)),
            ("bookkeeperClientEnforceMinNumRacksPerWriteQuorum", _parse_bool),
            ("bookkeeperClientSpeculativeReadTimeoutInMillis", _parse_int(0)),
            ("bookkeeperClientHealthCheckEnabled", _parse_bool),
            ("bookkeeperClientHealthCheckIntervalSeconds", _parse_int(1)),
            ("bookkeeperClientHealthCheckErrorThresholdPerInterval", _parse_int(0)),
            ("bookkeeperClientHealthCheckQuarantineTimeInSeconds", _parse_int(0)),
            ("bookkeeperClientQuarantineRatio", _parse_ratio),
            ("autoRecoveryDaemonEnabled", _parse_bool),
            ("lostBookieRecoveryDelay", _parse_int(0)),
            ("auditorPeriodicCheckInterval", _parse_int(0)),
        )
    ),
    _Key("dispatcherMaxReadBatchSize", "dispatcher_max_read_batch_size", _parse_int(1)),
    _Key(
        "acknowledgmentAtBatchIndexLevelEnabled",
        "acknowledgment_at_batch_index_level_enabled",
        _parse_bool,
    ),
    _Key("delayedDeliveryEnabled", "delayed_delivery_enabled", _parse_bool),
    _Key("delayedDeliveryTickTimeMillis", "delayed_delivery_tick_time_millis", _parse_int(1)),
    _Key("subscriptionKeySharedEnable", "subscription_key_shared_enable", _parse_bool),
    _Key(
        "subscriptionKeySharedUseConsistentHashing",
        "subscription_key_shared_use_consistent_hashing",
        _parse_bool,
    ),
    _Key(
        "subscriptionKeySharedConsistentHashingReplicaPoints",
        "subscription_key_shared_consistent_hashing_replica_points",
        _parse_int(1, 10_000),
    ),
    _Key(
        "keySharedLookAheadMsgInReplayThresholdPerSubscription",
        "key_shared_look_ahead_msg_in_replay_threshold_per_subscription",
        _parse_int(1),
    ),
    _Key(
        "brokerServiceCompactionThresholdInBytes",
        "broker_service_compaction_threshold_in_bytes",
        _parse_int(0),
    ),
    _Key(
        "brokerServiceCompactionMonitorIntervalInSeconds",
        "broker_service_compaction_monitor_interval_in_seconds",
        _parse_int(1),
    ),
    _Key("scalableTopicEnabled", "scalable_topic_enabled", _parse_bool),
    _Key(
        "scalableTopicConsumerSessionGraceSeconds",
        "scalable_topic_consumer_session_grace_seconds",
        _parse_int(0),
    ),
    _Key("scalableTopicGcIntervalSeconds", "scalable_topic_gc_interval_seconds", _parse_int(0)),
    _Key(
        "scalableTopicKeyHashSampleInterval",
        "scalable_topic_key_hash_sample_interval",
        _parse_int(0),
    ),
    _Key("pythonGcFreezeAfterStartup", "python_gc_freeze_after_startup", _parse_bool),
    _Key("pythonGcThresholds", "python_gc_thresholds", _parse_gc_thresholds),
    _Key("mallocMmapThresholdBytes", "malloc_mmap_threshold_bytes", _parse_int(0, 2**31 - 1)),
    _Key("diskUsageThreshold", "disk_usage_threshold", _parse_fraction),
    _Key("diskUsageLwmThreshold", "disk_usage_lwm_threshold", _parse_fraction),
    _Key("diskCheckInterval", "disk_check_interval", _parse_int(1)),
    _Key("schemaCompatibilityStrategy", "schema_compatibility_strategy", _parse_strategy),
    _Key("isSchemaValidationEnforced", "is_schema_validation_enforced", _parse_bool),
    _Key("allowAutoTopicCreationType", "allow_auto_topic_creation_type", _parse_topic_type),
    _Key("defaultNumPartitions", "default_num_partitions", _parse_int(1, 10_000)),
    _Key(
        "defaultNumberOfNamespaceBundles",
        "default_number_of_namespace_bundles",
        _parse_int(1, 2**16),
    ),
    _Key("advertisedListeners", "advertised_listeners", _parse_listeners),
    _Key("webServiceAllowedHosts", "web_service_allowed_hosts", _parse_host_list),
    _Key("bookieClusters", "bookie_clusters", _parse_bookie_clusters),
    _Key("standaloneBookies", "standalone_bookies", _parse_int(0, 64)),
    _Key("bookkeeperMetadataServiceUri", "bookkeeper_metadata_service_uri", _parse_url),
    _Key("bookkeeperClientRackMappingFile", "bookkeeper_client_rack_mapping_file", _parse_path),
    _Key(
        "bookkeeperClientTimeoutInSeconds",
        "bookkeeper_client_timeout_in_seconds",
        _parse_int(1, 3600),
    ),
    _Key(
        "bookieClusterSwitchSkipIdgenPrecheck",
        "bookie_cluster_switch_skip_idgen_precheck",
        _parse_bool,
    ),
    _Key(
        "bookieClusterDualReadTimeoutDays",
        "bookie_cluster_dual_read_timeout_days",
        _parse_int(0),
    ),
    _Key(
        "bookieClusterSwitchConcurrency", "bookie_cluster_switch_concurrency", _parse_int(1, 1024)
    ),
)

_BY_NAME: dict[str, _Key] = {k.name: k for k in KEYS}
QUORUM_KEYS = (
    "managedLedgerDefaultEnsembleSize",
    "managedLedgerDefaultWriteQuorum",
    "managedLedgerDefaultAckQuorum",
)

#: PIP-483's configuration table: kept raw, validated by the auto-scale policy (whose knob table
#: is the one list of these keys).
SCALABLE_TOPIC_KEYS = BROKER_CONFIG_KEYS


def _is_known(key: str) -> bool:
    return key in _BY_NAME or key in SCALABLE_TOPIC_KEYS


def parse_config_text(text: str, *, source: str = "<text>") -> dict[str, str]:
    """Parse ``broker.conf`` syntax into ``{key: value}`` (both stripped; later lines win).

    Blank lines and lines starting with ``#`` or ``!`` are ignored.

    Raises:
        InvalidConfig: a non-comment line without ``=``, or with an empty key.
    """
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidConfig(None, f"{source}:{number}", f"expected key=value, got {line!r}")
        out[key] = value.strip()
    return out


def read_config_file(path: Path) -> dict[str, str]:
    """Read and parse a ``broker.conf`` file.

    Raises:
        InvalidConfig: the file cannot be read, is not UTF-8, or has a malformed line.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidConfig(None, str(path), "configuration file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidConfig(None, str(path), f"cannot read configuration file: {exc}") from None
    return parse_config_text(text, source=str(path))


def load_config(
    path: Path | None,
    overrides: Mapping[str, str],
    env: Mapping[str, str],
) -> BrokerConfig:
    """Build a :class:`BrokerConfig` from defaults, a file, the environment and overrides.

    Args:
        path: a ``broker.conf``-style file, or ``None`` for none.
        overrides: camelCase key -> text, highest precedence (command-line flags).
        env: the process environment; ``BRAID_<key>`` entries override the file.

    Returns:
        The resolved configuration (``data_dir`` is always absolute).

    Raises:
        InvalidConfig: an unreadable file, a malformed line, or a value that does not parse.
    """
    raw: dict[str, str] = {}
    unknown: list[str] = []
    if path is not None:
        from_file = read_config_file(path)
        unknown.extend(k for k in from_file if not _is_known(k))
        raw.update(from_file)
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :]
        if _is_known(key):
            raw[key] = value.strip()
        elif key[:1].islower():
            # camelCase after the prefix is clearly meant as a config key: a typo must be seen.
            # Upper-case names (BRAID_LOG_LEVEL, ...) belong to other tools and are ignored.
            unknown.append(name)
    for key, value in overrides.items():
        if not _is_known(key):
            unknown.append(key)
        raw[key] = value.strip()
    if unknown:
        logger.warning("ignoring unknown configuration keys: %s", ", ".join(sorted(set(unknown))))
    return _build(raw)


def _build(raw: Mapping[str, str]) -> BrokerConfig:
    values: dict[str, Any] = {}
    scalable: dict[str, str] = {}
    for key, text in raw.items():
        spec = _BY_NAME.get(key)
        if spec is None:
            if key in SCALABLE_TOPIC_KEYS and text:
                scalable[key] = text
            continue
        if not text:
            continue  # empty = default, as in Pulsar's broker.conf
        try:
            values[spec.attribute] = spec.parse(text)
        except ValueError as exc:
            raise InvalidConfig(key, text, str(exc)) from None
    _check_auto_scale_settings(scalable)
    values["scalable_topic_settings"] = scalable
    config = BrokerConfig(**values)
    try:
        config.disk_thresholds()
    except InvalidDiskThresholds as exc:
        raise InvalidConfig(
            None, "", str(exc), keys=("diskUsageThreshold", "diskUsageLwmThreshold")
        ) from None
    ensemble, write_quorum, ack_quorum = (
        config.managed_ledger_default_ensemble_size,
        config.managed_ledger_default_write_quorum,
        config.managed_ledger_default_ack_quorum,
    )
    if not ack_quorum <= write_quorum <= ensemble:
        raise InvalidConfig(
            None,
            "",
            f"need managedLedgerDefaultAckQuorum ({ack_quorum}) <= managedLedgerDefaultWriteQuorum"
            f" ({write_quorum}) <= managedLedgerDefaultEnsembleSize ({ensemble})",
            keys=QUORUM_KEYS,
        )
    return config


def _check_auto_scale_settings(settings: Mapping[str, str]) -> None:
    """Fail at start-up rather than when the first controller reads the policy.

    ``settings`` are the merged ``scalableTopic*`` values of every source (file, environment,
    flags). Each value is parsed alone, so a malformed one names its key; consistency between
    values is checked once, on the merged settings over PIP-483's defaults, so a conflict names
    every key involved and a pair that is only consistent together is accepted.
    """
    try:
        AutoScalePolicy.from_broker_config(settings)
    except InvalidAutoScalePolicy as exc:
        keys = tuple(broker_config_key(field) for field in exc.fields)
        if len(keys) == 1 and keys[0] in settings:
            raise InvalidConfig(keys[0], settings[keys[0]], str(exc)) from None
        raise InvalidConfig(None, "", str(exc), keys=keys) from None


def _text(value: object) -> str:
    if isinstance(value, SchemaCompatibilityStrategy | RetentionPolicy):
        return str(value.value)
    if isinstance(value, tuple) and all(isinstance(v, tuple) for v in value):
        return ";".join("=".join(str(part) for part in v) for v in value)
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def config_keys() -> list[str]:
    """The camelCase names of every typed key (for documentation and ``--help``)."""
    return [k.name for k in KEYS]


def describe(config: BrokerConfig) -> dict[str, str]:
    """The effective configuration as ``{camelCase key: text}`` (logged at start-up)."""
    out = {k.name: _text(getattr(config, k.attribute)) for k in KEYS}
    out.update(config.scalable_topic_settings)
    return out


__all__ = [
    "ENV_PREFIX",
    "KEYS",
    "SCALABLE_TOPIC_KEYS",
    "BrokerConfig",
    "InvalidConfig",
    "config_keys",
    "default_metadata_store_url",
    "describe",
    "load_config",
    "parse_config_text",
    "read_config_file",
    "retention_mb_to_bytes",
    "retention_minutes_to_seconds",
]
