"""The broker's configuration: a ``broker.conf`` file, ``BRAID_*`` environment overrides, flags.

Keys use Pulsar's (and the PIPs') camelCase names so an operator's ``broker.conf`` knowledge
carries over (``brokerServicePort``, ``allowAutoTopicCreation``, ``scalableTopicMaxSegments``, ...);
the resulting :class:`BrokerConfig` exposes them as snake_case attributes.

Precedence, lowest to highest: built-in defaults, the file, the environment
(``BRAID_<key>=<value>``, e.g. ``BRAID_brokerServicePort=6651``), explicit overrides (command-line
flags). An empty value means "use the default", as in Pulsar's own ``broker.conf``. Unknown keys are
ignored: one that is a near miss of a known key (a typo must not pass silently) is warned about with
the key it resembles, the rest - a Pulsar ``standalone.conf`` holds many keys Braid has no use for -
are listed in one DEBUG line. A value that does not parse raises :class:`InvalidConfig` naming the
key and the value.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from braid.broker.backlog_quota import BacklogQuotaDefaults, RetentionPolicy
from braid.broker.config_keys import KEYS, SECRET_KEYS, _Key
from braid.broker.dispatch_settings import DispatchSettings
from braid.broker.gc_policy import BROKER_DEFAULT_THRESHOLDS, GcPolicy
from braid.broker.load_config import (
    LOAD_BALANCER_KEYS,
    InvalidLoadBalancerSetting,
    LoadBalancerSettings,
)
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
from braid.security.authorization import PROVIDER_CLASS as AUTHORIZATION_PROVIDER
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
    #: Pulsar's transactions (ADRs 0064, 0065): off by default, as in Pulsar; while off, the
    #: transaction commands are refused with ``NotAllowedError``.
    transaction_coordinator_enabled: bool = False
    #: Open transactions one coordinator may hold (0: no limit), as Pulsar's key.
    max_active_transactions_per_coordinator: int = 0
    #: A topic's transaction buffer snapshot (ADR 0071): taken after this many transactions
    #: ended on it, or this long after the last one when any ended meanwhile (Pulsar's keys and
    #: defaults).
    transaction_buffer_snapshot_max_transaction_count: int = 1000
    transaction_buffer_snapshot_min_time_in_millis: int = 5000
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
    #: How often a cursor whose last state write failed is written again (its acknowledgements
    #: count in memory meanwhile; a hand-over it holds back waits for it, ADR 0076).
    managed_ledger_cursor_position_flush_seconds: int = 60
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
    #: Braid-specific: PIP-486 entry buckets per segment of a new scalable topic (1 = none: the
    #: segment has one consumer per Stream subscription; above 1, up to that many Stream
    #: consumers share a segment by bucket, and the auto-scaler prefers that to a split).
    scalable_topic_entry_buckets: int = 1
    #: Raw PIP-483 ``scalableTopic*`` keys (other than ``scalableTopicEnabled``) as written.
    scalable_topic_settings: Mapping[str, str] = field(default_factory=_empty_settings)
    #: The load manager's ``loadBalancer*`` keys and ``brokerShutdownTimeoutMs`` (ADR 0050).
    load_balancer: LoadBalancerSettings = field(default_factory=LoadBalancerSettings)
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
    #: ``braid broker``: port of the internal listener (the Segments API brokers call on each
    #: other, ADR 0051); 0 picks a free port, announced in the broker registry.
    internal_web_service_port: int = 0
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
    #: PIP-470: where the storage-cluster registry lives in the metadata store.
    bookie_cluster_config_path: str = "/admin/bookie-clusters"
    #: PIP-470: how long a rollback keeps the new cluster's copies before deleting them.
    bookie_cluster_rollback_deletion_delay_seconds: int = 3600
    #: TLS listeners (Pulsar's keys; unset = none). ``tlsEnabled=true`` without them opens 6651
    #: and 8443. The files are PEM; see ``docs/security.md`` and ``broker/security_settings.py``.
    broker_service_port_tls: int | None = None
    web_service_port_tls: int | None = None
    tls_enabled: bool = False
    tls_certificate_file_path: Path | None = None
    tls_key_file_path: Path | None = None
    tls_trust_certs_file_path: Path | None = None
    tls_require_trusted_client_cert_on_connect: bool = False
    tls_allow_insecure_connection: bool = False
    #: TLS inside the cluster (``docs/security.md#tls-inside-the-cluster``,
    #: ``broker/cluster_tls.py``): calls to other brokers (Pulsar's ``brokerClient*`` keys;
    #: hostname verification on unless ``tlsHostnameVerificationEnabled=false``) ...
    broker_client_tls_enabled: bool = False
    broker_client_trust_certs_file_path: Path | None = None
    broker_client_certificate_file_path: Path | None = None
    broker_client_key_file_path: Path | None = None
    tls_hostname_verification_enabled: bool = True
    #: ... and to bookies (Pulsar's ``bookkeeperTLS*`` keys; ``ClientAuthentication`` is the
    #: switch, as in Pulsar; PEM files only).
    bookkeeper_tls_client_authentication: bool = False
    bookkeeper_tls_provider_factory_class: str = "org.apache.bookkeeper.tls.TLSContextFactory"
    bookkeeper_tls_key_file_type: str = "PEM"
    bookkeeper_tls_trust_cert_types: str = "PEM"
    bookkeeper_tls_key_file_path: Path | None = None
    bookkeeper_tls_certificate_file_path: Path | None = None
    bookkeeper_tls_trust_certs_file_path: Path | None = None
    #: Authentication (Pulsar's keys and provider class names; off by default, as in Pulsar).
    authentication_enabled: bool = False
    authentication_providers: tuple[str, ...] = ()
    anonymous_user_role: str = ""
    authentication_refresh_check_seconds: int = 60
    token_secret_key: str = ""
    token_public_key: str = ""
    token_public_alg: str = "RS256"
    token_auth_claim: str = "sub"
    token_audience_claim: str = "aud"
    token_audience: str = ""
    basic_auth_conf: str = ""
    #: What this broker presents to other brokers (forwarded admin calls): Pulsar's client
    #: plugin class name and its parameters (``token:<jwt>``, ``file:///path``, JSON ...).
    broker_client_authentication_plugin: str = ""
    broker_client_authentication_parameters: str = ""
    #: Authorization (Pulsar's keys; off by default, as in Pulsar): super users, tenant admins,
    #: namespace and topic grants (``docs/security.md#authorization``).
    authorization_enabled: bool = False
    super_user_roles: tuple[str, ...] = ()
    authorization_provider: str = AUTHORIZATION_PROVIDER
    authorization_allow_wildcards_matching: bool = False

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

    def _tls_port(self, configured: int | None, default: int) -> int | None:
        if configured is not None:
            return configured
        return default if self.tls_enabled else None

    @property
    def tls_broker_port(self) -> int | None:
        """The ``pulsar+ssl://`` port to listen on (``None``: no TLS listener)."""
        return self._tls_port(self.broker_service_port_tls, 6651)

    @property
    def tls_web_port(self) -> int | None:
        """The HTTPS admin port to listen on (``None``: no HTTPS listener)."""
        return self._tls_port(self.web_service_port_tls, 8443)

    def listener_urls(self, scheme: str = "pulsar://") -> dict[str, str]:
        """``advertisedListeners`` as listener name -> URL of ``scheme`` (``pulsar://`` or
        ``pulsar+ssl://``)."""
        urls: dict[str, str] = {}
        for entry in self.advertised_listeners:
            name, _, url = entry.partition(":")
            if url.startswith(scheme):
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


