"""Admin REST for backlog quotas, retention and message TTL (Pulsar's paths and bodies).

Namespace level (``/admin/v2/namespaces/{tenant}/{namespace}``):

* ``GET .../backlogQuotaMap``; ``POST .../backlogQuota?backlogQuotaType=destination_storage|
  message_age`` with a ``BacklogQuota`` body (``limitSize``, ``limitTime``, ``policy``);
  ``DELETE .../backlogQuota?backlogQuotaType=...``. A quota larger than the namespace's retention
  is refused with 412, as Pulsar does;
* ``GET/POST/DELETE .../retention`` (``retentionTimeInMinutes``, ``retentionSizeInMB``);
* ``GET/POST/DELETE .../messageTTL`` (the body is the TTL in seconds; 0 = never expire).

Topic level, for ``persistent`` topics and ``scalable`` topics (whose settings cover the whole
segment DAG): ``GET .../{topic}/backlogQuotaMap``, ``POST/DELETE .../{topic}/backlogQuota``,
``GET/DELETE .../{topic}/messageTTL`` and ``POST .../{topic}/messageTTL?messageTTL=N``.

The namespace settings live in its ``Policies`` document (each change a CAS); topic quotas in
:class:`~braid.broker.topic_policies.TopicPolicies`. The broker's periodic checks
(:mod:`braid.broker.limits_monitor`) and every new producer read them.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response

from braid.admin.errors import PreconditionFailed
from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.backlog_quota import (
    BacklogQuota,
    BacklogQuotaType,
    InvalidBacklogQuota,
    check_ttl,
    quota_map_to_json,
)
from braid.broker.config import retention_mb_to_bytes
from braid.broker.resources import (
    BrokerResources,
    InvalidPolicies,
    NamespacePolicies,
    RetentionPolicies,
)
from braid.broker.topic_policies import TopicPolicies
from braid.core.names import TopicDomain, TopicName

_QuotaType = Annotated[
    str,
    Query(
        alias="backlogQuotaType",
        description="destination_storage (size) or message_age (time)",
    ),
]


def _quota_type(text: str) -> BacklogQuotaType:
    try:
        return BacklogQuotaType.parse(text)
    except InvalidBacklogQuota as exc:
        raise PreconditionFailed(str(exc)) from None


def _quota(body: object) -> BacklogQuota:
    try:
        return BacklogQuota.from_json(body)
    except InvalidBacklogQuota as exc:
        raise PreconditionFailed(str(exc)) from None


def _within_retention(quota: BacklogQuota, policies: NamespacePolicies) -> None:
    """Pulsar refuses a quota the namespace's retention could not hold (412)."""
    retention = policies.retention
    if retention is None:
        return
    size = retention_mb_to_bytes(retention.retention_size_in_mb)
    minutes = retention.retention_time_in_minutes
    if (size > 0 and quota.limit_size >= size) or (
        minutes > 0 and quota.limit_time >= minutes * 60
    ):
        raise PreconditionFailed(
            "Specified backlog quota exceeds retention quota. Increase retention quota and retry "
            "request"
        )


async def _replace_policies(
    resources: BrokerResources, tenant: str, namespace: str, **fields: Any
) -> Response:
    """Set ``fields`` of the namespace's policies (CAS, through the resources) and answer 204."""
    await resources.update_namespace_policies(
        tenant, namespace, lambda p: dataclasses.replace(p, **fields)
    )
    return Response(status_code=204)


def backlog_limits_router(resources: BrokerResources, topic_policies: TopicPolicies) -> APIRouter:
    """The backlog quota, retention and message TTL endpoints (mounted under ``/admin/v2``)."""
    router = APIRouter()
    router.include_router(_namespace_quota_router(resources))
    router.include_router(_retention_router(resources))
    router.include_router(_ttl_router(resources))
    for domain in (TopicDomain.PERSISTENT, TopicDomain.TOPIC):
        router.include_router(_topic_quota_router(topic_policies, domain))
    return router


def _namespace_quota_router(resources: BrokerResources) -> APIRouter:
    router = APIRouter()
    base = "/namespaces/{tenant}/{namespace}"

    @router.get(base + "/backlogQuotaMap", tags=["namespaces"], summary="Get backlog quotas")
    async def get_quotas(tenant: Tenant, namespace: Namespace) -> dict[str, Any]:
        quotas = (await resources.get_namespace_policies(tenant, namespace)).backlog_quota_map
        return quota_map_to_json(quotas or {})

    @router.post(
        base + "/backlogQuota",
        status_code=204,
        tags=["namespaces"],
        summary="Set a backlog quota for all the topics of the namespace",
    )
    async def set_quota(
        tenant: Tenant,
        namespace: Namespace,
        body: Annotated[Any, Body()],
        kind: _QuotaType = "destination_storage",
    ) -> Response:
        quota, quota_type = _quota(body), _quota_type(kind)

        def apply(policies: NamespacePolicies) -> NamespacePolicies:
            _within_retention(quota, policies)
            quotas = {**(policies.backlog_quota_map or {}), quota_type: quota}
            return dataclasses.replace(policies, backlog_quota_map=quotas)

        await resources.update_namespace_policies(tenant, namespace, apply)
        return Response(status_code=204)

    @router.delete(
        base + "/backlogQuota",
        status_code=204,
        tags=["namespaces"],
        summary="Remove a backlog quota (the broker's backlogQuotaDefault* apply)",
    )
    async def remove_quota(
        tenant: Tenant, namespace: Namespace, kind: _QuotaType = "destination_storage"
    ) -> Response:
        quota_type = _quota_type(kind)

        def apply(policies: NamespacePolicies) -> NamespacePolicies:
            quotas = {k: v for k, v in (policies.backlog_quota_map or {}).items()}
            quotas.pop(quota_type, None)
            return dataclasses.replace(policies, backlog_quota_map=quotas or None)

        await resources.update_namespace_policies(tenant, namespace, apply)
        return Response(status_code=204)

    return router


