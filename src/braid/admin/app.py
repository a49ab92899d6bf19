"""The admin REST API (FastAPI): tenants, namespaces, persistent topics, health and ``/metrics``.

Paths and status codes follow Pulsar's ``/admin/v2`` API so ``pulsar-admin``-style tooling and
habits carry over. Tenants and namespaces go to :class:`~braid.broker.resources.BrokerResources`;
topic operations go to the broker (:class:`TopicAdmin`, implemented by ``BrokerService``), which
runs in the same event loop. Errors are JSON ``{"reason": ...}`` (see :mod:`braid.admin.errors`).
The OpenAPI document is at ``/openapi.json`` and browsable at ``/docs``. ``/metrics`` is the
Prometheus text exposition (:mod:`braid.admin.metrics`). A namespace's PIP-483
``scalableTopicAutoScalePolicy`` override is served here (validated against the broker's
``broker.conf`` policy); the topic-level one with the scalable-topic endpoints.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Body, FastAPI, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from braid.admin.bookie_clusters import bookie_clusters_router
from braid.admin.errors import PreconditionFailed, TopicAlreadyExists, install_error_handlers
from braid.admin.lookup import LookupService, lookup_router
from braid.admin.metrics import metrics_registry
from braid.admin.partitioned import PartitionAdmin, partitioned_router
from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.admin.scalable import scalable_router
from braid.admin.schemas import schemas_router
from braid.broker.config import BrokerConfig
from braid.broker.errors import TopicNotFound
from braid.broker.gc_policy import GC_STATS
from braid.broker.resources import (
    BrokerResources,
    InvalidPolicies,
    NamespaceNotFound,
    NamespacePolicies,
    TenantInfo,
    check_name,
)
from braid.broker.schemas.topic_schemas import TopicSchemas
from braid.clusters.service import StorageClusterService
from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.errors import ServiceUnavailableError
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import partition_name
from braid.scalable.autoscale_policies import AutoScalePolicies
from braid.scalable.service import ScalableTopicService


class TopicAdmin(PartitionAdmin, LookupService, Protocol):
    """What the admin API needs from the broker (``BrokerService`` provides it)."""

    @property
    def topics(self) -> Mapping[str, Any]:
        """The loaded topics, by name (``/metrics`` reads their counters)."""
        ...

    async def list_topics(self, namespace: str) -> list[str]: ...

    async def get_or_create_topic(self, name: str, *, create: bool | None = None) -> object: ...

    async def terminate_topic(self, name: str) -> object: ...

    async def delete_topic(self, name: str) -> None: ...

    def topic_stats(self, name: str) -> Mapping[str, object]: ...

    async def compact_topic(self, name: str) -> None: ...

    async def compaction_status(self, name: str) -> tuple[enum.Enum, str]: ...

    def watch_compaction_thresholds(self) -> None: ...
    @property
    def schemas(self) -> TopicSchemas: ...

    def storage_status(self) -> Mapping[str, object]: ...


class StorageUnavailable(ServiceUnavailableError):
    """The broker cannot store messages now (503): its storage is read-only."""


class TenantInfoBody(BaseModel):
    """Pulsar's ``TenantInfo`` as sent in PUT/POST bodies; omitted ``allowedClusters`` means
    this broker's cluster (a tenant allowed on no cluster could hold no topic)."""

    adminRoles: list[str] = Field(default_factory=list)
    allowedClusters: list[str] | None = None


def _jsonable(value: object) -> Any:
    """Stats and positions as JSON: dataclasses become objects, enums their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return jsonable_encoder(value)


def _message_id_json(position: object) -> Any:
    """Pulsar's ``MessageIdImpl`` JSON for a terminate answer."""
    ledger_id = getattr(position, "ledger_id", None)
    entry_id = getattr(position, "entry_id", None)
    if isinstance(ledger_id, int) and isinstance(entry_id, int):
        return {"ledgerId": ledger_id, "entryId": entry_id, "partitionIndex": -1}
    return _jsonable(position)


