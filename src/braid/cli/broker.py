"""``braid broker`` and ``braid initialize-cluster-metadata``: Braid as a cluster of brokers.

:class:`BrokerServer` is :class:`~braid.cli.standalone.StandaloneServer` with the differences a
broker among others needs:

* it stores nothing in its process: ledgers go to the ``braid bookie`` processes registered in the
  metadata store (``standaloneBookies=0``), with ``managedLedgerDefault*`` ensemble and quorums;
* it refuses to start on a store no ``initialize-cluster-metadata`` prepared for ``clusterName``
  (:func:`braid.broker.cluster_metadata.check_initialized`) and does not claim the store for
  itself (no :mod:`~braid.broker.store_guard`): brokers share the store and own *bundles*
  (:mod:`braid.broker.ownership`) - each topic is served by the one broker owning its bundle;
  LOOKUP, HTTP lookup and the admin API send clients there;
* it registers in ``/loadbalance/brokers`` and stands for leader broker, and runs the load
  manager (:mod:`braid.broker.load_manager`): load reports, the leader's placement, shedding and
  bundle splits;
* on SIGTERM it hands its bundles over first (clients are sent to their new owners) and exits 0;
* losing its metadata session, it drops every bundle, closes their topics and exits 1 (Pulsar's
  ``zookeeperSessionExpiredPolicy=shutdown``): a supervisor restarts it with a new session;
* scalable topics span brokers (ADR 0051): each ``segment://`` topic is placed by bundle like any
  topic, the controller reaches segments owned elsewhere through their owner's **internal
  listener** (``internalWebServicePort``, :mod:`braid.admin.internal`, guarded by the cluster's
  broker secret, :mod:`braid.broker.broker_secret`), which the broker announces in the registry;
* a storage-cluster switch (PIP-470) orchestrated here re-attributes each cursor on the broker
  owning its topic, through that broker's internal listener (ADR 0061); a storage cluster
  registered here is a set of ``braid bookie`` processes registered in its
  ``metadataServiceUri``.
* with TLS configured, the internal listener serves HTTPS only and calls to other brokers use
  ``brokerClient*`` TLS settings (:mod:`braid.broker.cluster_tls`, ADR 0066).

:func:`run_initialize` writes a cluster's metadata (Pulsar's ``PulsarClusterMetadataSetup``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
from typing import IO, TYPE_CHECKING, Any

from braid.broker.broker_registry import BrokerRegistry
from braid.broker.cluster_tls import check_https_admin, check_tls_transaction_port, peer_tls
from braid.broker.config import BrokerConfig
from braid.broker.resources import BrokerResources
from braid.broker.service import BrokerService
from braid.cli.standalone import (
    StandaloneServer,
    _install_signal_handlers,
    run_server_process,
)
from braid.core.errors import BraidError, InvalidInputError
from braid.metadata import MetadataStore, open_store

if TYPE_CHECKING:
    from braid.admin.server import AdminServer
    from braid.broker.ownership import BundleOwnership
    from braid.scalable.segment_routing import RoutedSegmentAdmin

log = logging.getLogger(__name__)


class SeparateConfigurationStore(InvalidInputError):
    """``configurationMetadataStoreUrl`` names another store (not supported yet)."""


def broker_config(config: BrokerConfig) -> BrokerConfig:
    """The settings a cluster broker runs with: the registered bookies.

    Raises:
        SeparateConfigurationStore: the configuration store is not the metadata store.
    """
    conf_url = config.configuration_metadata_store_url
    if conf_url and conf_url != config.metadata_store_url:
        raise SeparateConfigurationStore(
            f"configurationMetadataStoreUrl={conf_url} differs from metadataStoreUrl="
            f"{config.metadata_store_url}: a separate configuration store is not supported yet; "
            "give both the same URL"
        )
    return dataclasses.replace(config, standalone_bookies=0)


class BrokerServer(StandaloneServer):
    """One broker of a cluster (see the module docstring)."""

    def __init__(self, config: BrokerConfig) -> None:
        super().__init__(broker_config(config))
        #: Set when the broker must stop on its own (its metadata session is lost).
        self.fatal = asyncio.Event()
        self.fatal_reason = ""
        self._broker_secret = ""
        #: How this broker reaches the others over HTTPS (``brokerClient*``, cluster_tls.py);
        #: made here so a file that does not load stops the start-up.
        self._peer_tls = peer_tls(self.config)
        check_https_admin(self.config)
        check_tls_transaction_port(self.config)
        self._segments: RoutedSegmentAdmin | None = None
        self.internal: AdminServer | None = None

    async def _claim_store(self, metadata: MetadataStore) -> None:
        from braid.broker.broker_secret import load_broker_secret
        from braid.broker.cluster_metadata import check_initialized

        await check_initialized(metadata, self.config.cluster_name, self.config.metadata_store_url)
        self._broker_secret = await load_broker_secret(metadata, self.config.cluster_name)
        # Registered before the broker's closer, so it runs after it: bundles are given up once
        # their topics are closed.
        self._closers.append(("bundle ownership", self._release_bundles))

    async def _prepare_namespaces(self, resources: BrokerResources) -> None:
        return None  # initialize-cluster-metadata made them

    def _segment_routing(self) -> dict[str, Any]:
        from braid.scalable.segment_routing import (
            DrainRelay,
            InternalApiClient,
            RoutedSegmentAdmin,
        )
        from braid.scalable.segments import SegmentAdmin

        assert self.broker is not None and self.registry is not None
        assert self.metadata is not None
        internal = InternalApiClient(self.registry, self._broker_secret, tls=self._peer_tls)
        self._segments = RoutedSegmentAdmin(self.broker, internal)
        segments: SegmentAdmin = self._segments  # checked against the protocol here
        relay = DrainRelay(self.metadata, internal, self.broker.service_url)
        self._count_remote_backlogs(self._segments)
        return {"segments": segments, "drain_relay": relay, "peer_tls": self._peer_tls}

    def _count_remote_backlogs(self, segments: RoutedSegmentAdmin) -> None:
        """A scalable topic's backlog quota counts the segments other brokers serve too."""
        from braid.scalable.dag_backlog import DagBacklogs
        from braid.scalable.resources import ScalableTopicResources

        assert self.broker is not None and self.metadata is not None
        backlogs = DagBacklogs(
            ScalableTopicResources(self.metadata),
            segments,
            self.clock.monotonic,
            max_age_s=float(self.config.backlog_quota_check_interval_in_seconds),
        )
        self.broker.backlog_quotas.remote = backlogs.elsewhere

    async def _before_register(self, registry: BrokerRegistry) -> None:
        """Start the internal listener and put its URL in the registry entry."""
        from braid.admin.internal import create_internal_app
        from braid.admin.server import AdminServer
        from braid.broker.cluster_tls import internal_server_context

        scalable = self.scalable

        def drained(segment: str, subscription: str) -> None:
            if scalable is not None:
                scalable.on_subscription_drained(segment, subscription, relay=False)

        broker = self.broker
        assert broker is not None
        local = self._segments.local if self._segments is not None else None
        app = create_internal_app(
            local,
            self._broker_secret,
            drained,
            lookup=broker.lookup,
            storage_clusters=self.storage_clusters,
        )
        config = self.config
        self.internal = AdminServer(
            app,
            config.bind_address,
            config.internal_web_service_port,
            ssl_context=internal_server_context(config),
        )
        self._closers.append(("internal listener", self.internal.stop))
        await self.internal.start()
        scheme = self.internal.url.partition(":")[0]  # https when it serves TLS
        registry.announce_internal_url(
            f"{scheme}://{config.advertised_address}:{self.internal.port}"
        )

    def _before_serving(self, broker: BrokerService, registry: BrokerRegistry) -> None:
        from braid.broker.owner_probe import OwnerProbe
        from braid.broker.ownership import DEAD_OWNER_MARGIN_S, BundleOwnership

        assert self.metadata is not None
        session_s = self.config.metadata_store_session_timeout_millis / 1000
        ownership = BundleOwnership(
            self.metadata,
            registry,
            broker.bundles_of,
            on_lost=broker.unload_bundle,
            on_session_lost=self._session_lost,
            probe=OwnerProbe(self.clock.monotonic),
            dead_owner_wait_s=session_s + DEAD_OWNER_MARGIN_S,
        )
        broker.ownership = ownership
        self._route_cursor_promotes(ownership, registry)
        if broker.transactions is not None:  # coordinators by assign-partition ownership
            from braid.broker.security_settings import broker_client_credentials

            broker.transactions.serve_on_cluster(
                ownership,
                registry,
                broker.lookup,
                broker_client_credentials(self.config),
                tls=self._peer_tls,
            )

    def _route_cursor_promotes(self, ownership: BundleOwnership, registry: BrokerRegistry) -> None:
        """PIP-470: a switch orchestrated here re-attributes each cursor on the broker owning
        it, through that broker's internal listener (ADR 0061)."""
        from braid.clusters.cursor_owners import BundleCursorOwners, InternalPromoteForwarder
        from braid.scalable.segment_routing import InternalApiClient

        assert self.storage_clusters is not None
        self.storage_clusters.cursors.route_via(
            BundleCursorOwners(ownership),
            InternalPromoteForwarder(
                InternalApiClient(registry, self._broker_secret, tls=self._peer_tls)
            ),
        )

    async def _release_bundles(self) -> None:
        if self.broker is not None and self.broker.ownership is not None:
            await self.broker.ownership.release_all()
            self.broker.ownership.close()

    async def _after_registered(self, registry: BrokerRegistry) -> None:
        from braid.broker.load_manager import LoadManager
        from braid.broker.ownership import OwnerData
        from braid.broker.security_settings import broker_client_credentials

        assert self.broker is not None and self.broker.ownership is not None
        assert self.metadata is not None
        self.broker.ownership.announce(
            OwnerData(
                self.service_url,
                self.web_service_url,
                listeners=self.listeners(),
                http_url_tls=self.web_service_url_tls or "",
            )
        )
        self.load_manager = LoadManager(
            self.broker,
            registry,
            self.broker.ownership,
            self.metadata,
            self.config.load_balancer,
            self.clock,
            credentials=broker_client_credentials(self.config),
            tls=self._peer_tls,
        )
        await super()._after_registered(registry)
        self.load_manager.start()
        if self.broker.transactions is not None:
            self.broker.transactions.start_keeper()
        # The last closer registered runs first: clients move before anything else stops.
        self._closers.append(("bundle hand-over", self._hand_over))

    async def _hand_over(self) -> None:
        """SIGTERM: leave the registry (no new bundle comes here, the leadership moves), then
        unload every owned bundle to the other brokers (bounded by brokerShutdownTimeoutMs)."""
        assert self.load_manager is not None and self.registry is not None
        try:
            if not self.fatal.is_set():
                await self.registry.unregister()
                moved = await self.load_manager.hand_over()
                log.info("handed %d bundles over to other brokers", moved)
        finally:
            await self.load_manager.close()

    def _session_lost(self) -> None:
        self.fatal_reason = (
            "the metadata session was lost: this broker's bundles may already be owned by "
            "another broker, so it stopped serving them and exits"
        )
        self.fatal.set()


