"""Admin REST for persistent (non-partitioned) topics (Pulsar's ``/admin/v2/persistent``).

* ``GET /admin/v2/persistent/{tenant}/{namespace}``: the namespace's topics (404 when the
  namespace does not exist);
* ``PUT/DELETE .../{topic}``: create (409 when the name is taken, partitioned or not) and delete
  (412 while producers or consumers are connected, unless ``?force=true``);
* ``POST .../{topic}/terminate``: terminate, answering the last message id (Pulsar's
  ``MessageIdImpl`` JSON);
* ``PUT/GET .../{topic}/compaction``: trigger compaction (of each partition of a partitioned
  topic; 409 while one runs) and read the last one's status;
* ``GET .../{topic}/stats``: the loaded topic's statistics.

Partitioned topics have their own endpoints (:mod:`braid.admin.partitioned`); the operations run
on the broker (:class:`PersistentTopicAdmin`, implemented by ``BrokerService``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Query, Response
from fastapi.encoders import jsonable_encoder

from braid.admin.errors import TopicAlreadyExists
from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.errors import TopicNotFound
from braid.broker.partitions import PartitionedTopics
from braid.broker.resources import BrokerResources
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import partition_name


class PersistentTopicAdmin(Protocol):
    """What the topic endpoints need from the broker (``BrokerService`` provides it)."""

    async def list_topics(self, namespace: str) -> list[str]: ...

    async def get_or_create_topic(self, name: str, *, create: bool | None = None) -> object: ...

    async def terminate_topic(self, name: str) -> object: ...

    async def delete_topic(self, name: str, *, force: bool = False) -> None: ...

    def topic_stats(self, name: str) -> Mapping[str, object]: ...

    async def compact_topic(self, name: str) -> None: ...

    async def compaction_status(self, name: str) -> tuple[enum.Enum, str]: ...

    @property
    def partitioned(self) -> PartitionedTopics: ...


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


def namespace_topic_lister(
    resources: BrokerResources, broker: PersistentTopicAdmin
) -> Callable[[str, str], Awaitable[list[str]]]:
    """``list_topics(tenant, namespace)``: the namespace's topics, or
    :class:`~braid.broker.resources.NamespaceNotFound` when it does not exist."""

    async def list_topics(tenant: str, namespace: str) -> list[str]:
        await resources.check_namespace_exists(tenant, namespace)
        return await broker.list_topics(f"{tenant}/{namespace}")

    return list_topics


def topics_router(resources: BrokerResources, broker: PersistentTopicAdmin) -> APIRouter:
    """The persistent-topic endpoints (mounted under ``/admin/v2``)."""
    router = APIRouter()
    list_topics = namespace_topic_lister(resources, broker)

    async def existing_topic(tenant: str, namespace: str, topic: str) -> TopicName:
        name = TopicName(TopicDomain.PERSISTENT, tenant, namespace, topic)
        if str(name) not in await list_topics(tenant, namespace):
            raise TopicNotFound(f"topic {name} does not exist")
        return name

    @router.get("/persistent/{tenant}/{namespace}", tags=["topics"], summary="List topics")
    async def get_topics(tenant: Tenant, namespace: Namespace) -> list[str]:
        return await list_topics(tenant, namespace)

    @router.put(
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

    @router.delete(
        "/persistent/{tenant}/{namespace}/{topic}",
        status_code=204,
        tags=["topics"],
        summary="Delete a topic",
    )
    async def delete_topic(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        force: Annotated[
            bool, Query(description="disconnect connected producers and consumers")
        ] = False,
    ) -> Response:
        # Without force: 412 naming the connected producers and consumers (Pulsar's answer).
        name = await existing_topic(tenant, namespace, topic)
        await broker.delete_topic(str(name), force=force)
        return Response(status_code=204)

    @router.post(
        "/persistent/{tenant}/{namespace}/{topic}/terminate",
        tags=["topics"],
        summary="Terminate a topic; returns its last message id",
    )
    async def terminate_topic(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Any:
        name = await existing_topic(tenant, namespace, topic)
        return _message_id_json(await broker.terminate_topic(str(name)))

    @router.put(
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

    @router.get(
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

    @router.get(
        "/persistent/{tenant}/{namespace}/{topic}/stats",
        tags=["topics"],
        summary="Topic statistics",
    )
    async def get_topic_stats(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Any:
        name = await existing_topic(tenant, namespace, topic)
        await broker.get_or_create_topic(str(name), create=False)  # stats are of a loaded topic
        return _jsonable(broker.topic_stats(str(name)))

    return router


__all__ = ["PersistentTopicAdmin", "namespace_topic_lister", "topics_router"]