_BY_NAME: dict[str, _Key] = {k.name: k for k in KEYS}
QUORUM_KEYS = (
    "managedLedgerDefaultEnsembleSize",
    "managedLedgerDefaultWriteQuorum",
    "managedLedgerDefaultAckQuorum",
)

#: PIP-483's configuration table: kept raw, validated by the auto-scale policy (whose knob table
#: is the one list of these keys).
SCALABLE_TOPIC_KEYS = BROKER_CONFIG_KEYS


#: Every key name, for the typo check of unknown keys.
_KNOWN_NAMES = sorted({*_BY_NAME, *SCALABLE_TOPIC_KEYS})


def _one_typo_apart(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with one character left out, added, changed, or two neighbours
    swapped (case ignored) - what a typo does; ``...MinLedger...`` vs ``...MaxLedger...`` is
    two edits, a different key rather than a typo."""
    a, b = a.lower(), b.lower()
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    a_rest, b_rest = a[start:], b[start:]
    return (
        a_rest[1:] == b_rest[1:]  # changed
        or a_rest[1:] == b_rest  # a has an extra character
        or a_rest == b_rest[1:]  # b has an extra character
        or (a_rest[:2] == b_rest[1::-1] and a_rest[2:] == b_rest[2:])  # swapped
    )


def _is_known(key: str) -> bool:
    return key in _BY_NAME or key in SCALABLE_TOPIC_KEYS or key in LOAD_BALANCER_KEYS


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
    _report_unknown(unknown)
    return _build(raw)


def _report_unknown(unknown: list[str]) -> None:
    """Unknown keys are ignored. One that is a near miss of a known key is most likely a typo
    and is warned about with the key it resembles; the others - a Pulsar ``broker.conf`` or
    ``standalone.conf`` holds many keys Braid has no use for (ZooKeeper, load balancer, ...) -
    are listed in one DEBUG line."""
    typos: list[str] = []
    others: list[str] = []
    for name in sorted(set(unknown)):
        key = name[len(ENV_PREFIX) :] if name.startswith(ENV_PREFIX) else name
        close = [known for known in _KNOWN_NAMES if _one_typo_apart(key, known)]
        if close:
            typos.append(f"{name} (did you mean {close[0]}?)")
        else:
            others.append(name)
    if typos:
        logger.warning("ignoring unknown configuration keys: %s", ", ".join(typos))
    if others:
        logger.debug("ignoring configuration keys Braid does not use: %s", ", ".join(others))


def _build(raw: Mapping[str, str]) -> BrokerConfig:
    values: dict[str, Any] = {}
    scalable: dict[str, str] = {}
    for key, text in raw.items():
        spec = _BY_NAME.get(key)
        if spec is None and key in LOAD_BALANCER_KEYS:
            continue
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
    try:
        values["load_balancer"] = LoadBalancerSettings.from_raw(raw)
    except InvalidLoadBalancerSetting as exc:
        raise InvalidConfig(exc.key, exc.value, exc.reason) from None
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
    if value is None:
        return ""
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
    for key in SECRET_KEYS:
        if out[key]:
            out[key] = "(set)"
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