async def serve(config: BrokerConfig, *, out: IO[str] | None = None) -> int:
    """Run a broker until SIGINT/SIGTERM (exit 0) or the loss of its session (exit 1)."""
    out = out or sys.stdout
    stop = asyncio.Event()
    _install_signal_handlers(stop)
    server = BrokerServer(config)
    await server.start()
    config.gc_policy().after_startup()
    try:
        print(f"Braid broker of cluster {config.cluster_name} is ready", file=out)
        print(f"  broker service URL: {server.service_url}", file=out)
        print(f"  admin/web URL:      {server.web_service_url}", file=out)
        print(f"  metadata store:     {config.metadata_store_url}", file=out, flush=True)
        stopping = asyncio.ensure_future(stop.wait())
        fatal = asyncio.ensure_future(server.fatal.wait())
        await asyncio.wait([stopping, fatal], return_when=asyncio.FIRST_COMPLETED)
        for waiter in (stopping, fatal):
            waiter.cancel()
    finally:
        await server.close()
    if server.fatal.is_set():
        log.error("broker stopped: %s", server.fatal_reason)
        print(f"Braid broker stopped: {server.fatal_reason}", file=out, flush=True)
        return 1
    print("Braid broker stopped cleanly", file=out, flush=True)
    return 0


def run_broker(config: BrokerConfig) -> int:
    """The ``braid broker`` command; returns the process exit code."""
    return run_server_process(config, lambda: serve(config), "broker")


