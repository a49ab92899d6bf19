"""Non-persistent topics (``non-persistent://tenant/ns/name``): Pulsar's storage-less topics.

A :class:`NonPersistentTopic` has producers and subscriptions like a persistent one, but no
managed ledger, no cursor and nothing on disk (ADR 0062): :meth:`NonPersistentTopic.publish`
answers the producer's receipt at once (message id ``0:0``, as Pulsar) and hands the message,
inside the SEND that brought it, to every subscription's
:meth:`~braid.broker.non_persistent_subscription.NonPersistentSubscription.dispatch` - delivered to
a consumer with room or dropped and counted. Nothing is kept after that, so a broker restart
replays nothing and a consumer that connects later sees only later messages.

:class:`NonPersistentTopics` is the broker's one registry of them. A topic is created on first
use (a producer or consumer) when the namespace's auto-topic-creation policy allows it, after the
same bundle-ownership check as a persistent topic (so lookups send every client of a topic to the
one broker that serves it), and lives until the broker unloads its bundle or closes. Partitions
of a partitioned non-persistent topic are non-persistent topics of their own (``name-partition-N``
below the recorded count).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from braid.broker.bundles import NamespaceBundle, topic_hash
from braid.broker.consumer import Consumer
from braid.broker.dispatch_settings import DispatchSettings
from braid.broker.entries import CorruptEntry, parse_metadata
from braid.broker.errors import (
    ConsumerBusy,
    NotSupported,
    ServiceNotReady,
    SubscriptionNotFound,
    TopicBusy,
    TopicFenced,
    TopicNotFound,
)
from braid.broker.non_persistent_subscription import NonPersistentSubscription, not_allowed
from braid.broker.ownership import AssignedBroker, BundleOwnership, NotOwner
from braid.broker.partitions import PartitionedTopics
from braid.broker.producer import PendingReceipt, Producer
from braid.broker.rates import TrafficCounters
from braid.broker.resources import NamespacePolicies
from braid.broker.subscription_admission import check_unsubscribe
from braid.broker.topic_producers import TopicProducers
from braid.clock import Clock
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import PARTITION_SUFFIX, partition_index, partitioned_topic_of
from braid.ledger.api import Entry, Position
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

#: The message id of every non-persistent message and receipt (Pulsar's ``0:0``).
NON_PERSISTENT_POSITION = Position(0, 0)


def _metadata_of(data: bytes, metadata: pb.MessageMetadata | None) -> pb.MessageMetadata:
    if metadata is not None:
        return metadata
    try:
        return parse_metadata(data)
    except CorruptEntry:
        return pb.MessageMetadata()


class NonPersistentTopic:
    """One non-persistent topic served by this broker."""

    def __init__(self, name: str, *, settings: DispatchSettings, clock: Clock) -> None:
        self.name = name
        self.settings = settings
        self.clock = clock
        self._partition = partition_index(TopicName.parse(name).local_name)
        self._producer_set = TopicProducers(name)
        #: Keyed by id(producer): producer ids are per connection.
        self.producers: dict[int, Producer] = self._producer_set.producers
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        #: Messages and bytes in (published) and out (delivered) since the topic was created.
        self.counters = TrafficCounters()
        self.closed = False

    # -- producers -----------------------------------------------------------------------------

    def last_sequence_id(self, producer_name: str) -> int:
        """-1: no deduplication on a non-persistent topic (as Pulsar)."""
        return -1

    async def add_producer(self, producer: Producer, on_waiting: Callable[[], None]) -> None:
        """Attach ``producer`` honouring its access mode (:class:`TopicProducers`)."""
        if self.closed:
            raise TopicFenced(f"topic {self.name} is closing")
        await self._producer_set.add(producer, on_waiting, stopped=lambda: self.closed)

    def remove_producer(self, producer: Producer) -> None:
        self._producer_set.remove(producer)

    def publish(
        self, receipt: PendingReceipt, data: bytes, metadata: pb.MessageMetadata | None = None
    ) -> None:
        """Answer ``receipt`` now and hand ``data`` to every subscription (delivered or dropped
        there); nothing is stored."""
        producer = receipt.producer
        if self.closed:
            producer.complete(receipt, None, TopicFenced(f"topic {self.name} is closing"))
            return
        meta = _metadata_of(data, metadata)
        messages = (
            max(meta.num_messages_in_batch, 1) if meta.HasField("num_messages_in_batch") else 1
        )
        size = len(data)
        producer.count_in(messages, size)
        counters = self.counters
        counters.messages_in += messages
        counters.bytes_in += size
        if self.subscriptions:
            entry = Entry(NON_PERSISTENT_POSITION, data)
            for sub in self.subscriptions.values():
                sub.dispatch(entry, messages, meta)
        producer.complete(receipt, NON_PERSISTENT_POSITION, None)

    # -- subscriptions -------------------------------------------------------------------------

    async def subscribe(
        self,
        subscription_name: str,
        consumer: Consumer,
        *,
        initial_earliest: bool,
        durable: bool = True,
        start: Position | None = None,
    ) -> NonPersistentSubscription:
        """Attach ``consumer`` to ``subscription_name``, creating it if new. The initial position
        and a reader's start message id mean nothing here: a consumer gets what is published
        while it is connected."""
        if self.closed:
            raise TopicFenced(f"topic {self.name} is closing")
        sub = self.subscriptions.get(subscription_name)
        if sub is not None and sub.durable != durable:
            kind = "durable" if sub.durable else "non-durable"
            raise ConsumerBusy(f"subscription {subscription_name!r} on {self.name} is {kind}")
        if sub is None:
            sub = NonPersistentSubscription(
                self.name,
                subscription_name,
                partition=self._partition,
                settings=self.settings,
                clock=self.clock,
                durable=durable,
                on_empty=None if durable else self._drop_reader,
            )
        consumer.topic_counters = self.counters
        sub.add_consumer(consumer)
        self.subscriptions[subscription_name] = sub
        return sub

    def _drop_reader(self, sub: NonPersistentSubscription) -> None:
        if self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]

    async def unsubscribe(self, subscription_name: str, consumer: Consumer | None) -> None:
        """Delete the subscription; refused while consumers other than ``consumer`` are attached."""
        sub = self._subscription(subscription_name)
        check_unsubscribe(subscription_name, sub.consumers, consumer)
        if consumer is not None:
            sub.remove_consumer(consumer)
        await sub.close()
        self.subscriptions.pop(subscription_name, None)

    async def delete_subscription(self, subscription_name: str) -> None:
        """Delete a subscription, disconnecting its consumers first."""
        sub = self._subscription(subscription_name)
        await sub.close()
        self.subscriptions.pop(subscription_name, None)

    def _subscription(self, name: str) -> NonPersistentSubscription:
        sub = self.subscriptions.get(name)
        if sub is None:
            raise SubscriptionNotFound(f"subscription {name!r} does not exist on {self.name}")
        return sub

    # -- what needs storage --------------------------------------------------------------------

    async def last_message_position(self, *, compacted: bool = False) -> tuple[Position, int]:
        raise not_allowed("getLastMessageId", self.name)

    async def find_position_by_publish_time(self, timestamp_ms: int) -> Position:
        raise not_allowed("seek by publish time", self.name)

    # -- lifecycle -----------------------------------------------------------------------------

    async def close(self, assigned: AssignedBroker | None = None) -> None:
        """Detach everyone (clients reconnect - to ``assigned`` when the topic moved there)."""
        if self.closed:
            return
        self.closed = True
        self._producer_set.wake()
        self._producer_set.disconnect_all(assigned)
        for sub in list(self.subscriptions.values()):
            await sub.close(assigned)
        self.subscriptions.clear()

    def connected_clients(self) -> tuple[int, int]:
        """``(producers, consumers)`` connected now."""
        return len(self.producers), sum(len(s.consumers) for s in self.subscriptions.values())

    def stats(self) -> dict[str, object]:
        """Pulsar's ``NonPersistentTopicStats`` fields (``msgDropRate`` of the topic and of each
        publisher and subscription, with Braid's cumulative ``msgDropCount`` beside them)."""
        counters = self.counters
        publishers = []
        for producer in self.producers.values():
            stats = producer.stats()
            # Every SEND is dispatched as it arrives: nothing is in flight to drop.
            stats.update(msgDropRate=0.0, msgDropCount=0)
            publishers.append(stats)
        return {
            "msgInCounter": counters.messages_in,
            "bytesInCounter": counters.bytes_in,
            "msgOutCounter": counters.messages_out,
            "bytesOutCounter": counters.bytes_out,
            "msgDropRate": 0.0,
            "storageSize": 0,
            "backlogSize": 0,
            "deduplicationEnabled": False,
            "publishers": publishers,
            "subscriptions": {name: s.stats() for name, s in self.subscriptions.items()},
        }


