"""Admin REST for non-persistent topics (Pulsar's ``/admin/v2/non-persistent``, ADR 0062).

* ``GET /admin/v2/non-persistent/{tenant}/{namespace}``: the namespace's non-persistent topics
  active on this broker (they exist only while used; 404 when the namespace does not exist);
* ``GET .../{topic}/stats``: Pulsar's ``NonPersistentTopicStats`` - ``msgDropRate`` on the topic,
  each publisher and each subscription, with Braid's cumulative ``msgDropCount`` beside it
  (404 when the topic is not active here);
* ``DELETE .../{topic}``: forget it (412 while producers or consumers are connected, unless
  ``?force=true``);
* anything else under ``.../{topic}/`` that reads or moves stored messages (peek, reset-cursor,
  skip, expire, clear-backlog, compaction, terminate, internal stats, ...): 405 with the reason,
  as Pulsar refuses them for non-persistent topics.

Partitioned non-persistent topics are served by the partitioned-topic endpoints under the same
prefix (:mod:`braid.admin.partitioned`), registered before this router's catch-all.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Query, Request, Response

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.non_persistent import NonPersistentTopics
from braid.broker.non_persistent_subscription import not_allowed
from braid.broker.resources import BrokerResources
from braid.core.names import TopicDomain, TopicName

_PREFIX = "/non-persistent/{tenant}/{namespace}"


class NonPersistentAdmin(Protocol):
    """What these endpoints need from the broker (``BrokerService``)."""

    @property
    def non_persistent(self) -> NonPersistentTopics: ...


def non_persistent_router(resources: BrokerResources, broker: NonPersistentAdmin) -> APIRouter:
    """The non-persistent-topic endpoints (mounted under ``/admin/v2``)."""
    router = APIRouter(tags=["non-persistent topics"])

    async def name_of(tenant: str, namespace: str, topic: str) -> str:
        await resources.check_namespace_exists(tenant, namespace)
        return str(TopicName(TopicDomain.NON_PERSISTENT, tenant, namespace, topic))

    @router.get(_PREFIX, summary="List the active non-persistent topics")
    async def list_topics(tenant: Tenant, namespace: Namespace) -> list[str]:
        await resources.check_namespace_exists(tenant, namespace)
        return broker.non_persistent.names(f"{tenant}/{namespace}")

    @router.get(_PREFIX + "/{topic}/stats", summary="Non-persistent topic statistics")
    async def stats(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Any:
        name = await name_of(tenant, namespace, topic)
        return broker.non_persistent.loaded(name).stats()

    @router.delete(_PREFIX + "/{topic}", status_code=204, summary="Delete a non-persistent topic")
    async def delete(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        force: Annotated[bool, Query()] = False,
    ) -> Response:
        name = await name_of(tenant, namespace, topic)
        await broker.non_persistent.delete(name, force=force)
        return Response(status_code=204)

    async def needs_storage(
        request: Request, tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> Response:
        name = await name_of(tenant, namespace, topic)
        operation = request.path_params["operation"]
        raise not_allowed(f"{request.method} {operation}", name)

    for method in ("GET", "PUT", "POST", "DELETE"):
        router.add_api_route(
            _PREFIX + "/{topic}/{operation:path}",
            needs_storage,
            methods=[method],
            operation_id=f"non_persistent_needs_storage_{method.lower()}",
            status_code=405,  # its only answer
            summary="Operations on stored messages: not allowed on a non-persistent topic",
        )
    return router


__all__ = ["NonPersistentAdmin", "non_persistent_router"]