async def _initialize(args: argparse.Namespace) -> list[str]:
    from braid.broker.cluster_metadata import ClusterData, initialize_cluster_metadata

    store = await open_store(args.metadata_store)
    try:
        conf_url = args.configuration_metadata_store or args.metadata_store
        conf = store if conf_url == args.metadata_store else await open_store(conf_url)
        try:
            return await initialize_cluster_metadata(
                store,
                conf,
                args.cluster,
                ClusterData(args.web_service_url, args.broker_service_url),
                namespace_bundles=args.default_namespace_bundle_number,
                transaction_coordinators=args.num_transaction_coordinators,
            )
        finally:
            if conf is not store:
                await conf.close()
    finally:
        await store.close()


def run_initialize(args: argparse.Namespace, *, out: IO[str] | None = None) -> int:
    """The ``braid initialize-cluster-metadata`` command; returns the exit code."""
    out = out or sys.stdout
    try:
        created = asyncio.run(_initialize(args))
    except (BraidError, OSError) as exc:
        print(f"braid initialize-cluster-metadata: error: {exc}", file=sys.stderr)
        return 1
    what = ", ".join(created) if created else "nothing (it was initialized before)"
    print(f"Cluster metadata for {args.cluster!r} set up; created: {what}", file=out)
    return 0


__all__ = ["BrokerServer", "broker_config", "run_broker", "run_initialize", "serve"]
