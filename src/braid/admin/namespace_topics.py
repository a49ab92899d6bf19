"""Every topic a namespace holds, whatever its kind, for the namespace and tenant deletes.

A namespace holds plain ``persistent://`` topics (stored as managed ledgers), partitioned topics
(a partition count in the metadata store, and one plain topic per partition) and scalable
``topic://`` topics (a DAG in the metadata store, and one ``segment://`` topic per segment).
Deleting a namespace or a tenant without ``force`` is refused (409, as Pulsar's "Cannot delete
non empty namespace") while any of them exists, and the refusal names them; with ``force`` (only
where ``forceDeleteNamespaceAllowed`` / ``forceDeleteTenantAllowed`` is on, as in Pulsar) each is
deleted with its connected clients disconnected, then the namespace.

:class:`NamespaceTopics` only lists and deletes through the owners of each kind (the broker, its
partition table, the scalable-topic service); it keeps no state.
"""

from __future__ import annotations

from typing import Protocol

from braid.admin.partitioned import PartitionAdmin
from braid.admin.topics import PersistentTopicAdmin
from braid.broker.resources import BrokerResources
from braid.core.names import TopicName
from braid.core.partitions import partitioned_topic_of
from braid.scalable.service import ScalableTopicService


class _TopicOwner(PersistentTopicAdmin, PartitionAdmin, Protocol):
    """Plain and partitioned topics (``BrokerService``)."""


class NamespaceTopics:
    """Lists and force-deletes a namespace's topics of every kind.

    Args:
        resources: tenants and namespaces.
        broker: plain and partitioned topics.
        scalable: scalable topics (``None`` or disabled: there are none to list).
    """

    def __init__(
        self,
        resources: BrokerResources,
        broker: _TopicOwner,
        scalable: ScalableTopicService | None,
    ) -> None:
        self._resources = resources
        self._broker = broker
        self._scalable = scalable if scalable is not None and scalable.settings.enabled else None

    async def names(self, tenant: str, namespace: str) -> list[str]:
        """The namespace's topics: partitioned topics by their own name (not each partition),
        other plain topics, scalable topics; sorted.

        Raises:
            NamespaceNotFound.
        """
        await self._resources.check_namespace_exists(tenant, namespace)
        partitioned = await self._broker.partitioned.list(tenant, namespace)
        found = set(partitioned)
        for name in await self._broker.list_topics(f"{tenant}/{namespace}"):
            topic = TopicName.parse(name)
            base = TopicName(
                topic.domain, topic.tenant, topic.namespace, partitioned_topic_of(topic.local_name)
            )
            if str(base) not in found:
                found.add(name)
        if self._scalable is not None:
            found.update(
                str(t) for t in await self._scalable.resources.list_topics(tenant, namespace)
            )
        return sorted(found)

    async def delete_all(self, tenant: str, namespace: str) -> None:
        """Delete every topic of the namespace, disconnecting their clients."""
        partitioned = set(await self._broker.partitioned.list(tenant, namespace))
        for name in sorted(partitioned):
            await self._broker.delete_partitioned_topic(name, force=True)
        for name in await self._broker.list_topics(f"{tenant}/{namespace}"):
            await self._broker.delete_topic(name, force=True)
        if self._scalable is not None:
            for topic in await self._scalable.resources.list_topics(tenant, namespace):
                await self._scalable.delete_topic(topic, force=True)

    async def delete_namespaces(self, tenant: str) -> None:
        """Delete every namespace of ``tenant`` with its topics (a forced tenant delete)."""
        for full in await self._resources.list_namespaces(tenant):
            namespace = full.split("/", 1)[1]
            await self.delete_all(tenant, namespace)
            await self._resources.delete_namespace(
                tenant, namespace, topics=await self.names(tenant, namespace)
            )


__all__ = ["NamespaceTopics"]
