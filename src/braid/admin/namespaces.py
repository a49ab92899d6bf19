"""Admin REST for namespaces and their policies (Pulsar's ``/admin/v2/namespaces``).

* ``GET /admin/v2/namespaces/{tenant}``: a tenant's namespaces; ``GET/PUT/DELETE
  .../{tenant}/{namespace}``: its ``Policies`` JSON, create (optionally with policies), delete
  (409 naming its topics while it holds any; ``?force=true`` deletes them first, disconnecting
  their clients, where ``forceDeleteNamespaceAllowed`` is on - 405 otherwise);
* ``GET/POST/DELETE .../deduplication``: the namespace's deduplication setting (``null`` = the
  broker's default);
* ``GET/PUT/DELETE .../compactionThreshold``: bytes after a topic's compaction horizon that
  trigger compaction (``null`` = ``brokerServiceCompactionThresholdInBytes``, ``0`` = never);
* ``GET/POST/DELETE .../persistence``: Pulsar's ``PersistencePolicies`` - the ensemble, write
  quorum and ack quorum of the namespace's new ledgers (topics and cursors; ``null`` = the broker's
  ``managedLedgerDefault*`` keys), applied by each loaded topic from its next ledger on;
* ``GET/POST/DELETE .../scalableTopicAutoScalePolicy``: PIP-483's namespace override of its
  scalable topics' auto-scale policy, validated against the broker's ``broker.conf`` policy (the
  topic-level override is served with the scalable-topic endpoints, :mod:`braid.admin.scalable`).

Policies live in :class:`~braid.broker.resources.BrokerResources`, each change a CAS on the
namespace's node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response

from braid.admin.errors import ForceDeleteNotAllowed, PreconditionFailed
from braid.admin.path_params import Namespace, Tenant
from braid.broker.resources import (
    BrokerResources,
    InvalidPolicies,
    NamespacePolicies,
    PersistencePolicies,
)
from braid.scalable.autoscale_policies import AutoScalePolicies


def namespaces_router(
    resources: BrokerResources,
    auto_scale: AutoScalePolicies,
    *,
    list_topics: Callable[[str, str], Awaitable[list[str]]],
    watch_compaction_thresholds: Callable[[], None],
    delete_topics: Callable[[str, str], Awaitable[None]] | None = None,
    force_delete_allowed: bool = False,
) -> APIRouter:
    """The namespace endpoints (mounted under ``/admin/v2``).

    Args:
        resources: where namespaces and their policies are stored.
        auto_scale: the policies a namespace's auto-scale override is checked against.
        list_topics: a namespace's topics (a namespace that holds one cannot be deleted).
        watch_compaction_thresholds: tells the broker a namespace now has a compaction
            threshold to watch.
        delete_topics: deletes every topic of a namespace (a ``force=true`` delete), disconnecting
            their clients; ``None``: forced deletes are refused.
        force_delete_allowed: ``forceDeleteNamespaceAllowed``.
    """
    router = APIRouter()
    router.include_router(
        _namespace_router(resources, list_topics, delete_topics if force_delete_allowed else None)
    )
    router.include_router(_deduplication_router(resources))
    router.include_router(_compaction_threshold_router(resources, watch_compaction_thresholds))
    router.include_router(_auto_scale_override_router(resources, auto_scale))
    router.include_router(_persistence_router(resources))
    return router


def _persistence_router(resources: BrokerResources) -> APIRouter:
    """The namespace's persistence policies (ensemble and quorums of its ledgers)."""
    router = APIRouter()

    @router.get(
        "/namespaces/{tenant}/{namespace}/persistence",
        tags=["namespaces"],
        summary="Ensemble, write and ack quorum of the namespace's ledgers (null = broker default)",
    )
    async def get_persistence(tenant: Tenant, namespace: Namespace) -> dict[str, Any] | None:
        stored = (await resources.get_namespace_policies(tenant, namespace)).persistence
        return None if stored is None else stored.to_json()

    @router.post(
        "/namespaces/{tenant}/{namespace}/persistence",
        status_code=204,
        tags=["namespaces"],
        summary="Set the persistence policies (Pulsar's PersistencePolicies JSON)",
    )
    async def set_persistence(
        tenant: Tenant, namespace: Namespace, body: Annotated[Any, Body()]
    ) -> Response:
        try:
            policies = PersistencePolicies.from_json(body)
        except InvalidPolicies as exc:
            raise PreconditionFailed(str(exc)) from None
        await resources.update_namespace_policies(
            tenant, namespace, lambda p: dataclasses.replace(p, persistence=policies)
        )
        return Response(status_code=204)

    @router.delete(
        "/namespaces/{tenant}/{namespace}/persistence",
        status_code=204,
        tags=["namespaces"],
        summary="Remove the persistence policies (the broker's managedLedgerDefault* apply)",
    )
    async def delete_persistence(tenant: Tenant, namespace: Namespace) -> Response:
        await resources.update_namespace_policies(
            tenant, namespace, lambda p: dataclasses.replace(p, persistence=None)
        )
        return Response(status_code=204)

    return router


