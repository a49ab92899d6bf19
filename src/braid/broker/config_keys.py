"""The ``broker.conf`` keys Braid recognises: each key's camelCase name (Pulsar's where Pulsar has
the setting), the :class:`~braid.broker.config.BrokerConfig` attribute it sets, and its parser
(:mod:`braid.broker.config_values`). One table, read by ``braid.broker.config`` to load, check and
describe a configuration; the PIP-483 ``scalableTopic*`` keys are not in it (the auto-scale policy
owns their table).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    parse_class_names as _parse_class_names,
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
    parse_metadata_path as _parse_metadata_path,
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
    parse_roles as _parse_roles,
)
from braid.broker.config_values import (
    parse_strategy as _parse_strategy,
)
from braid.broker.config_values import (
    parse_text as _parse_text,
)
from braid.broker.config_values import (
    parse_topic_type as _parse_topic_type,
)
from braid.broker.config_values import (
    parse_url as _parse_url,
)

_MIB = 1024 * 1024


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
    _Key("internalWebServicePort", "internal_web_service_port", _PORT),
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
    _Key("transactionCoordinatorEnabled", "transaction_coordinator_enabled", _parse_bool),
    _Key(
        "maxActiveTransactionsPerCoordinator",
        "max_active_transactions_per_coordinator",
        _parse_int(0),
    ),
    _Key(
        "transactionBufferSnapshotMaxTransactionCount",
        "transaction_buffer_snapshot_max_transaction_count",
        _parse_int(1),
    ),
    _Key(
        "transactionBufferSnapshotMinTimeInMillis",
        "transaction_buffer_snapshot_min_time_in_millis",
        _parse_int(0),
    ),
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
            ("managedLedgerCursorPositionFlushSeconds", _parse_int(1)),
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
    _Key("scalableTopicEntryBuckets", "scalable_topic_entry_buckets", _parse_int(1, 256)),
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
    *(
        _Key(name, attribute, parse)
        for name, attribute, parse in (
            (
                "bookkeeperTLSClientAuthentication",
                "bookkeeper_tls_client_authentication",
                _parse_bool,
            ),
            (
                "bookkeeperTLSProviderFactoryClass",
                "bookkeeper_tls_provider_factory_class",
                _parse_text,
            ),
            ("bookkeeperTLSKeyFileType", "bookkeeper_tls_key_file_type", _parse_text),
            ("bookkeeperTLSTrustCertTypes", "bookkeeper_tls_trust_cert_types", _parse_text),
            ("bookkeeperTLSKeyFilePath", "bookkeeper_tls_key_file_path", _parse_path),
            (
                "bookkeeperTLSCertificateFilePath",
                "bookkeeper_tls_certificate_file_path",
                _parse_path,
            ),
            (
                "bookkeeperTLSTrustCertsFilePath",
                "bookkeeper_tls_trust_certs_file_path",
                _parse_path,
            ),
        )
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
    _Key("bookieClusterConfigPath", "bookie_cluster_config_path", _parse_metadata_path),
    _Key(
        "bookieClusterRollbackDeletionDelaySeconds",
        "bookie_cluster_rollback_deletion_delay_seconds",
        _parse_int(0),
    ),
    *(
        _Key(name, _snake(name), parse)
        for name, parse in (
            ("brokerServicePortTls", _PORT),
            ("webServicePortTls", _PORT),
            ("tlsEnabled", _parse_bool),
            ("tlsCertificateFilePath", _parse_path),
            ("tlsKeyFilePath", _parse_path),
            ("tlsTrustCertsFilePath", _parse_path),
            ("tlsRequireTrustedClientCertOnConnect", _parse_bool),
            ("tlsAllowInsecureConnection", _parse_bool),
            ("brokerClientTlsEnabled", _parse_bool),
            ("brokerClientTrustCertsFilePath", _parse_path),
            ("brokerClientCertificateFilePath", _parse_path),
            ("brokerClientKeyFilePath", _parse_path),
            ("tlsHostnameVerificationEnabled", _parse_bool),
            ("authenticationEnabled", _parse_bool),
            ("authenticationProviders", _parse_class_names),
            ("anonymousUserRole", _parse_text),
            ("authenticationRefreshCheckSeconds", _parse_int(1)),
            ("tokenSecretKey", _parse_text),
            ("tokenPublicKey", _parse_text),
            ("tokenPublicAlg", _parse_text),
            ("tokenAuthClaim", _parse_text),
            ("tokenAudienceClaim", _parse_text),
            ("tokenAudience", _parse_text),
            ("basicAuthConf", _parse_text),
            ("brokerClientAuthenticationPlugin", _parse_text),
            ("brokerClientAuthenticationParameters", _parse_text),
            ("authorizationEnabled", _parse_bool),
            ("superUserRoles", _parse_roles),
            ("authorizationProvider", _parse_text),
            ("authorizationAllowWildcardsMatching", _parse_bool),
        )
    ),
)

#: Keys whose values may be key material: ``describe`` shows only whether they are set.
SECRET_KEYS = frozenset({"tokenSecretKey", "basicAuthConf", "brokerClientAuthenticationParameters"})


__all__ = ["KEYS", "SECRET_KEYS"]