class NonPersistentHost(Protocol):
    """What the registry needs from the broker (``BrokerService``)."""

    async def namespace_policies(self, topic: TopicName) -> NamespacePolicies: ...

    @property
    def ownership(self) -> BundleOwnership | None: ...

    @property
    def partitioned(self) -> PartitionedTopics: ...


class NonPersistentTopics:
    """The non-persistent topics loaded on this broker, by full name."""

    def __init__(
        self,
        host: NonPersistentHost,
        *,
        settings: DispatchSettings,
        clock: Clock,
        allow_auto_topic_creation: bool,
    ) -> None:
        self._host = host
        self._settings = settings
        self._clock = clock
        self._allow_auto_creation = allow_auto_topic_creation
        self.topics: dict[str, NonPersistentTopic] = {}
        self._closing = False
        self._unloading: set[asyncio.Task[None]] = set()

    async def get_or_create(
        self, topic: TopicName, create: bool | None = None
    ) -> NonPersistentTopic:
        """The loaded topic, created on first use when allowed.

        Raises:
            TopicNotFound: no such namespace, or auto-creation is off (``create`` forces it),
                or a partition above the partitioned topic's count.
            NotSupported: the name of a partitioned topic itself (clients use its partitions).
            NotOwner: another broker owns the topic's bundle.
        """
        key = str(topic)
        loaded = self.topics.get(key)
        if loaded is not None:
            return loaded
        if self._closing:
            raise ServiceNotReady("the broker is shutting down")
        policies = await self._host.namespace_policies(topic)
        ownership = self._host.ownership
        bundle = await ownership.check_serving(topic) if ownership is not None else None
        allowed = policies.is_auto_topic_creation_allowed(self._allow_auto_creation)
        allowed = await self._partition_rule(topic, allowed if create is None else create)
        if not allowed:
            raise TopicNotFound(
                f"topic {topic} does not exist and auto topic creation is disabled for "
                f"namespace {topic.namespace_name}"
            )
        if bundle is not None and ownership is not None and not ownership.owns(bundle):
            raise NotOwner(f"lost namespace bundle {bundle} while loading {topic}")
        if self._closing:
            raise ServiceNotReady("the broker is shutting down")
        loaded = self.topics.get(key)  # created meanwhile by another request
        if loaded is None:
            loaded = NonPersistentTopic(key, settings=self._settings, clock=self._clock)
            self.topics[key] = loaded
            log.info("created non-persistent topic %s", key)
        return loaded

    async def _partition_rule(self, topic: TopicName, allowed: bool) -> bool:
        """A partition below its partitioned topic's count is always created, one above never;
        the partitioned name itself is not a topic."""
        partitioned = self._host.partitioned
        index = partition_index(topic.local_name)
        if index >= 0:
            base = TopicName(
                topic.domain, topic.tenant, topic.namespace, partitioned_topic_of(topic.local_name)
            )
            count = await partitioned.partitions(base)
            return allowed if count == 0 else index < count
        if await partitioned.partitions(topic):
            raise NotSupported(
                f"{topic} is a partitioned topic: produce to and consume from its partitions "
                f"({topic.local_name}{PARTITION_SUFFIX}N), as Pulsar clients do after "
                "PARTITIONED_METADATA"
            )
        return allowed

    def loaded(self, name: str) -> NonPersistentTopic:
        """The loaded topic ``name`` (``TopicNotFound`` when it is not served here now)."""
        topic = self.topics.get(name)
        if topic is None:
            raise TopicNotFound(f"non-persistent topic {name} is not active on this broker")
        return topic

    def names(self, namespace: str) -> list[str]:
        """The namespace's non-persistent topics active on this broker (Pulsar lists the ones
        its brokers have loaded: they exist only while used)."""
        prefix = f"{TopicDomain.NON_PERSISTENT.value}://{namespace}/"
        return sorted(name for name in self.topics if name.startswith(prefix))

    async def delete(self, name: str, *, force: bool = False) -> None:
        """Forget a topic; refused while clients are connected unless ``force`` (they are then
        disconnected).

        Raises:
            TopicNotFound, TopicBusy.
        """
        topic = self.loaded(name)
        producers, consumers = topic.connected_clients()
        if (producers or consumers) and not force:
            raise TopicBusy(
                f"topic {name} has {producers} producer(s) and {consumers} consumer(s) connected"
            )
        self.topics.pop(name, None)
        await topic.close()

    def unload_bundle(
        self, bundle: NamespaceBundle, assigned: AssignedBroker | None = None
    ) -> list[asyncio.Task[None]]:
        """Unload every topic of ``bundle`` (its clients reconnect, to ``assigned`` if named)."""
        tasks = []
        for name, topic in list(self.topics.items()):
            parsed = TopicName.parse(name)
            if parsed.namespace_name == bundle.namespace and bundle.includes(topic_hash(parsed)):
                del self.topics[name]
                task = asyncio.ensure_future(topic.close(assigned))
                self._unloading.add(task)
                task.add_done_callback(self._unloading.discard)
                tasks.append(task)
        return tasks

    async def close(self) -> None:
        self._closing = True
        for topic in list(self.topics.values()):
            await topic.close()
        self.topics.clear()
        await asyncio.gather(*self._unloading, return_exceptions=True)


__all__ = [
    "NON_PERSISTENT_POSITION",
    "NonPersistentHost",
    "NonPersistentTopic",
    "NonPersistentTopics",
]