def create_app(
    config: BrokerConfig,
    resources: BrokerResources,
    broker: TopicAdmin,
    scalable: ScalableTopicService | None = None,
    storage_clusters: StorageClusterService | None = None,
) -> FastAPI:
    """Build the admin application.

    Args:
        config: the broker's configuration (cluster name, defaults reported by the API).
        resources: tenants and namespaces.
        broker: topic operations.
        scalable: the scalable-topic service; ``None`` leaves ``/scalable`` and ``/segments``
            out (scalable topics disabled).
        storage_clusters: PIP-470's service; ``None`` leaves ``/bookie-clusters`` out.
    """
    app = FastAPI(
        title="Braid admin API",
        version="v2",
        description="Pulsar-compatible admin REST API of a Braid broker: tenants, namespaces, "
        'topics, scalable topics and their segments, and health. Errors are JSON {"reason": ...} '
        "with Pulsar's HTTP statuses.",
    )
    install_error_handlers(app)
    v2 = APIRouter(prefix="/admin/v2")

    async def list_topics(tenant: str, namespace: str) -> list[str]:
        if not await resources.namespace_exists(tenant, namespace):
            raise NamespaceNotFound(f"namespace {tenant}/{namespace} does not exist")
        return await broker.list_topics(f"{tenant}/{namespace}")

    async def existing_topic(tenant: str, namespace: str, topic: str) -> TopicName:
        name = TopicName(TopicDomain.PERSISTENT, tenant, namespace, topic)
        if str(name) not in await list_topics(tenant, namespace):
            raise TopicNotFound(f"topic {name} does not exist")
        return name

    # --- clusters and health ---

    @v2.get("/clusters", tags=["clusters"], summary="List clusters")
    async def get_clusters() -> list[str]:
        return [config.cluster_name]

    @v2.get(
        "/brokers/health",
        tags=["brokers"],
        summary="Broker health check",
        response_class=PlainTextResponse,
    )
    async def broker_health() -> str:
        # A real round-trip to the metadata store, not a constant: a broker whose store is gone
        # is not healthy; nor is one that cannot store a message (its bookies are read-only:
        # 503, retriable, with the reason).
        await resources.list_tenants()
        storage = broker.storage_status()
        if storage["state"] != "read-write":
            raise StorageUnavailable(f"broker is read-only: {storage['reason']}")
        return "ok"

    # --- tenants ---

    @v2.get("/tenants", tags=["tenants"], summary="List tenants")
    async def get_tenants() -> list[str]:
        return await resources.list_tenants()

    @v2.get("/tenants/{tenant}", tags=["tenants"], summary="Get a tenant's admin roles/clusters")
    async def get_tenant(tenant: Tenant) -> dict[str, Any]:
        return (await resources.get_tenant(tenant)).to_json()

    def tenant_info(body: TenantInfoBody | None) -> TenantInfo:
        clusters = body.allowedClusters if body is not None else None
        info = TenantInfo(
            tuple(body.adminRoles) if body else (),
            tuple(clusters) if clusters is not None else (config.cluster_name,),
        )
        unknown = [c for c in info.allowed_clusters if c != config.cluster_name]
        if unknown:
            raise PreconditionFailed(f"clusters do not exist: {', '.join(unknown)}")
        return info

    @v2.put("/tenants/{tenant}", status_code=204, tags=["tenants"], summary="Create a tenant")
    async def put_tenant(
        tenant: Tenant, body: Annotated[TenantInfoBody | None, Body()] = None
    ) -> Response:
        check_name("tenant", tenant)
        await resources.create_tenant(tenant, tenant_info(body))
        return Response(status_code=204)

    @v2.post("/tenants/{tenant}", status_code=204, tags=["tenants"], summary="Update a tenant")
    async def post_tenant(
        tenant: Tenant, body: Annotated[TenantInfoBody | None, Body()] = None
    ) -> Response:
        await resources.update_tenant(tenant, tenant_info(body))
        return Response(status_code=204)

    @v2.delete("/tenants/{tenant}", status_code=204, tags=["tenants"], summary="Delete a tenant")
    async def delete_tenant(tenant: Tenant) -> Response:
        await resources.delete_tenant(tenant)
        return Response(status_code=204)

    # --- namespaces ---

    @v2.get("/namespaces/{tenant}", tags=["namespaces"], summary="List a tenant's namespaces")
    async def get_namespaces(tenant: Tenant) -> list[str]:
        return await resources.list_namespaces(tenant)

    @v2.get("/namespaces/{tenant}/{namespace}", tags=["namespaces"], summary="Get policies")
    async def get_namespace(tenant: Tenant, namespace: Namespace) -> dict[str, Any]:
        return (await resources.get_namespace_policies(tenant, namespace)).to_json()

    @v2.put(
        "/namespaces/{tenant}/{namespace}",
        status_code=204,
        tags=["namespaces"],
        summary="Create a namespace (optionally with policies)",
    )
    async def put_namespace(
        tenant: Tenant, namespace: Namespace, body: Annotated[dict[str, Any] | None, Body()] = None
    ) -> Response:
        policies = NamespacePolicies.from_json(body) if body is not None else None
        await resources.create_namespace(tenant, namespace, policies)
        return Response(status_code=204)

    @v2.delete(
        "/namespaces/{tenant}/{namespace}",
        status_code=204,
        tags=["namespaces"],
        summary="Delete an empty namespace",
    )
    async def delete_namespace(tenant: Tenant, namespace: Namespace) -> Response:
        topics = await list_topics(tenant, namespace)
        await resources.delete_namespace(tenant, namespace, topics=topics)
        return Response(status_code=204)

    @v2.get(
        "/namespaces/{tenant}/{namespace}/deduplication",
        tags=["namespaces"],
        summary="Namespace deduplication setting (null = broker default)",
    )
    async def get_deduplication(tenant: Tenant, namespace: Namespace) -> bool | None:
        return (await resources.get_namespace_policies(tenant, namespace)).deduplication_enabled

    @v2.post(
        "/namespaces/{tenant}/{namespace}/deduplication",
        status_code=204,
        tags=["namespaces"],
        summary="Enable or disable deduplication (body: true or false)",
    )
    async def post_deduplication(
        tenant: Tenant, namespace: Namespace, enabled: Annotated[Any, Body()]
    ) -> Response:
        if not isinstance(enabled, bool):
            raise InvalidPolicies(f"the body must be true or false, got {enabled!r}")
        await resources.set_deduplication(tenant, namespace, enabled)
        return Response(status_code=204)

    @v2.delete(
        "/namespaces/{tenant}/{namespace}/deduplication",
        status_code=204,
        tags=["namespaces"],
        summary="Remove the namespace setting (use the broker default)",
    )
    async def delete_deduplication(tenant: Tenant, namespace: Namespace) -> Response:
        await resources.set_deduplication(tenant, namespace, None)
        return Response(status_code=204)

    @v2.get(
        "/namespaces/{tenant}/{namespace}/compactionThreshold",
        tags=["namespaces"],
        summary="Bytes after a topic's compaction horizon that trigger compaction (null = broker "
        "default, 0 = never)",
    )
    async def get_compaction_threshold(tenant: Tenant, namespace: Namespace) -> int | None:
        return (await resources.get_namespace_policies(tenant, namespace)).compaction_threshold

    @v2.put(
        "/namespaces/{tenant}/{namespace}/compactionThreshold",
        status_code=204,
        tags=["namespaces"],
        summary="Set the namespace's compaction threshold in bytes (body: a number, 0 = never)",
    )
    async def put_compaction_threshold(
        tenant: Tenant, namespace: Namespace, threshold: Annotated[Any, Body()]
    ) -> Response:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise PreconditionFailed(f"compactionThreshold must be 0 or more, got {threshold!r}")
        await resources.set_compaction_threshold(tenant, namespace, threshold)
        if threshold > 0:
            broker.watch_compaction_thresholds()
        return Response(status_code=204)

    @v2.delete(
        "/namespaces/{tenant}/{namespace}/compactionThreshold",
        status_code=204,
        tags=["namespaces"],
        summary="Remove the namespace setting (use brokerServiceCompactionThresholdInBytes)",
    )
    async def delete_compaction_threshold(tenant: Tenant, namespace: Namespace) -> Response:
        await resources.set_compaction_threshold(tenant, namespace, None)
        return Response(status_code=204)

    # PIP-483: the namespace's auto-scale override (checked against broker.conf's policy).
    if scalable is not None:
        policies = scalable.auto_scale.policies
    else:
        policies = AutoScalePolicies(
            AutoScalePolicy.from_broker_config(config.scalable_topic_settings),
            lambda tenant, namespace: _no_override(),
        )

    @v2.get(
        "/namespaces/{tenant}/{namespace}/scalableTopicAutoScalePolicy",
        tags=["namespaces"],
        summary="The namespace's auto-scale policy override of its scalable topics (or null)",
    )
    async def get_scalable_auto_scale(tenant: Tenant, namespace: Namespace) -> Any:
        stored = await resources.get_namespace_policies(tenant, namespace)
        override = stored.scalable_topic_auto_scale_policy
        return None if override is None else dict(override)

    @v2.post(
        "/namespaces/{tenant}/{namespace}/scalableTopicAutoScalePolicy",
        status_code=204,
        tags=["namespaces"],
        summary="Set the namespace's auto-scale override (PIP-483 AutoScalePolicyOverride)",
    )
    async def set_scalable_auto_scale(
        tenant: Tenant, namespace: Namespace, body: Annotated[Any, Body()]
    ) -> Response:
        override = policies.check_namespace_override(body).to_json()
        await resources.update_namespace_policies(
            tenant,
            namespace,
            lambda p: dataclasses.replace(p, scalable_topic_auto_scale_policy=override),
        )
        return Response(status_code=204)

    @v2.delete(
        "/namespaces/{tenant}/{namespace}/scalableTopicAutoScalePolicy",
        status_code=204,
        tags=["namespaces"],
        summary="Remove the namespace's auto-scale override (broker.conf applies)",
    )
    async def delete_scalable_auto_scale(tenant: Tenant, namespace: Namespace) -> Response:
        await resources.update_namespace_policies(
            tenant,
            namespace,
            lambda p: dataclasses.replace(p, scalable_topic_auto_scale_policy=None),
        )
        return Response(status_code=204)

    # --- persistent topics ---

    @v2.get("/persistent/{tenant}/{namespace}", tags=["topics"], summary="List topics")
    async def get_topics(tenant: Tenant, namespace: Namespace) -> list[str]:
        return await list_topics(tenant, namespace)

    @v2.put(
        "/persistent/{tenant}/{namespace}/{topic}",
        status_code=204,
        tags=["topics"],
        summary="Create a non-partitioned topic",
    )
    async def put_topic(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Response:
        name = TopicName(TopicDomain.PERSISTENT, tenant, namespace, topic)
        if str(name) in await list_topics(tenant, namespace):
            raise TopicAlreadyExists(f"topic {name} already exists")
        if await broker.partitioned.partitions(name):
            raise TopicAlreadyExists(f"{name} is a partitioned topic")
        await broker.get_or_create_topic(str(name), create=True)
        return Response(status_code=204)

    @v2.delete(
        "/persistent/{tenant}/{namespace}/{topic}",
        status_code=204,
        tags=["topics"],
        summary="Delete a topic",
    )
    async def delete_topic(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Response:
        name = await existing_topic(tenant, namespace, topic)
        await broker.delete_topic(str(name))
        return Response(status_code=204)

    @v2.post(
        "/persistent/{tenant}/{namespace}/{topic}/terminate",
        tags=["topics"],
        summary="Terminate a topic; returns its last message id",
    )
    async def terminate_topic(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Any:
        name = await existing_topic(tenant, namespace, topic)
        return _message_id_json(await broker.terminate_topic(str(name)))

    @v2.put(
        "/persistent/{tenant}/{namespace}/{topic}/compaction",
        status_code=204,
        tags=["topics"],
        summary="Trigger compaction (of every partition of a partitioned topic; 409 while one is "
        "running)",
    )
    async def trigger_compaction(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> Response:
        name = TopicName(TopicDomain.PERSISTENT, tenant, namespace, topic)
        existing = await list_topics(tenant, namespace)
        if str(name) not in existing and (count := await broker.partitioned.partitions(name)):
            # A partitioned topic: compact each partition that holds data, as Pulsar does.
            for index in range(count):
                part = TopicName(
                    TopicDomain.PERSISTENT, tenant, namespace, partition_name(topic, index)
                )
                if str(part) in existing:
                    await broker.compact_topic(str(part))
            return Response(status_code=204)
        name = await existing_topic(tenant, namespace, topic)
        await broker.compact_topic(str(name))
        return Response(status_code=204)

    @v2.get(
        "/persistent/{tenant}/{namespace}/{topic}/compaction",
        tags=["topics"],
        summary="Status of the last compaction (Pulsar's LongRunningProcessStatus)",
    )
    async def compaction_status(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> dict[str, str]:
        name = await existing_topic(tenant, namespace, topic)
        status, last_error = await broker.compaction_status(str(name))
        return {"status": str(status.value), "lastError": last_error}

    @v2.get(
        "/persistent/{tenant}/{namespace}/{topic}/stats",
        tags=["topics"],
        summary="Topic statistics",
    )
    async def get_topic_stats(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Any:
        name = await existing_topic(tenant, namespace, topic)
        await broker.get_or_create_topic(str(name), create=False)  # stats are of a loaded topic
        return _jsonable(broker.topic_stats(str(name)))

    @v2.get(
        "/broker-stats/runtime",
        tags=["brokers"],
        summary="Python runtime statistics: garbage collections and the time they took",
    )
    async def runtime_stats() -> dict[str, object]:
        return {"gc": GC_STATS.snapshot()}

    v2.include_router(schemas_router(broker.schemas, resources, resources.namespace_exists))
    v2.include_router(
        partitioned_router(
            broker, resources, auto_creation_default=config.allow_auto_topic_creation
        )
    )
    if scalable is not None:
        v2.include_router(scalable_router(scalable, scalable.segments, resources.namespace_exists))
    if storage_clusters is not None:
        v2.include_router(bookie_clusters_router(storage_clusters))
    app.include_router(v2)
    app.include_router(lookup_router(broker))

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

    registry = metrics_registry(broker.topics, config.cluster_name, scalable, storage_clusters)

    @app.get(
        "/metrics",
        tags=["brokers"],
        summary="Prometheus metrics: topic counters, backlogs, PIP-483 auto-scale counters",
        response_class=PlainTextResponse,
    )
    async def metrics() -> Response:
        # Runs on the broker's loop (async handler), so the collector reads consistent state.
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


async def _no_override() -> None:
    return None


__all__ = ["TopicAdmin", "create_app"]
