"""The admin REST API (FastAPI): tenants, namespaces, persistent topics, health and ``/metrics``.

Paths and status codes follow Pulsar's ``/admin/v2`` API so ``pulsar-admin``-style tooling and
habits carry over. :func:`create_app` assembles one router per resource group, each in its own
module: the broker itself (:mod:`~braid.admin.brokers`), tenants (:mod:`~braid.admin.tenants`)
and namespaces with their policies (:mod:`~braid.admin.namespaces`), stored in
:class:`~braid.broker.resources.BrokerResources`; persistent topics
(:mod:`~braid.admin.topics`), schemas, partitioned topics, scalable topics and bookie clusters,
served by the broker (:class:`TopicAdmin`, implemented by ``BrokerService``), which runs in the
same event loop; and HTTP lookup. Errors are JSON ``{"reason": ...}`` (see
:mod:`braid.admin.errors`). The OpenAPI document is at ``/openapi.json`` and browsable at
``/docs``. ``/metrics`` is the Prometheus text exposition (:mod:`braid.admin.metrics`). A
namespace's PIP-483 ``scalableTopicAutoScalePolicy`` override is validated against the broker's
``broker.conf`` policy; the topic-level one is served with the scalable-topic endpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from fastapi import APIRouter, FastAPI, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from braid.admin.authentication import AuthenticationMiddleware
from braid.admin.authorization import AuthorizationMiddleware
from braid.admin.autoscale_decisions import autoscale_decisions_router
from braid.admin.backlog_limits import backlog_limits_router
from braid.admin.bookie_clusters import bookie_clusters_router
from braid.admin.bookies import bookies_router
from braid.admin.brokers import brokers_router
from braid.admin.bundles import BundleService, bundles_router
from braid.admin.clusters import clusters_router
from braid.admin.console import mount_console
from braid.admin.cross_site import CrossSiteGuard, CrossSitePolicy
from braid.admin.errors import install_error_handlers
from braid.admin.lookup import LookupService, lookup_router
from braid.admin.metrics import metrics_registry
from braid.admin.migration import migration_router
from braid.admin.namespace_topics import NamespaceTopics
from braid.admin.namespaces import namespaces_router
from braid.admin.non_persistent_topics import NonPersistentAdmin, non_persistent_router
from braid.admin.owner_redirect import install_owner_redirect
from braid.admin.partitioned import PartitionAdmin, partitioned_router
from braid.admin.permissions import permissions_router
from braid.admin.scalable import scalable_router
from braid.admin.schemas import schemas_router
from braid.admin.stale_reads import StaleReadHeader
from braid.admin.tenants import tenants_router
from braid.admin.topic_operations import TopicOperationsBroker, topic_operations_router
from braid.admin.topic_settings import PolicyResolver, topic_settings_router
from braid.admin.topics import topics_router
from braid.admin.transaction_peers import TransactionPeers
from braid.admin.transactions import TransactionsBroker, transactions_router
from braid.broker.authorization import AuthorizationService
from braid.broker.broker_registry import BrokerRegistry
from braid.broker.cluster_metadata import ClusterData
from braid.broker.cluster_tls import PeerTls
from braid.broker.config import BrokerConfig
from braid.broker.load_manager import LoadManager
from braid.broker.partitions import PARTITIONABLE
from braid.broker.resources import BrokerResources
from braid.broker.schemas.topic_schemas import TopicSchemas
from braid.broker.security_settings import broker_client_credentials
from braid.broker.topic_policies import TopicPolicies
from braid.clock import Clock, SystemClock
from braid.clusters.service import StorageClusterService
from braid.core.autoscale_policy import AutoScalePolicy
from braid.scalable.autoscale_policies import AutoScalePolicies
from braid.scalable.service import ScalableTopicService
from braid.security.authentication import AuthenticationService
from braid.security.authorization import AuthorizationSettings
from braid.storage.autorecovery import AutoRecoveryService, BookieAdmin
from braid.storage.autorecovery.metrics import AutoRecoveryCollector


class TopicAdmin(
    TopicOperationsBroker,
    PartitionAdmin,
    LookupService,
    NonPersistentAdmin,
    TransactionsBroker,
    Protocol,
):
    """What the admin API needs from the broker (``BrokerService`` provides it)."""

    @property
    def topics(self) -> Mapping[str, Any]:
        """The loaded topics, by name (``/metrics`` reads their counters)."""
        ...

    def watch_compaction_thresholds(self) -> None: ...
    @property
    def schemas(self) -> TopicSchemas: ...

    def storage_status(self) -> Mapping[str, object]: ...

    @property
    def applied_policies(self) -> PolicyResolver:
        """Policies in force per topic (topic, namespace, broker level)."""
        ...


def create_app(
    config: BrokerConfig,
    resources: BrokerResources,
    broker: TopicAdmin,
    scalable: ScalableTopicService | None = None,
    storage_clusters: StorageClusterService | None = None,
    bookies: BookieAdmin | None = None,
    auto_recovery: AutoRecoveryService | None = None,
    authentication: AuthenticationService | None = None,
    clock: Clock | None = None,
    registry: BrokerRegistry | None = None,
    owner_redirect: bool = False,
    bundle_service: BundleService | None = None,
    load_manager: Callable[[], LoadManager | None] = lambda: None,
    authorization: AuthorizationService | None = None,
    peer_tls: PeerTls | None = None,
) -> FastAPI:
    """Build the admin application.

    Args:
        config: the broker's configuration (cluster name, defaults reported by the API).
        resources: tenants and namespaces.
        broker: topic operations.
        scalable: the scalable-topic service; ``None`` leaves ``/scalable`` and ``/segments``
            out (scalable topics disabled).
        storage_clusters: PIP-470's service; ``None`` leaves ``/bookie-clusters`` out.
        bookies: the home cluster's bookie list and decommission; ``None`` leaves ``/bookies``
            out.
        auto_recovery: auto-recovery run by this broker, whose counters ``/metrics`` shows.
        authentication: the broker's authentication service; when enabled, every request but
            ``/health`` and ``/metrics`` needs credentials (:mod:`braid.admin.authentication`).
        clock: the wall clock tokens' expiry is checked against (the system clock by default).
        registry: the broker registry (``/brokers/{cluster}``, ``/brokers/leaderBroker``).
        owner_redirect: redirect topic calls to the topic's owner (brokers with bundle
            ownership; :mod:`braid.admin.owner_redirect`).
        bundle_service: the broker's bundle operations (``/namespaces/.../bundles``, unload,
            split; :mod:`braid.admin.bundles`); ``None`` leaves them out.
        load_manager: the broker's load manager, once it runs (``braid broker``).
        authorization: the broker's authorization service; when enabled, every request is
            checked against the caller's role (:mod:`braid.admin.authorization`).
        peer_tls: how this broker calls the other brokers' admin API (a namespace unload
            forwarded to bundle owners; ``braid broker``).
    """
    if authorization is None:
        authorization = AuthorizationService(AuthorizationSettings(), resources)
    app = FastAPI(
        title="Braid admin API",
        version="v2",
        description="Pulsar-compatible admin REST API of a Braid broker: tenants, namespaces, "
        'topics, scalable topics and their segments, and health. Errors are JSON {"reason": ...} '
        "with Pulsar's HTTP statuses.",
    )
    _install_middleware(app, config, broker, owner_redirect, authorization, authentication, clock)
    v2 = APIRouter(prefix="/admin/v2")

    # PIP-483: the namespace's auto-scale override (checked against broker.conf's policy).
    if scalable is not None:
        policies = scalable.auto_scale.policies
    else:
        policies = AutoScalePolicies(
            AutoScalePolicy.from_broker_config(config.scalable_topic_settings),
            lambda tenant, namespace: _no_override(),
        )

    v2.include_router(
        brokers_router(config.cluster_name, resources, broker.storage_status, registry)
    )
    # Every topic kind counts for a namespace delete; force deletes them (ADR 0044).
    namespace_topics = NamespaceTopics(resources, broker, scalable)
    v2.include_router(
        tenants_router(
            config.cluster_name,
            resources,
            namespace_topics.delete_namespaces if config.force_delete_tenant_allowed else None,
        )
    )
    v2.include_router(
        namespaces_router(
            resources,
            policies,
            list_topics=namespace_topics.names,
            watch_compaction_thresholds=broker.watch_compaction_thresholds,
            delete_topics=namespace_topics.delete_all,
            force_delete_allowed=config.force_delete_namespace_allowed,
        )
    )
    v2.include_router(topics_router(resources, broker))
    if bundle_service is not None:
        v2.include_router(
            bundles_router(
                resources,
                bundle_service,
                load_manager,
                default_bundles=config.default_number_of_namespace_bundles,
                peer_tls=peer_tls,
            )
        )
    v2.include_router(permissions_router(authorization))
    own = ClusterData(
        config.web_service_url,
        f"pulsar://{config.advertised_address}:{config.broker_service_port}",
    )
    v2.include_router(clusters_router(config.cluster_name, resources.metadata, own))
    v2.include_router(topic_operations_router(broker))
    v2.include_router(backlog_limits_router(resources, TopicPolicies(resources.metadata)))
    v2.include_router(
        topic_settings_router(resources, TopicPolicies(resources.metadata), broker.applied_policies)
    )
    v2.include_router(schemas_router(broker.schemas, resources))
    if scalable is not None and scalable.migrations is not None:
        v2.include_router(migration_router(scalable.migrations))
    for domain in PARTITIONABLE:
        v2.include_router(
            partitioned_router(
                broker, resources, auto_creation_default=config.allow_auto_topic_creation,
                domain=domain,
            )
        )  # fmt: skip
    # After the partitioned routes: its catch-all refuses operations on stored messages.
    v2.include_router(non_persistent_router(resources, broker))
    if scalable is not None:
        v2.include_router(scalable_router(scalable, resources.namespace_exists))
        v2.include_router(autoscale_decisions_router(scalable))
    if storage_clusters is not None:
        v2.include_router(bookie_clusters_router(storage_clusters))
    if bookies is not None:
        v2.include_router(bookies_router(bookies))
    app.include_router(v2)
    own_service_url = f"pulsar://{config.advertised_address}:{config.broker_service_port}"
    peers = TransactionPeers(
        registry, tls=peer_tls, credentials=lambda: broker_client_credentials(config)
    )
    app.include_router(transactions_router(broker, own_service_url, peers))  # /admin/v3/...
    app.include_router(lookup_router(broker))
    mount_console(app, broker.topics, scalable)  # /console: braid.admin.console

    _install_health_and_metrics(app, config, broker, scalable, storage_clusters, auto_recovery)
    return app


def _install_middleware(
    app: FastAPI,
    config: BrokerConfig,
    broker: TopicAdmin,
    owner_redirect: bool,
    authorization: AuthorizationService,
    authentication: AuthenticationService | None,
    clock: Clock | None,
) -> None:
    """Error handlers and the middleware stack, outermost last: authentication, authorization,
    stale-read marking, the cross-site guard, the owner redirect."""
    install_error_handlers(app)
    if owner_redirect:
        install_owner_redirect(app, broker)
    # Refuse state-changing requests a web page could send cross-site (ADR 0044).
    app.add_middleware(CrossSiteGuard, policy=CrossSitePolicy.for_broker(config))
    # Answers served from remembered metadata during a store outage say so (ADR 0044).
    app.add_middleware(StaleReadHeader)
    # Inside authentication (added before it): the caller's role is known when it runs.
    app.add_middleware(AuthorizationMiddleware, service=authorization)
    if authentication is not None and authentication.enabled:
        app.add_middleware(
            AuthenticationMiddleware, service=authentication, clock=clock or SystemClock()
        )


def _install_health_and_metrics(
    app: FastAPI,
    config: BrokerConfig,
    broker: TopicAdmin,
    scalable: ScalableTopicService | None,
    storage_clusters: StorageClusterService | None,
    auto_recovery: AutoRecoveryService | None,
) -> None:
    """``/health`` and ``/metrics`` (the two paths that need no credentials)."""

    @app.get(
        "/health",
        tags=["brokers"],
        summary="Liveness of the process, and whether it is degraded (storage read-only)",
    )
    async def health() -> dict[str, object]:
        # 200 whenever the process serves: restarting a broker whose disk is full would not help.
        # "degraded" says it serves reads only, and why.
        storage = broker.storage_status()
        if storage["state"] == "read-write":
            return {"status": "ok"}
        return {"status": "degraded", "reason": storage["reason"], "storage": storage}

    collectors = metrics_registry(broker.topics, config.cluster_name, scalable, storage_clusters)
    if auto_recovery is not None:
        collectors.register(AutoRecoveryCollector(auto_recovery))

    @app.get(
        "/metrics",
        tags=["brokers"],
        summary="Prometheus metrics: topic counters, backlogs, PIP-483 auto-scale counters",
        response_class=PlainTextResponse,
    )
    async def metrics() -> Response:
        # Runs on the broker's loop (async handler), so the collector reads consistent state.
        return Response(generate_latest(collectors), media_type=CONTENT_TYPE_LATEST)


async def _no_override() -> None:
    return None


__all__ = ["TopicAdmin", "create_app"]
