"""The broker service: the TCP server speaking the Pulsar binary protocol, and the topic registry.

``BrokerService`` is the seam between the broker core and its shell (``braid standalone``, the admin
API): it binds ``config.bind_address:config.broker_service_port`` (0 = an ephemeral port), accepts
connections (one :class:`~braid.broker.connection.BrokerConnection` each), and owns the topics this
broker serves, each backed by a managed ledger named ``tenant/ns/<domain>/<local name>``.

Its :attr:`BrokerService.commands` registry says which code serves which command: it starts with
the topic commands (:mod:`braid.broker.handlers`); a layer above the broker (the scalable-topic
service) registers its own command families there (:mod:`braid.broker.registry`).

Topics load on first use (a lookup, producer, subscription or admin call). Loading checks that the
namespace exists (else ``TopicNotFound`` naming it) and applies the namespace policies: auto topic
creation, deduplication and retention, each falling back to the broker's defaults.

A compaction monitor (:class:`~braid.broker.compaction_monitor.CompactionMonitor`, on the injected
clock) compacts loaded topics whose bytes after their compaction horizon exceed the namespace's
``compaction_threshold`` or ``brokerServiceCompactionThresholdInBytes``. It runs once there is a
threshold to watch: the broker's, or a namespace's seen when a topic loads or set through this
broker's admin API.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping

from braid.broker.applied_policies import AppliedPolicyResolver
from braid.broker.authorization import AuthorizationService
from braid.broker.backlog_quota_manager import BacklogQuotaManager
from braid.broker.bundles import NamespaceBundle, NamespaceBundles, topic_hash
from braid.broker.compaction import CompactionStatus
from braid.broker.compaction_monitor import CompactionMonitor
from braid.broker.config import (
    BrokerConfig,
    retention_mb_to_bytes,
    retention_minutes_to_seconds,
)
from braid.broker.connection import SERVER_VERSION, BrokerConnection, refuse_connection
from braid.broker.connection_limits import ConnectionLimiter
from braid.broker.errors import (
    InvalidTopicName,
    NotSupported,
    ServiceNotReady,
    TopicNotFound,
    UnknownListener,
)
from braid.broker.handlers import topic_commands
from braid.broker.key_sampler import KeyHashSampler
from braid.broker.limits_monitor import LimitsMonitor
from braid.broker.namespace_settings import NamespaceSettings
from braid.broker.non_persistent import NonPersistentTopic, NonPersistentTopics
from braid.broker.non_persistent_subscription import not_allowed
from braid.broker.ownership import AssignedBroker, BundleOwnership, LookupAnswer, NotOwner
from braid.broker.partitioned_admin import PartitionedTopicAdmin
from braid.broker.partitions import PartitionedTopics
from braid.broker.registry import CommandRegistry
from braid.broker.request_limits import LookupLimiter
from braid.broker.resources import (
    POLICIES_ROOT,
    BrokerResources,
    NamespacePolicies,
)
from braid.broker.schemas.commands import schema_commands
from braid.broker.schemas.registry import SchemaRegistry
from braid.broker.schemas.storage import SchemaStorage
from braid.broker.schemas.topic_schemas import TopicSchemas
from braid.broker.security_settings import (
    authentication_settings,
    authorization_settings,
    binary_tls_context,
    log_security_posture,
)
from braid.broker.send_validation import SendValidator
from braid.broker.topic import PersistentTopic
from braid.broker.topic_deletion import TopicDeletion
from braid.broker.topic_list import TopicEvents, topic_list_commands
from braid.broker.topic_names import ledger_config_for, managed_ledger_name, parse_topic_name
from braid.broker.topic_policies import TOPIC_POLICIES_ROOT, TopicPolicies
from braid.broker.transactions.commands import transaction_commands
from braid.broker.transactions.topics import broker_transactions
from braid.clock import Clock
from braid.core import names
from braid.core.names import NamespaceName, TopicDomain, TopicName
from braid.core.partitions import PARTITION_SUFFIX, partition_index, partitioned_topic_of
from braid.ledger.api import ManagedLedgerConfig, ManagedLedgerFactory, Position
from braid.metadata.api import MetadataStore, Notification, NotificationType
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.authentication import AuthenticationService
from braid.storage.api import StorageReadOnly

log = logging.getLogger(__name__)

__all__ = ["SERVER_VERSION", "BrokerService"]

#: At most one log line per this many seconds about connections refused by a cap.
_REFUSAL_LOG_INTERVAL_S = 10.0


class BrokerService:
    """The broker: server, connections and topic registry."""

    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataStore,
        ml_factory: ManagedLedgerFactory,
        resources: BrokerResources,
        *,
        clock: Clock,
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.ml_factory = ml_factory
        self.resources = resources
        self.clock = clock
        self._dispatch_settings = config.dispatch_settings()
        self._topics: dict[str, PersistentTopic] = {}
        self._loading: dict[str, asyncio.Task[PersistentTopic]] = {}
        self._unloading: set[asyncio.Task[None]] = set()
        #: Deletes, and the topics they fence meanwhile (no client may load or attach to them).
        self.deletion = TopicDeletion(self)
        self._connections: set[BrokerConnection] = set()
        #: brokerMaxConnections / brokerMaxConnectionsPerIp, checked before a socket costs more.
        self.connection_limits = ConnectionLimiter(
            config.broker_max_connections, config.broker_max_connections_per_ip
        )
        #: maxConcurrentLookupRequest: lookups in flight, every connection and command counted.
        self.lookups = LookupLimiter(config.max_concurrent_lookup_request)
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        #: Who each connection is, and what it may do (Pulsar's authentication/authorization keys).
        self.authentication = AuthenticationService(authentication_settings(config))
        self.authorization = AuthorizationService(authorization_settings(config), resources)
        self._tls_context = binary_tls_context(config, self.authentication)
        self._tls_server: asyncio.Server | None = None
        self._tls_port: int | None = None
        self._closing = False
        # A per-start random tag keeps generated producer names unique across restarts, which
        # matters with deduplication (a reused name would inherit old sequence ids).
        self._producer_tag = secrets.token_hex(4)
        self._producer_counter = itertools.count()
        self._listeners = config.listener_urls()
        #: Which command family serves which command; extend it with ``commands.register``.
        self.commands = CommandRegistry()
        self.commands.register(topic_commands(self, SendValidator(config.max_message_size)))
        #: Topic-level schemas: versions in ledgers, locators in the metadata store.
        self.namespace_settings = NamespaceSettings(resources, config)
        self.schemas = TopicSchemas(
            SchemaRegistry(SchemaStorage(metadata, ml_factory.storage, clock)),
            self.namespace_settings.schema_policy,
        )
        self.commands.register(schema_commands(self))
        #: Partition counts of partitioned topics (their partitions are ordinary topics).
        self.partitioned = PartitionedTopics(metadata)
        self.partitioned_admin = PartitionedTopicAdmin(self)
        #: Topic creations and deletions, for topic-list watchers.
        self.topic_events = TopicEvents(ml_factory)
        self.commands.register(topic_list_commands(self, self.topic_events))
        #: What CONNECTED advertises; layers above set their flags (``supports_scalable_topics``)
        #: before clients connect.
        self.feature_flags = pb.FeatureFlags(supports_topic_watchers=True)
        #: Called with ``(topic name, subscription)`` when a subscription has consumed all of a
        #: terminated topic (the scalable-topic layer's drain events).
        self.drain_listeners: list[Callable[[str, str], None]] = []
        #: Asked before a client's use auto-creates a missing ``persistent://`` topic; one may
        #: refuse by raising (the scalable-topic layer: a migrated topic's partitions, ADR 0063).
        self.creation_guards: list[Callable[[TopicName], Awaitable[None]]] = []
        self.compaction_monitor = CompactionMonitor(
            self,
            clock,
            interval_s=float(config.broker_service_compaction_monitor_interval_in_seconds),
            broker_threshold=config.broker_service_compaction_threshold_in_bytes,
        )
        #: Topic-level policies, backlog quotas and the TTL / retention checks (ADR 0045).
        self.topic_policies = TopicPolicies(metadata)
        #: Retention, deduplication and caps in force per topic: topic > namespace > broker.
        self.applied_policies = AppliedPolicyResolver(
            metadata, resources, self.topic_policies, config, loaded=lambda: self._topics,
            unload=self.unload_topic,
        )  # fmt: skip
        self.backlog_quotas = BacklogQuotaManager(
            lambda: self._topics,
            self.namespace_settings.backlog_quotas,
            self.topic_policies,
            config.backlog_quota_defaults(),
            clock,
        )
        self.limits_monitor = LimitsMonitor(
            lambda: self._topics,
            self.backlog_quotas,
            self.namespace_settings.message_ttl,
            clock,
            default_ttl_s=config.ttl_duration_default_in_seconds,
            quota_interval_s=(
                float(config.backlog_quota_check_interval_in_seconds)
                if config.backlog_quota_check_enabled
                else None
            ),
            expiry_interval_s=config.message_expiry_check_interval_in_minutes * 60.0,
            retention_interval_s=float(config.retention_check_interval_in_seconds),
            cursor_flush_interval_s=float(config.managed_ledger_cursor_position_flush_seconds),
        )
        self._policy_refreshes: set[asyncio.Task[int]] = set()
        self._unwatch_policies = metadata.register_listener(self._on_policies_changed)
        #: Bundle ownership (``braid broker``); ``None``: this broker serves every topic
        #: (``braid standalone``, alone on its metadata store).
        self.ownership: BundleOwnership | None = None
        #: ``non-persistent://`` topics: nothing stored, created on first use (ADR 0062).
        self.non_persistent = NonPersistentTopics(
            self, settings=self._dispatch_settings, clock=clock,
            allow_auto_topic_creation=config.allow_auto_topic_creation,
        )  # fmt: skip
        #: Pulsar's transactions (ADRs 0064, 0065); ``None`` unless transactionCoordinatorEnabled.
        self.transactions = broker_transactions(
            config,
            metadata,
            clock,
            lambda name: self.get_or_create_topic(name, create=False),
            lambda: (self.lookup_url(), self.lookup_url_tls() or ""),
        )
        if self.transactions is not None:  # CommandWatchTcAssignments is served
            self.feature_flags.supports_tc_metadata_discovery = True
        self.commands.register(transaction_commands(self))

    # -- server --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Recover the transaction coordinators (if enabled), bind and start accepting."""
        if self.transactions is not None:
            await self.transactions.start(self.partitioned, self.resources)
        self._server = await asyncio.start_server(
            self._accept,
            host=self.config.bind_address,
            port=self.config.broker_service_port,
            limit=2**20,
        )
        sockets = self._server.sockets
        self._port = int(sockets[0].getsockname()[1]) if sockets else None
        if self._tls_context is not None:
            self._tls_server = await asyncio.start_server(
                self._accept,
                host=self.config.bind_address,
                port=self.config.tls_broker_port,
                limit=2**20,
                ssl=self._tls_context,
                ssl_handshake_timeout=float(self.config.handshake_timeout_seconds),
            )
            tls_sockets = self._tls_server.sockets
            self._tls_port = int(tls_sockets[0].getsockname()[1]) if tls_sockets else None
            log.info("broker listening on %s", self.service_url_tls)
        if self.config.broker_service_compaction_threshold_in_bytes > 0:
            self.compaction_monitor.start()
        self.limits_monitor.start()
        log.info("broker listening on %s", self.service_url)
        log_security_posture(self.config, log)

    @property
    def port(self) -> int:
        if self._port is None:
            raise ServiceNotReady("the broker has not been started")
        return self._port

    @property
    def service_url(self) -> str:
        """``pulsar://host:port`` as clients should reach this broker (the bound port)."""
        host = self.config.advertised_address or self.config.bind_address
        return f"pulsar://{host}:{self.port}"

    @property
    def tls_port(self) -> int | None:
        """The bound ``pulsar+ssl://`` port (``None`` without a TLS listener)."""
        return self._tls_port

    @property
    def service_url_tls(self) -> str | None:
        """``pulsar+ssl://host:port`` (the bound port), or ``None`` without a TLS listener."""
        if self._tls_port is None:
            return None
        host = self.config.advertised_address or self.config.bind_address
        return f"pulsar+ssl://{host}:{self._tls_port}"

    def lookup_url_tls(self, listener: str | None = None) -> str | None:
        """The ``pulsar+ssl://`` URL a LOOKUP is answered with (``None`` without TLS); an
        ``advertisedListeners`` entry with a ``pulsar+ssl://`` URL wins for its listener."""
        if listener or self._listeners:
            tls_urls = self.config.listener_urls(scheme="pulsar+ssl://")
            url = tls_urls.get(listener) if listener else next(iter(tls_urls.values()), None)
            if url is not None:
                return url
        return self.service_url_tls

    def lookup_url(self, listener: str | None = None) -> str:
        """The ``pulsar://`` URL a LOOKUP is answered with.

        With ``advertisedListeners`` configured, a lookup naming a listener gets that listener's
        URL, and one naming none the first listener's (Pulsar's default internal listener);
        without them, :attr:`service_url`.

        Raises:
            UnknownListener: ``listener`` is not one of ``advertisedListeners``.
        """
        listeners = self._listeners
        if listener:
            url = listeners.get(listener)
            if url is None:
                known = ", ".join(listeners) or "none configured"
                raise UnknownListener(
                    f"the broker does not have listener {listener!r} (advertisedListeners: {known})"
                )
            return url
        if listeners:
            return next(iter(listeners.values()))
        return self.service_url

    async def lookup(
        self, name: str, listener: str | None = None, *, authoritative: bool = False
    ) -> LookupAnswer:
        """LOOKUP: where the topic is served (this broker, its bundle's owner, or a broker to
        ask), as :class:`~braid.broker.ownership.BundleOwnership` decides; this broker's own URL
        follows ``listener``."""
        topic = await self.check_topic(name)
        if self.ownership is None:
            return LookupAnswer(self.lookup_url(listener), "", False, True, local=True)
        answer = await self.ownership.lookup(topic, authoritative=authoritative, listener=listener)
        if answer.local:
            return dataclasses.replace(answer, service_url=self.lookup_url(listener))
        return answer

    async def bundles_of(self, topic: TopicName) -> NamespaceBundles:
        """The bundles of the topic's namespace (its policies' ``bundles``, else
        ``defaultNumberOfNamespaceBundles`` equal ones)."""
        policies = await self.namespace_policies(topic)
        return NamespaceBundles.from_policies(
            topic.namespace_name,
            policies.to_json(),
            self.config.default_number_of_namespace_bundles,
        )

    def unload_bundle(
        self, bundle: NamespaceBundle, assigned: AssignedBroker | None = None
    ) -> list[asyncio.Task[None]]:
        """Unload every loaded topic of ``bundle`` now (to ``assigned``, if named); fence the
        transaction coordinators it held."""
        if self.transactions is not None:
            self.transactions.bundle_lost(bundle)
        return self.non_persistent.unload_bundle(bundle, assigned) + [
            self.unload_topic(topic, "bundle unloaded", assigned)
            for name, topic in list(self._topics.items())
            if (parsed := parse_topic_name(name)).namespace_name == bundle.namespace
            and bundle.includes(topic_hash(parsed))
        ]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing:
            writer.close()
            return
        peer = writer.get_extra_info("peername")
        ip = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        refusal = self.connection_limits.admit(ip)
        if refusal is not None:
            refuse_connection(writer, refusal)
            if self.connection_limits.log_due(self.clock.monotonic(), _REFUSAL_LOG_INTERVAL_S):
                log.warning(
                    "refusing connection from %s: %s (%d refused so far)",
                    ip, refusal, self.connection_limits.refused,
                )  # fmt: skip
            return
        try:
            conn = BrokerConnection(
                reader,
                writer,
                registry=self.commands,
                clock=self.clock,
                max_message_size=self.config.max_message_size,
                keepalive_interval_s=float(self.config.keep_alive_interval_seconds),
                handshake_timeout_s=float(self.config.handshake_timeout_seconds),
                feature_flags=self.feature_flags,
                authentication=self.authentication,
                authorization=self.authorization,
            )
            self._connections.add(conn)
            try:
                await conn.run()
            finally:
                self._connections.discard(conn)
        finally:
            self.connection_limits.release(ip)

    async def close(self) -> None:
        """Stop accepting, close every connection, then close every topic (snapshots dedup state
        and flushes cursors through the managed ledgers)."""
        if self._closing:
            return
        self._closing = True
        self._unwatch_policies()
        self.applied_policies.close()
        await self.compaction_monitor.close()
        await self.limits_monitor.close()
        self.topic_events.close()
        if self._server is not None:
            self._server.close()
        if self._tls_server is not None:
            self._tls_server.close()
        for conn in list(self._connections):
            await conn.close()
        for task in list(self._loading.values()):
            task.cancel()
        await self.non_persistent.close()
        if self.transactions is not None:
            await self.transactions.close()
        for topic in list(self._topics.values()):
            try:
                await topic.close()
            except Exception:
                log.exception("closing topic %s failed", topic.name)
        self._topics.clear()
        await asyncio.gather(*self._unloading, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        if self._tls_server is not None:
            await self._tls_server.wait_closed()

    # -- topics --------------------------------------------------------------------------------

    @property
    def topics(self) -> Mapping[str, PersistentTopic]:
        """The topics loaded on this broker, by full name."""
        return self._topics

    def generate_producer_name(self) -> str:
        return f"{self.config.cluster_name}-{self._producer_tag}-{next(self._producer_counter)}"

    # -- storage health ------------------------------------------------------------------------

    def write_refusal(self) -> StorageReadOnly | None:
        """Why nothing can be stored now (the active storage cluster's bookies are read-only:
        full disks), or ``None``."""
        return self.ml_factory.storage.active.write_refusal()

    def storage_status(self) -> dict[str, object]:
        """The storage's health: ``state`` ``read-write`` or ``read-only``, the ``reason``, and
        every bookie's disk state by cluster (the health endpoints report it)."""
        storage = self.ml_factory.storage
        clusters = {
            name: storage.client_for(name).disk_status() for name in storage.cluster_names()
        }
        refusal = self.write_refusal()
        return {
            "state": "read-write" if refusal is None else "read-only",
            "reason": None if refusal is None else str(refusal),
            "clusters": clusters,
        }

    async def namespace_policies(self, topic: TopicName) -> NamespacePolicies:
        """The topic's namespace policies; ``TopicNotFound`` naming the namespace if absent."""
        return await self.namespace_settings.policies(topic)

    async def check_producer_quota(self, topic: str) -> None:
        """Refuse a producer while ``topic`` is over a backlog quota that holds producers."""
        await self.backlog_quotas.check_producer(topic)

    async def check_namespace(self, namespace: str) -> NamespaceName:
        """Validate ``tenant/ns`` and check that it exists (``TopicNotFound`` naming it if not)."""
        try:
            name = NamespaceName.parse(namespace)
        except names.InvalidTopicName as exc:
            raise InvalidTopicName(str(exc)) from exc
        if not await self.resources.namespace_exists(name.tenant, name.namespace):
            raise TopicNotFound(f"namespace {name} does not exist")
        return name

    async def check_topic(self, name: str) -> TopicName:
        """Validate a name and its namespace (what LOOKUP and PARTITIONED_METADATA need)."""
        topic = parse_topic_name(name)
        if str(topic) not in self._topics:
            await self.namespace_policies(topic)
        return topic

    async def get_or_create_topic(
        self, name: str, *, create: bool | None = None
    ) -> PersistentTopic:
        """The loaded topic, loading (and, if allowed, creating) it on first use.

        Args:
            create: force (``True``) or forbid (``False``) creating a missing topic; ``None``
                follows the namespace's auto-topic-creation policy.

        Raises:
            InvalidTopicName, TopicNotFound, ServiceNotReady.
        """
        if self._closing:
            raise ServiceNotReady("the broker is shutting down")
        topic = parse_topic_name(name)
        if topic.domain is TopicDomain.NON_PERSISTENT:
            raise not_allowed("this operation (it needs stored messages)", str(topic))
        if self.deletion.is_deleting(str(topic)):
            raise ServiceNotReady(f"topic {topic} is being deleted")
        return await self._get_or_load(topic, create)

    async def serve_topic(self, name: str) -> PersistentTopic | NonPersistentTopic:
        """The topic a producer or consumer attaches to, stored or not (created if allowed)."""
        topic = parse_topic_name(name)
        if topic.domain is TopicDomain.NON_PERSISTENT:
            return await self.non_persistent.get_or_create(topic)
        return await self.get_or_create_topic(name)

    async def _get_or_load(self, topic: TopicName, create: bool | None) -> PersistentTopic:
        key = str(topic)
        loaded = self._topics.get(key)
        if loaded is not None:
            return loaded
        task = self._loading.get(key)
        if task is None:
            task = asyncio.ensure_future(self._load_topic(topic, create))
            self._loading[key] = task
            task.add_done_callback(lambda _: self._loading.pop(key, None))
        return await asyncio.shield(task)

    async def _load_topic(self, topic: TopicName, create: bool | None) -> PersistentTopic:
        policies = await self.namespace_policies(topic)
        bundle = None
        if self.ownership is not None:
            bundle = await self.ownership.check_serving(topic)
        self.backlog_quotas.remember_namespace(
            topic.tenant, topic.namespace, policies.backlog_quota_map
        )
        if policies.compaction_threshold:
            self.compaction_monitor.start()
        ml_name = managed_ledger_name(topic)
        allowed = policies.is_auto_topic_creation_allowed(self.config.allow_auto_topic_creation)
        if topic.domain is TopicDomain.SEGMENT:
            # Only the scalable-topic controller creates segments (with their subscriptions'
            # cursors); a client's producer or consumer never does.
            allowed = False
        elif topic.domain is TopicDomain.PERSISTENT:
            allowed = await self._partition_rule(topic, allowed, ml_name)
        if create is not None:
            allowed = create
        elif allowed and self.creation_guards and not await self.ml_factory.exists(ml_name):
            for guard in list(self.creation_guards):  # persistent:// only: segments never are
                await guard(topic)
        if not allowed and not await self.ml_factory.exists(ml_name):
            raise TopicNotFound(
                f"topic {topic} does not exist and auto topic creation is disabled for "
                f"namespace {topic.namespace_name}"
            )
        applied = await self.applied_policies.resolve(topic)
        ledger_config = applied.ledger_config(self._ledger_config(policies))
        ledger = await self.ml_factory.open(
            ml_name, ledger_config_for(topic, ledger_config), create_if_missing=True
        )
        try:
            loaded = await PersistentTopic.load(
                str(topic),
                ledger,
                dedup_enabled=applied.deduplication_enabled,
                settings=self._dispatch_settings,
                clock=self.clock,
                on_drained=self._subscription_drained,
                on_fenced=self._topic_fenced,
            )
            if self.transactions is not None:
                await self.transactions.attach(loaded)
        except BaseException:
            await ledger.close()
            raise
        if self._closing:
            await loaded.close()
            raise ServiceNotReady("the broker is shutting down")
        if bundle is not None and self.ownership is not None and not self.ownership.owns(bundle):
            await loaded.close()
            raise NotOwner(f"lost namespace bundle {bundle} while loading {topic}")
        every = self.config.scalable_topic_key_hash_sample_interval
        if topic.domain is TopicDomain.SEGMENT and every > 0:
            # Where the segment's keys hash: the scalable layer's split point (load reports).
            loaded.key_sampler = KeyHashSampler.for_segment(str(topic), every=every)
        self._topics[str(topic)] = loaded
        log.info("loaded topic %s (managed ledger %s)", topic, ml_name)
        return loaded

    async def _partition_rule(self, topic: TopicName, allowed: bool, ml_name: str) -> bool:
        """Whether a missing ``persistent://`` topic may be created, partitions considered: a
        partition of a partitioned topic always may (below its count, never above it); the
        partitioned name itself is never served as a topic."""
        index = partition_index(topic.local_name)
        if index >= 0:
            base = TopicName(
                topic.domain, topic.tenant, topic.namespace, partitioned_topic_of(topic.local_name)
            )
            count = await self.partitioned.partitions(base)
            return allowed if count == 0 else index < count
        if await self.partitioned.partitions(topic) and not await self.ml_factory.exists(ml_name):
            raise NotSupported(
                f"{topic} is a partitioned topic: produce to and consume from its partitions "
                f"({topic.local_name}{PARTITION_SUFFIX}N), as Pulsar clients do after "
                "PARTITIONED_METADATA"
            )
        return allowed

    async def partitioned_metadata(self, name: str, *, auto_create: bool = True) -> int:
        """PARTITIONED_METADATA (see :meth:`PartitionedTopicAdmin.metadata`)."""
        return await self.partitioned_admin.metadata(name, auto_create=auto_create)

    async def create_partitioned_topic(self, name: str, partitions: int) -> None:
        """Create a partitioned topic and its partitions (``PartitionedTopicExists``)."""
        await self.partitioned_admin.create(name, partitions)

    async def update_partitioned_topic(self, name: str, partitions: int) -> None:
        """Grow a partitioned topic to ``partitions`` partitions (creating the new ones)."""
        await self.partitioned_admin.grow(name, partitions)

    async def delete_partitioned_topic(self, name: str, *, force: bool = False) -> None:
        """Delete a partitioned topic (``PartitionedTopicNotFound``, ``TopicBusy``)."""
        await self.partitioned_admin.delete(name, force=force)

    def _ledger_config(self, policies: NamespacePolicies) -> ManagedLedgerConfig:
        config = self.config.managed_ledger_config()
        if policies.retention is not None:
            config = dataclasses.replace(
                config,
                retention_time_s=retention_minutes_to_seconds(
                    policies.retention.retention_time_in_minutes
                ),
                retention_size_bytes=retention_mb_to_bytes(policies.retention.retention_size_in_mb),
            )
        if policies.persistence is not None:
            config = dataclasses.replace(
                config,
                ensemble=policies.persistence.bookkeeper_ensemble,
                write_quorum=policies.persistence.bookkeeper_write_quorum,
                ack_quorum=policies.persistence.bookkeeper_ack_quorum,
            )
        return config

    async def refresh_ledger_configs(self, tenant: str, namespace: str) -> int:
        """Give the loaded topics of a namespace its current policies' managed-ledger settings
        (ensemble and quorums apply from each one's next ledger); returns how many."""
        config = self._ledger_config(await self.resources.get_namespace_policies(tenant, namespace))
        refreshed = 0
        for name in list(self._topics):
            topic = parse_topic_name(name)
            if (topic.tenant, topic.namespace) == (tenant, namespace):
                own = await self.applied_policies.ledger_config(topic, config)
                await self.ml_factory.open(
                    managed_ledger_name(topic), ledger_config_for(topic, own)
                )
                refreshed += 1
        return refreshed

    def _on_policies_changed(self, event: Notification) -> None:
        if event.path.startswith((POLICIES_ROOT, TOPIC_POLICIES_ROOT)):
            self.backlog_quotas.forget()  # the producer check reads the quotas again
        # /admin/policies/{tenant}/{namespace}: this broker's topics follow a change made
        # through any broker.
        parts = event.path.split("/")
        if len(parts) != 5 or event.path.rsplit("/", 2)[0] != POLICIES_ROOT:
            return
        if event.type is not NotificationType.MODIFIED or self._closing:
            return
        task = asyncio.get_running_loop().create_task(
            self.refresh_ledger_configs(parts[3], parts[4])
        )
        self._policy_refreshes.add(task)
        task.add_done_callback(self._policy_refresh_done)

    def _policy_refresh_done(self, task: asyncio.Task[int]) -> None:
        self._policy_refreshes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("refreshing managed-ledger settings failed: %r", task.exception())

    async def terminate_topic(self, name: str) -> Position:
        """Terminate a topic: no more messages; returns its last position."""
        topic = await self.get_or_create_topic(name, create=False)
        return await topic.terminate()

    def _topic_fenced(self, topic: PersistentTopic) -> None:
        """Another writer took ``topic``'s managed ledger over: unload it (its clients reconnect;
        the next use recovers the ledger as a new owner does, ADR 0040)."""
        self.unload_topic(topic, "fenced")

    def unload_topic(
        self, topic: PersistentTopic, why: str = "unloaded", to: AssignedBroker | None = None
    ) -> asyncio.Task[None]:
        """Forget and close ``topic`` now: its clients reconnect (to ``to``, if named) and the
        next use loads it again."""
        if self._topics.get(topic.name) is topic:
            del self._topics[topic.name]
        task = asyncio.ensure_future(self._close_unloaded(topic, why, to))
        self._unloading.add(task)
        task.add_done_callback(self._unloading.discard)
        return task

    async def _close_unloaded(
        self, topic: PersistentTopic, why: str, to: AssignedBroker | None
    ) -> None:
        try:
            await topic.close(to)
        except Exception:
            log.exception("closing unloaded topic %s (%s) failed", topic.name, why)
        log.info(
            "unloaded topic %s (%s; clients sent to %s)",
            topic.name,
            why,
            to and to.service_url,
        )

    def _subscription_drained(self, topic: str, subscription: str) -> None:
        for listener in list(self.drain_listeners):
            try:
                listener(topic, subscription)
            except Exception:
                log.exception("drain listener failed for %s/%s", topic, subscription)

    async def topic_exists(self, name: str) -> bool:
        """Whether the topic is loaded here or stored (without loading or creating it)."""
        topic = parse_topic_name(name)
        if str(topic) in self._topics or str(topic) in self.non_persistent.topics:
            return True
        if topic.domain is TopicDomain.NON_PERSISTENT:
            return False
        return await self.ml_factory.exists(managed_ledger_name(topic))

    async def delete_topic(self, name: str, *, force: bool = False) -> None:
        """Delete a topic and its data, and its schema and topic policies unless it is one
        partition of a partitioned topic (the others share them).

        Without ``force`` the delete is refused while producers or consumers are connected; with
        it they are disconnected (they reconnect, and auto-creation decides what they find).

        Raises:
            TopicNotFound, TopicBusy (in use).
        """
        await self.deletion.delete_topic(parse_topic_name(name), force=force)

    async def load_stored_topic(self, topic: TopicName) -> PersistentTopic:
        """Load a stored topic without creating it (what a delete needs before it deletes)."""
        return await self._get_or_load(topic, create=False)

    def forget_topic(self, name: str) -> PersistentTopic | None:
        """Take a loaded topic out of the registry (its caller closes it)."""
        return self._topics.pop(name, None)

    async def compact_topic(self, name: str) -> None:
        """Start compacting a topic (Pulsar's ``PUT .../compaction``).

        Raises:
            TopicNotFound, CompactionInProgress.
        """
        topic = await self.get_or_create_topic(name, create=False)
        topic.compaction.trigger()

    def watch_compaction_thresholds(self) -> None:
        """Make sure the compaction monitor runs (a namespace threshold was just set)."""
        self.compaction_monitor.start()

    async def compaction_status(self, name: str) -> tuple[CompactionStatus, str]:
        """The last compaction's status and error (Pulsar's ``LongRunningProcessStatus``)."""
        topic = await self.get_or_create_topic(name, create=False)
        return topic.compaction.status, topic.compaction.last_error

    def topic_stats(self, name: str) -> dict[str, object]:
        """Stats of a loaded topic (the admin API loads it first)."""
        key = str(parse_topic_name(name))
        if key.startswith(f"{TopicDomain.NON_PERSISTENT.value}://"):
            return self.non_persistent.loaded(key).stats()
        topic = self._topics.get(key)
        if topic is None:
            raise TopicNotFound(f"topic {key} is not loaded on this broker")
        return topic.stats()

    async def list_topics(self, namespace: str) -> list[str]:
        """Persistent topics of ``tenant/ns`` (loaded or stored)."""
        prefix = f"persistent://{namespace}/"
        found = {name for name in self._topics if name.startswith(prefix)}
        ml_prefix = f"{namespace}/persistent/"
        for ml_name in await self.ml_factory.list():
            if ml_name.startswith(ml_prefix):
                found.add(prefix + ml_name[len(ml_prefix) :])
        return sorted(found)
