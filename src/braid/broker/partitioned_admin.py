"""Partitioned-topic operations of one broker: PARTITIONED_METADATA with auto-creation, create,
grow and delete (Pulsar's ``PersistentTopics`` partitioned endpoints).

A partitioned topic is its partition count in the metadata store
(:class:`~braid.broker.partitions.PartitionedTopics`) plus one ordinary topic per partition.
Invariants: the partitioned name itself is never a topic with data (creating one over an existing
topic is refused); the count only grows; a partition below the count may always be created, by
whichever broker owns its bundle (among several brokers, each partition is created by its
bundle's owner on first use, never all by the broker that took the admin call); a
delete fences every partition for its duration and, without ``force``, is refused while any has
clients (:class:`~braid.broker.topic_deletion.TopicDeletion`); the schema and the topic policies
are the partitioned topic's and go with it.
"""

from __future__ import annotations

from typing import Protocol

from braid.broker.config import BrokerConfig
from braid.broker.non_persistent import NonPersistentTopics
from braid.broker.ownership import BundleOwnership
from braid.broker.partitions import (
    PARTITIONABLE,
    PartitionedTopicExists,
    PartitionedTopicNotFound,
    PartitionedTopics,
)
from braid.broker.resources import NamespacePolicies
from braid.broker.schemas.model import schema_id_of
from braid.broker.schemas.topic_schemas import TopicSchemas
from braid.broker.topic import PersistentTopic
from braid.broker.topic_deletion import TopicDeletion
from braid.broker.topic_names import parse_topic_name
from braid.broker.topic_policies import TopicPolicies
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import partition_index, partition_name


class PartitionedTopicHost(Protocol):
    """What the partitioned-topic operations need from the broker."""

    config: BrokerConfig
    ownership: BundleOwnership | None
    partitioned: PartitionedTopics
    deletion: TopicDeletion
    schemas: TopicSchemas
    topic_policies: TopicPolicies
    non_persistent: NonPersistentTopics

    async def check_topic(self, name: str) -> TopicName: ...

    async def namespace_policies(self, topic: TopicName) -> NamespacePolicies: ...

    async def topic_exists(self, name: str) -> bool: ...

    async def get_or_create_topic(
        self, name: str, *, create: bool | None = None
    ) -> PersistentTopic: ...


class PartitionedTopicAdmin:
    """Creates, grows, deletes and answers for the partitioned topics of one broker."""

    def __init__(self, host: PartitionedTopicHost) -> None:
        self._host = host

    def auto_creation_type(self, policies: NamespacePolicies) -> tuple[str, int]:
        """What auto-creation creates here: topic type and partitions (namespace over broker)."""
        config = self._host.config
        override = policies.auto_topic_creation
        if override is None:
            return config.allow_auto_topic_creation_type, config.default_num_partitions
        return (
            override.topic_type,
            override.default_num_partitions or config.default_num_partitions,
        )

    async def metadata(self, name: str, *, auto_create: bool = True) -> int:
        """PARTITIONED_METADATA: the topic's partition count (0: not partitioned).

        A missing topic is created as a partitioned topic when auto-creation is allowed and its
        type is ``partitioned`` (namespace ``autoTopicCreationOverride``, else the broker's
        ``allowAutoTopicCreationType`` / ``defaultNumPartitions``), unless ``auto_create`` is off.
        """
        host = self._host
        topic = await host.check_topic(name)
        if topic.domain not in PARTITIONABLE or partition_index(topic.local_name) >= 0:
            return 0
        count = await host.partitioned.partitions(topic)
        if count or not auto_create or await host.topic_exists(str(topic)):
            return count
        policies = await host.namespace_policies(topic)
        if not policies.is_auto_topic_creation_allowed(host.config.allow_auto_topic_creation):
            return 0
        topic_type, partitions = self.auto_creation_type(policies)
        if topic_type != "partitioned":
            return 0
        try:
            await self.create(str(topic), partitions)
        except PartitionedTopicExists:
            pass  # created concurrently (another client or broker)
        return await host.partitioned.partitions(topic)

    async def create(self, name: str, partitions: int) -> None:
        """Create a partitioned topic and its partitions.

        Raises:
            PartitionedTopicExists: the name is taken by a partitioned or a plain topic.
        """
        topic = parse_topic_name(name)
        await self._host.namespace_policies(topic)
        if await self._host.topic_exists(str(topic)):
            raise PartitionedTopicExists(f"a non-partitioned topic {topic} already exists")
        await self._host.partitioned.create(topic, partitions)
        await self._create_partitions(topic, 0, partitions)

    async def grow(self, name: str, partitions: int) -> None:
        """Grow a partitioned topic to ``partitions`` partitions (creating the new ones)."""
        topic = parse_topic_name(name)
        before = await self._host.partitioned.grow(topic, partitions)
        await self._create_partitions(topic, before, partitions)

    async def _create_partitions(self, topic: TopicName, start: int, end: int) -> None:
        if self._host.ownership is not None or topic.domain is TopicDomain.NON_PERSISTENT:
            # Among several brokers each partition is created by the owner of its bundle on
            # first use (a partition below the count always may be): loading them here would
            # make this broker take every partition's bundle, and the load would not spread.
            # Non-persistent partitions have nothing to create: they exist while used.
            return
        for partition in _partitions(topic, start, end):
            await self._host.get_or_create_topic(str(partition), create=True)

    async def delete(self, name: str, *, force: bool = False) -> None:
        """Delete a partitioned topic: its partitions, its partition count, its schema and its
        topic policies.

        Without ``force`` the delete is refused while a partition has producers or consumers;
        with it they are disconnected.

        Raises:
            PartitionedTopicNotFound: it is not a partitioned topic. TopicBusy: in use.
        """
        host = self._host
        topic = parse_topic_name(name)
        count = await host.partitioned.partitions(topic)
        if count == 0:
            raise PartitionedTopicNotFound(f"{topic} is not a partitioned topic")
        partitions = _partitions(topic, 0, count)
        label = f"partitioned topic {topic}"
        async with host.deletion.fenced(partitions, force=force, label=label):
            for partition in partitions:
                if partition.domain is TopicDomain.NON_PERSISTENT:
                    if str(partition) in host.non_persistent.topics:
                        await host.non_persistent.delete(str(partition), force=force)
                elif await host.topic_exists(str(partition)):
                    await host.deletion.delete_data(partition)
            await host.partitioned.delete(topic)
            if topic.domain is TopicDomain.PERSISTENT:
                # A schema id has no domain (as Pulsar's): a non-persistent topic's delete must
                # not take the schema of the persistent topic of the same name with it.
                await host.schemas.registry.delete_all(schema_id_of(topic))
            await host.topic_policies.delete(topic)


def _partitions(topic: TopicName, start: int, end: int) -> list[TopicName]:
    return [
        TopicName(topic.domain, topic.tenant, topic.namespace, partition_name(topic.local_name, i))
        for i in range(start, end)
    ]


__all__ = ["PartitionedTopicAdmin", "PartitionedTopicHost"]
