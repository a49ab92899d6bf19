"""Deleting topics: one topic, or the partitions of a partitioned topic, with Pulsar's guards.

:class:`TopicDeletion` is the one owner of "which topics are being deleted". Invariants:

* a topic being deleted is fenced for the delete's duration: :meth:`TopicDeletion.is_deleting`
  says so, and the broker refuses to load it or attach a client to it meanwhile (the retriable
  ``ServiceNotReady``), so a reconnecting producer cannot re-create it half-way;
* without ``force`` a delete is refused while producers or consumers are connected (Pulsar's 412
  "Topic has active producers/subscriptions", :class:`~braid.broker.errors.TopicBusy`, naming
  the counts); with it they are disconnected by the topic's close;
* a topic's data goes with it - its managed ledger and what it keeps beside it (a compacted
  ledger) - and, unless it is one partition of a partitioned topic (whose siblings share them),
  its schema and its topic-level policies (ADR 0044).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol

from braid.broker.errors import ServiceNotReady, TopicBusy, TopicNotFound
from braid.broker.schemas.model import schema_id_of
from braid.broker.schemas.topic_schemas import TopicSchemas
from braid.broker.topic import PersistentTopic
from braid.broker.topic_names import managed_ledger_name
from braid.broker.topic_policies import TopicPolicies
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import partition_index
from braid.ledger.api import ManagedLedgerFactory


class DeletionHost(Protocol):
    """What a delete needs from the broker that owns the loaded topics."""

    ml_factory: ManagedLedgerFactory
    schemas: TopicSchemas
    topic_policies: TopicPolicies

    @property
    def topics(self) -> Mapping[str, PersistentTopic]: ...

    async def load_stored_topic(self, topic: TopicName) -> PersistentTopic:
        """Load a stored topic without creating it."""
        ...

    def forget_topic(self, name: str) -> PersistentTopic | None:
        """Take a loaded topic out of the broker's registry (``None``: not loaded)."""
        ...


class TopicDeletion:
    """Deletes topics for one broker and fences them while it does."""

    def __init__(self, host: DeletionHost) -> None:
        self._host = host
        self._deleting: set[str] = set()

    def is_deleting(self, name: str) -> bool:
        """Whether the topic of this full name is being deleted right now."""
        return name in self._deleting

    @contextlib.asynccontextmanager
    async def fenced(
        self, topics: Sequence[TopicName], *, force: bool, label: str
    ) -> AsyncIterator[None]:
        """Fence ``topics`` for the delete's duration, refusing first, unless ``force``, while
        clients are connected to any of them."""
        keys = {str(t) for t in topics}
        if keys & self._deleting:
            raise ServiceNotReady(f"{label} is already being deleted")
        if not force:
            producers = consumers = 0
            for key in keys:
                if (loaded := self._host.topics.get(key)) is not None:
                    p, c = loaded.connected_clients()
                    producers, consumers = producers + p, consumers + c
            if producers or consumers:
                raise TopicBusy(
                    f"{label} has {producers} connected producer(s) and {consumers} connected "
                    "consumer(s); delete with force=true to disconnect them"
                )
        self._deleting |= keys
        try:
            yield
        finally:
            self._deleting -= keys

    async def delete_topic(self, topic: TopicName, *, force: bool) -> None:
        """Delete a topic, its data and - unless it is a partition - its schema and policies.

        Raises:
            TopicNotFound, TopicBusy (in use).
        """
        async with self.fenced([topic], force=force, label=f"topic {topic}"):
            await self.delete_data(topic)
            if partition_index(topic.local_name) < 0:
                # A partition's policies are its partitioned topic's, which outlives it.
                await self._host.topic_policies.delete(topic)
                if topic.domain is TopicDomain.PERSISTENT:
                    await self._host.schemas.registry.delete_all(schema_id_of(topic))

    async def delete_data(self, topic: TopicName) -> None:
        """Close the topic if loaded and delete its managed ledger (``TopicNotFound`` if it
        has none). The caller holds :meth:`fenced`."""
        ml_name = managed_ledger_name(topic)
        host = self._host
        if str(topic) not in host.topics and await host.ml_factory.exists(ml_name):
            # Loaded so that what it keeps beside its managed ledger (a compacted ledger) goes too.
            await host.load_stored_topic(topic)
        loaded = host.forget_topic(str(topic))
        if loaded is not None:
            await loaded.compaction.delete()
            if loaded.transactions is not None:
                if loaded.transactions.buffer.sealed is not None:
                    await loaded.transactions.buffer.sealed.forget()  # ADR 0069
                await loaded.transactions.delete()  # its buffer snapshot and pending acks
            await loaded.close()
        elif not await host.ml_factory.exists(ml_name):
            raise TopicNotFound(f"topic {topic} does not exist")
        await host.ml_factory.delete(ml_name)


__all__ = ["DeletionHost", "TopicDeletion"]