def _namespace_router(
    resources: BrokerResources,
    list_topics: Callable[[str, str], Awaitable[list[str]]],
    delete_topics: Callable[[str, str], Awaitable[None]] | None,
) -> APIRouter:
    """List, get, create and delete namespaces."""
    router = APIRouter()

    @router.get("/namespaces/{tenant}", tags=["namespaces"], summary="List a tenant's namespaces")
    async def get_namespaces(tenant: Tenant) -> list[str]:
        return await resources.list_namespaces(tenant)

    @router.get("/namespaces/{tenant}/{namespace}", tags=["namespaces"], summary="Get policies")
    async def get_namespace(tenant: Tenant, namespace: Namespace) -> dict[str, Any]:
        return (await resources.get_namespace_policies(tenant, namespace)).to_json()

    @router.put(
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

    @router.delete(
        "/namespaces/{tenant}/{namespace}",
        status_code=204,
        tags=["namespaces"],
        summary="Delete a namespace (409 while it holds topics, unless force=true)",
    )
    async def delete_namespace(
        tenant: Tenant,
        namespace: Namespace,
        force: Annotated[
            bool,
            Query(description="delete its topics first (needs forceDeleteNamespaceAllowed)"),
        ] = False,
    ) -> Response:
        if force:
            if delete_topics is None:
                raise ForceDeleteNotAllowed(
                    "this broker does not allow forced deletion of namespaces "
                    "(forceDeleteNamespaceAllowed=false)"
                )
            await resources.check_namespace_exists(tenant, namespace)
            await delete_topics(tenant, namespace)
        topics = await list_topics(tenant, namespace)
        await resources.delete_namespace(tenant, namespace, topics=topics)
        return Response(status_code=204)

    return router


def _deduplication_router(resources: BrokerResources) -> APIRouter:
    """The namespace's deduplication setting."""
    router = APIRouter()

    @router.get(
        "/namespaces/{tenant}/{namespace}/deduplication",
        tags=["namespaces"],
        summary="Namespace deduplication setting (null = broker default)",
    )
    async def get_deduplication(tenant: Tenant, namespace: Namespace) -> bool | None:
        return (await resources.get_namespace_policies(tenant, namespace)).deduplication_enabled

    @router.post(
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

    @router.delete(
        "/namespaces/{tenant}/{namespace}/deduplication",
        status_code=204,
        tags=["namespaces"],
        summary="Remove the namespace setting (use the broker default)",
    )
    async def delete_deduplication(tenant: Tenant, namespace: Namespace) -> Response:
        await resources.set_deduplication(tenant, namespace, None)
        return Response(status_code=204)

    return router


def _compaction_threshold_router(
    resources: BrokerResources, watch_compaction_thresholds: Callable[[], None]
) -> APIRouter:
    """The namespace's compaction threshold."""
    router = APIRouter()

    @router.get(
        "/namespaces/{tenant}/{namespace}/compactionThreshold",
        tags=["namespaces"],
        summary="Bytes after a topic's compaction horizon that trigger compaction (null = broker "
        "default, 0 = never)",
    )
    async def get_compaction_threshold(tenant: Tenant, namespace: Namespace) -> int | None:
        return (await resources.get_namespace_policies(tenant, namespace)).compaction_threshold

    @router.put(
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
            watch_compaction_thresholds()
        return Response(status_code=204)

    @router.delete(
        "/namespaces/{tenant}/{namespace}/compactionThreshold",
        status_code=204,
        tags=["namespaces"],
        summary="Remove the namespace setting (use brokerServiceCompactionThresholdInBytes)",
    )
    async def delete_compaction_threshold(tenant: Tenant, namespace: Namespace) -> Response:
        await resources.set_compaction_threshold(tenant, namespace, None)
        return Response(status_code=204)

    return router


def _auto_scale_override_router(
    resources: BrokerResources, auto_scale: AutoScalePolicies
) -> APIRouter:
    """PIP-483: the namespace's auto-scale override (checked against broker.conf's policy)."""
    router = APIRouter()

    @router.get(
        "/namespaces/{tenant}/{namespace}/scalableTopicAutoScalePolicy",
        tags=["namespaces"],
        summary="The namespace's auto-scale policy override of its scalable topics (or null)",
    )
    async def get_scalable_auto_scale(tenant: Tenant, namespace: Namespace) -> Any:
        stored = await resources.get_namespace_policies(tenant, namespace)
        override = stored.scalable_topic_auto_scale_policy
        return None if override is None else dict(override)

    @router.post(
        "/namespaces/{tenant}/{namespace}/scalableTopicAutoScalePolicy",
        status_code=204,
        tags=["namespaces"],
        summary="Set the namespace's auto-scale override (PIP-483 AutoScalePolicyOverride)",
    )
    async def set_scalable_auto_scale(
        tenant: Tenant, namespace: Namespace, body: Annotated[Any, Body()]
    ) -> Response:
        override = auto_scale.check_namespace_override(body).to_json()
        await resources.update_namespace_policies(
            tenant,
            namespace,
            lambda p: dataclasses.replace(p, scalable_topic_auto_scale_policy=override),
        )
        return Response(status_code=204)

    @router.delete(
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

    return router


__all__ = ["namespaces_router"]