def _retention_router(resources: BrokerResources) -> APIRouter:
    router = APIRouter()
    path = "/namespaces/{tenant}/{namespace}/retention"

    @router.get(path, tags=["namespaces"], summary="Get retention (null = broker default)")
    async def get_retention(tenant: Tenant, namespace: Namespace) -> dict[str, Any] | None:
        retention = (await resources.get_namespace_policies(tenant, namespace)).retention
        return None if retention is None else retention.to_json()

    @router.post(path, status_code=204, tags=["namespaces"], summary="Set retention")
    async def set_retention(
        tenant: Tenant, namespace: Namespace, body: Annotated[Any, Body()]
    ) -> Response:
        try:
            retention = RetentionPolicies.from_json(body)
        except InvalidPolicies as exc:
            raise PreconditionFailed(str(exc)) from None
        return await _replace_policies(resources, tenant, namespace, retention=retention)

    @router.delete(path, status_code=204, tags=["namespaces"], summary="Remove retention")
    async def remove_retention(tenant: Tenant, namespace: Namespace) -> Response:
        return await _replace_policies(resources, tenant, namespace, retention=None)

    return router


def _ttl_router(resources: BrokerResources) -> APIRouter:
    router = APIRouter()
    path = "/namespaces/{tenant}/{namespace}/messageTTL"

    @router.get(path, tags=["namespaces"], summary="Get message TTL in seconds (null = default)")
    async def get_ttl(tenant: Tenant, namespace: Namespace) -> int | None:
        return (await resources.get_namespace_policies(tenant, namespace)).message_ttl_in_seconds

    @router.post(path, status_code=204, tags=["namespaces"], summary="Set message TTL (seconds)")
    async def set_ttl(
        tenant: Tenant, namespace: Namespace, body: Annotated[Any, Body()]
    ) -> Response:
        try:
            ttl = check_ttl(body)
        except InvalidBacklogQuota as exc:
            raise PreconditionFailed(str(exc)) from None
        return await _replace_policies(resources, tenant, namespace, message_ttl_in_seconds=ttl)

    @router.delete(path, status_code=204, tags=["namespaces"], summary="Remove message TTL")
    async def remove_ttl(tenant: Tenant, namespace: Namespace) -> Response:
        return await _replace_policies(resources, tenant, namespace, message_ttl_in_seconds=None)

    return router


def _topic_quota_router(topic_policies: TopicPolicies, domain: TopicDomain) -> APIRouter:
    router = APIRouter()
    prefix = "scalable" if domain is TopicDomain.TOPIC else domain.value
    base = "/" + prefix + "/{tenant}/{namespace}/{topic}"
    tag = "scalable topics" if domain is TopicDomain.TOPIC else "topics"

    def name(tenant: str, namespace: str, topic: str) -> TopicName:
        return TopicName(domain, tenant, namespace, topic)

    @router.get(base + "/backlogQuotaMap", tags=[tag], summary="Get the topic's backlog quotas")
    async def get_quotas(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Any:
        quotas = await topic_policies.backlog_quotas(name(tenant, namespace, topic))
        return quota_map_to_json(quotas or {})

    @router.post(
        base + "/backlogQuota", status_code=204, tags=[tag], summary="Set a topic backlog quota"
    )
    async def set_quota(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        body: Annotated[Any, Body()],
        kind: _QuotaType = "destination_storage",
    ) -> Response:
        quota, quota_type = _quota(body), _quota_type(kind)
        await topic_policies.set_backlog_quota(name(tenant, namespace, topic), quota_type, quota)
        return Response(status_code=204)

    @router.delete(
        base + "/backlogQuota", status_code=204, tags=[tag], summary="Remove a topic backlog quota"
    )
    async def remove_quota(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        kind: _QuotaType = "destination_storage",
    ) -> Response:
        quota_type = _quota_type(kind)
        await topic_policies.remove_backlog_quota(name(tenant, namespace, topic), quota_type)
        return Response(status_code=204)

    @router.get(base + "/messageTTL", tags=[tag], summary="Get the topic's message TTL (s)")
    async def get_ttl(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> int | None:
        return await topic_policies.message_ttl(name(tenant, namespace, topic))

    @router.post(
        base + "/messageTTL", status_code=204, tags=[tag], summary="Set the topic's message TTL"
    )
    async def set_ttl(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        ttl: Annotated[int, Query(alias="messageTTL", description="seconds; 0 = never expire")],
    ) -> Response:
        try:
            await topic_policies.set_message_ttl(name(tenant, namespace, topic), ttl)
        except InvalidBacklogQuota as exc:
            raise PreconditionFailed(str(exc)) from None
        return Response(status_code=204)

    @router.delete(
        base + "/messageTTL", status_code=204, tags=[tag], summary="Remove the topic's TTL"
    )
    async def remove_ttl(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Response:
        await topic_policies.set_message_ttl(name(tenant, namespace, topic), None)
        return Response(status_code=204)

    return router


__all__ = ["backlog_limits_router"]
