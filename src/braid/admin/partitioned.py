"""Admin REST for partitioned topics (Pulsar's paths and bodies).

* ``PUT /admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions`` with the number of
  partitions as the body (``4``): create the partitioned topic and its partitions (409 if the
  name is taken, partitioned or not);
* ``GET .../partitions``: ``{"partitions": N}``, 0 for a topic that is not partitioned; with
  ``?checkAllowAutoCreation=true`` (what an ``http://`` client's lookup sends) a missing topic is
  auto-created as the namespace's policy says, or answered 404 when auto-creation is off;
* ``POST .../partitions`` with a larger number: add partitions (they can only grow);
* ``DELETE .../partitions[?force=true]``: delete the partitions, the count and the schema;
* ``GET /admin/v2/persistent/{tenant}/{namespace}/partitioned``: the partitioned topics.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Body, Query, Response

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.errors import TopicNotFound
from braid.broker.partitions import PartitionedTopics
from braid.broker.resources import BrokerResources
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import check_partition_count


class PartitionAdmin(Protocol):
    """What these endpoints need from the broker (``BrokerService``)."""

    async def partitioned_metadata(self, name: str, *, auto_create: bool = True) -> int: ...

    async def create_partitioned_topic(self, name: str, partitions: int) -> None: ...

    async def update_partitioned_topic(self, name: str, partitions: int) -> None: ...

    async def delete_partitioned_topic(self, name: str, *, force: bool = False) -> None: ...

    async def topic_exists(self, name: str) -> bool: ...

    @property
    def partitioned(self) -> PartitionedTopics: ...


def partitioned_router(
    broker: PartitionAdmin,
    resources: BrokerResources,
    *,
    auto_creation_default: bool,
    domain: TopicDomain = TopicDomain.PERSISTENT,
) -> APIRouter:
    """The partitioned-topic endpoints of ``domain`` (``/persistent/...`` or
    ``/non-persistent/...``).

    Args:
        auto_creation_default: the broker's ``allowAutoTopicCreation`` (what a namespace without
            an override allows).
    """
    router = APIRouter(tags=["topics"])
    prefix = f"/{domain.value}/{{tenant}}/{{namespace}}"

    async def topic_of(tenant: str, namespace: str, topic: str) -> TopicName:
        name = TopicName(domain, tenant, namespace, topic)
        await resources.check_namespace_exists(tenant, namespace)
        return name

    @router.get(
        prefix + "/partitioned",
        summary="List partitioned topics",
    )
    async def list_partitioned(tenant: Tenant, namespace: Namespace) -> list[str]:
        await resources.check_namespace_exists(tenant, namespace)
        return await broker.partitioned.list(tenant, namespace, domain)

    @router.put(
        prefix + "/{topic}/partitions",
        status_code=204,
        summary="Create a partitioned topic (body: the number of partitions)",
    )
    async def create_partitioned(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        partitions: Annotated[Any, Body()],
    ) -> Response:
        name = await topic_of(tenant, namespace, topic)
        await broker.create_partitioned_topic(str(name), check_partition_count(partitions))
        return Response(status_code=204)

    @router.get(
        prefix + "/{topic}/partitions",
        summary="Partitioned-topic metadata: {partitions: N} (0 = not partitioned)",
    )
    async def get_partitions(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        checkAllowAutoCreation: Annotated[bool, Query()] = False,
    ) -> dict[str, Any]:
        name = await topic_of(tenant, namespace, topic)
        count = await broker.partitioned_metadata(str(name), auto_create=checkAllowAutoCreation)
        if count == 0 and checkAllowAutoCreation and not await broker.topic_exists(str(name)):
            policies = await resources.get_namespace_policies(tenant, namespace)
            if not policies.is_auto_topic_creation_allowed(auto_creation_default):
                raise TopicNotFound(f"topic {name} does not exist")
        return {"partitions": count}

    @router.post(
        prefix + "/{topic}/partitions",
        status_code=204,
        summary="Grow a partitioned topic (body: the new number of partitions)",
    )
    async def update_partitions(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        partitions: Annotated[Any, Body()],
    ) -> Response:
        name = await topic_of(tenant, namespace, topic)
        await broker.update_partitioned_topic(str(name), check_partition_count(partitions))
        return Response(status_code=204)

    @router.delete(
        prefix + "/{topic}/partitions",
        status_code=204,
        summary="Delete a partitioned topic, its partitions and its schema",
    )
    async def delete_partitioned(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        force: Annotated[bool, Query()] = False,
    ) -> Response:
        # Without force: 412 while a partition has producers or consumers, as Pulsar.
        name = await topic_of(tenant, namespace, topic)
        await broker.delete_partitioned_topic(str(name), force=force)
        return Response(status_code=204)

    return router


__all__ = ["PartitionAdmin", "partitioned_router"]
