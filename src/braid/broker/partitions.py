"""Partitioned topics: a name, a partition count in metadata, and one topic per partition.

Pulsar's model: ``persistent://t/ns/orders`` with 4 partitions is the metadata node
``/admin/partitioned-topics/t/ns/persistent/orders`` holding ``{"partitions": 4}``, and four
ordinary topics ``orders-partition-0`` .. ``orders-partition-3`` (:mod:`braid.core.partitions`).
A ``non-persistent://`` topic may be partitioned the same way (its node is under
``.../non-persistent``; its partitions are non-persistent topics, created on first use).
Clients ask PARTITIONED_METADATA (or ``GET .../partitions``) first and then produce to and consume
from the partitions, routing messages themselves (round-robin, by key hash, or a custom router).

:class:`PartitionedTopics` keeps the metadata (create, read, grow, delete: every update a
compare-and-swap); the broker creates the partitions' managed ledgers when the topic is created
or grown, and refuses to serve the partitioned name itself as a plain topic. The number of
partitions can only grow (a key's partition would change under its consumers otherwise).
"""

from __future__ import annotations

import json
from urllib.parse import quote, unquote

from braid.core.errors import AlreadyExistsError, NotFoundError
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import (
    InvalidPartitionCount,
    check_partition_count,
    partition_index,
)
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound

#: Root of partitioned-topic metadata (Pulsar's path).
PARTITIONED_ROOT = "/admin/partitioned-topics"

_CAS_ATTEMPTS = 20


class PartitionedTopicExists(AlreadyExistsError):
    """Creating a partitioned topic whose name is taken (partitioned or not)."""


class PartitionedTopicNotFound(NotFoundError):
    """The topic is not a partitioned topic."""


#: The domains whose topics may be partitioned.
PARTITIONABLE = (TopicDomain.PERSISTENT, TopicDomain.NON_PERSISTENT)


def _namespace_path(tenant: str, namespace: str, domain: TopicDomain) -> str:
    return f"{PARTITIONED_ROOT}/{tenant}/{namespace}/{domain.value}"


def metadata_path(topic: TopicName) -> str:
    """``/admin/partitioned-topics/<tenant>/<ns>/<domain>/<topic>``."""
    base = _namespace_path(topic.tenant, topic.namespace, topic.domain)
    return f"{base}/{quote(topic.local_name, safe='')}"


def _decode(data: bytes, topic: TopicName) -> int:
    try:
        doc = json.loads(data.decode("utf-8"))
        return check_partition_count(doc["partitions"])
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise InvalidPartitionCount(
            f"the partitioned-topic metadata of {topic} is corrupt: {exc}"
        ) from None


def _encode(partitions: int) -> bytes:
    return json.dumps({"partitions": partitions, "properties": {}}, sort_keys=True).encode()


class PartitionedTopics:
    """Partition counts of ``persistent://`` and ``non-persistent://`` topics, in the metadata
    store."""

    def __init__(self, metadata: MetadataStore) -> None:
        self._metadata = metadata

    @staticmethod
    def _check(topic: TopicName) -> None:
        if topic.domain not in PARTITIONABLE:
            raise InvalidPartitionCount(
                f"only persistent:// and non-persistent:// topics can be partitioned: {topic}"
            )
        if partition_index(topic.local_name) >= 0:
            raise InvalidPartitionCount(f"{topic} is a partition's name")

    async def partitions(self, topic: TopicName) -> int:
        """The topic's number of partitions; 0 when it is not a partitioned topic."""
        if topic.domain not in PARTITIONABLE or partition_index(topic.local_name) >= 0:
            return 0
        got = await self._metadata.get(metadata_path(topic))
        return 0 if got is None else _decode(got[0], topic)

    async def create(self, topic: TopicName, partitions: int) -> None:
        """Record ``topic`` as having ``partitions`` partitions.

        Raises:
            PartitionedTopicExists: it is already partitioned.
            InvalidPartitionCount: a count out of range, or a name that cannot be partitioned.
        """
        self._check(topic)
        check_partition_count(partitions)
        try:
            await self._metadata.put(metadata_path(topic), _encode(partitions), -1)
        except BadVersion:
            raise PartitionedTopicExists(f"partitioned topic {topic} already exists") from None

    async def grow(self, topic: TopicName, partitions: int) -> int:
        """Raise the count to ``partitions``; returns the previous count.

        Raises:
            PartitionedTopicNotFound, InvalidPartitionCount (not more than today's count).
        """
        self._check(topic)
        check_partition_count(partitions)
        path = metadata_path(topic)
        for _ in range(_CAS_ATTEMPTS):
            got = await self._metadata.get(path)
            if got is None:
                raise PartitionedTopicNotFound(f"{topic} is not a partitioned topic")
            current = _decode(got[0], topic)
            if partitions <= current:
                raise InvalidPartitionCount(
                    f"{topic} has {current} partitions: the number of partitions can only grow "
                    f"(asked for {partitions})"
                )
            try:
                await self._metadata.put(path, _encode(partitions), got[1].version)
                return current
            except BadVersion:
                continue
        raise BadVersion(f"the partition count of {topic} kept changing during an update")

    async def delete(self, topic: TopicName) -> None:
        """Forget the partition count. Raises :class:`PartitionedTopicNotFound`."""
        try:
            await self._metadata.delete(metadata_path(topic))
        except NodeNotFound:
            raise PartitionedTopicNotFound(f"{topic} is not a partitioned topic") from None

    async def list(
        self, tenant: str, namespace: str, domain: TopicDomain = TopicDomain.PERSISTENT
    ) -> list[str]:
        """Full names of the namespace's partitioned topics of ``domain``, sorted."""
        children = await self._metadata.children(_namespace_path(tenant, namespace, domain))
        return sorted(
            str(TopicName(domain, tenant, namespace, unquote(child))) for child in children
        )


__all__ = [
    "PARTITIONABLE",
    "PARTITIONED_ROOT",
    "PartitionedTopicExists",
    "PartitionedTopicNotFound",
    "PartitionedTopics",
    "metadata_path",
]
