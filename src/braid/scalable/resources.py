"""Scalable-topic state in the metadata store (PIP-468 ``ScalableTopicResources``).

Paths (``docs/architecture.md#metadata-paths``; names URL-encoded as Pulsar's
``encodedTopicName``, so any topic, subscription or consumer name is a legal path segment on
every backend)::

    /topics/{tenant}/{ns}/{topic}                                  ScalableTopicMetadata (layout)
    /topics/{tenant}/{ns}/{topic}/controller                       leader broker URL (ephemeral)
    /topics/{tenant}/{ns}/{topic}/operation                        split/merge in flight (Braid)
    /topics/{tenant}/{ns}/{topic}/subscriptions/{sub}              SubscriptionMetadata
    /topics/{tenant}/{ns}/{topic}/subscriptions/{sub}/consumers/{name}   ConsumerRegistration
    /topics/{tenant}/{ns}/{topic}/segments/{segmentId}/load        SegmentLoadStats (PIP-483)

Every read-modify-write is a compare-and-swap on the node's version, retried on conflict. This
module is the only place that knows these paths; the controller, the coordinators, the DAG-watch
sessions and the admin API go through it.

The module is named as Pulsar names this layer: PIP-468 puts ``ScalableTopicResources``,
``SubscriptionMetadata``, ``ConsumerRegistration`` and ``SubscriptionType`` in Pulsar's
``org.apache.pulsar.broker.resources`` package (the typed access to each kind of metadata, beside
``TenantResources`` and ``NamespaceResources``: :mod:`braid.broker.resources`), and this module
holds the same four.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import quote, unquote

from braid.core.errors import AlreadyExistsError, ConflictError, InvalidInputError, NotFoundError
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import decode_layout, encode_layout
from braid.core.names import TopicDomain, TopicName
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound

log = logging.getLogger(__name__)

#: Root of every scalable topic's metadata.
TOPICS_ROOT = "/topics"

#: How many times a read-modify-write is retried after losing a compare-and-swap.
CAS_ATTEMPTS = 50
#: Layouts kept decoded (one per topic node; the least recently read is dropped first).
DECODED_LAYOUTS = 256


class ScalableTopicNotFound(NotFoundError):
    """The scalable topic has no metadata (it was never created, or it was deleted)."""


class ScalableTopicAlreadyExists(AlreadyExistsError):
    """Creating a scalable topic that already exists."""


class SubscriptionTypeMismatch(InvalidInputError):
    """A subscription is used with a type other than the one it was created with."""


class CasExhausted(ConflictError):
    """A read-modify-write lost its compare-and-swap more times than it is retried."""


class SubscriptionType(StrEnum):
    """The three consumption modes of a scalable topic's subscription (PIP-460)."""

    STREAM = "STREAM"
    QUEUE = "QUEUE"
    CHECKPOINT = "CHECKPOINT"


def encode_name(name: str) -> str:
    """A name as one metadata path segment (percent-encoded, reversible with :func:`decode_name`).

    ``.`` and ``..`` are encoded too, since a path segment may not be either.
    """
    encoded = quote(name, safe="-_~@:=,+")
    if encoded in (".", ".."):
        encoded = encoded.replace(".", "%2E")
    return encoded


def decode_name(segment: str) -> str:
    """The name a path segment written by :func:`encode_name` stands for."""
    return unquote(segment)


def check_scalable_topic(topic: TopicName) -> TopicName:
    """Return ``topic`` if it is a ``topic://`` name.

    Raises:
        InvalidInputError: any other domain.
    """
    if topic.domain is not TopicDomain.TOPIC:
        raise InvalidInputError(f"{topic} is not a scalable topic (expected topic://...)")
    return topic


def check_initial_segments(count: object, limit: int) -> None:
    """A new scalable topic's (or a migration's) segment count against
    ``scalableTopicMaxSegments`` (a non-int is left to the caller's own check).

    Raises:
        InvalidInputError: more than ``limit``.
    """
    if isinstance(count, int) and count > limit:
        raise InvalidInputError(
            f"a scalable topic starts with at most {limit} segments (scalableTopicMaxSegments), "
            f"got {count}; it splits by itself as load grows"
        )


@dataclass(frozen=True)
class SubscriptionMetadata:
    """``/subscriptions/{sub}``: the subscription's type and the position new cursors start at."""

    type: SubscriptionType
    initial_position_earliest: bool = False

    def encode(self) -> bytes:
        return json.dumps(
            {"type": self.type.value, "initialPosition": self._position()},
            separators=(",", ":"),
        ).encode()

    def _position(self) -> str:
        return "Earliest" if self.initial_position_earliest else "Latest"

    @classmethod
    def decode(cls, data: bytes) -> SubscriptionMetadata:
        """Parse the node's value; an empty or unreadable value is a STREAM subscription."""
        try:
            doc = json.loads(data) if data else {}
            kind = SubscriptionType(doc.get("type", "STREAM"))
            earliest = doc.get("initialPosition", "Latest") == "Earliest"
        except (ValueError, AttributeError):
            log.warning("unreadable subscription metadata %r; treating it as STREAM", data[:100])
            return cls(SubscriptionType.STREAM)
        return cls(kind, earliest)


@dataclass(frozen=True)
class ConsumerRegistration:
    """``/subscriptions/{sub}/consumers/{name}``: a consumer's durable session (PIP-468)."""

    consumer_name: str
    segment_ids: tuple[int, ...] = ()
    layout_epoch: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        doc = dict(self.extra)
        doc.update(
            {
                "consumerName": self.consumer_name,
                "assignedSegments": list(self.segment_ids),
                "layoutEpoch": self.layout_epoch,
            }
        )
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, name: str, data: bytes) -> ConsumerRegistration:
        try:
            doc = json.loads(data) if data else {}
            if not isinstance(doc, dict):
                raise ValueError("not an object")
            ids = tuple(int(i) for i in doc.pop("assignedSegments", []))
            epoch = int(doc.pop("layoutEpoch", 0))
            doc.pop("consumerName", None)
        except (ValueError, TypeError):
            log.warning("unreadable registration of consumer %r; keeping the name only", name)
            return cls(name)
        return cls(name, ids, epoch, doc)


@dataclass(frozen=True)
class VersionedLayout:
    """A layout as read from the store, with the node version a CAS must name."""

    layout: SegmentLayout
    version: int


class ScalableTopicResources:
    """Typed access to every scalable-topic node of one metadata store."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        # Node path -> the stored bytes last decoded there and their layout (immutable), so a
        # layout read again unchanged is not decoded again: a 1,000-segment layout costs tens of
        # milliseconds to decode, and lookups, DAG watches and the auto-scaler read it often.
        self._decoded: OrderedDict[str, tuple[bytes, SegmentLayout]] = OrderedDict()

    @property
    def store(self) -> MetadataStore:
        return self._store

    # -- paths ---------------------------------------------------------------------------------

    @staticmethod
    def namespace_path(tenant: str, namespace: str) -> str:
        return f"{TOPICS_ROOT}/{encode_name(tenant)}/{encode_name(namespace)}"

    @classmethod
    def topic_path(cls, topic: TopicName) -> str:
        check_scalable_topic(topic)
        base = cls.namespace_path(topic.tenant, topic.namespace)
        return f"{base}/{encode_name(topic.local_name)}"

    @classmethod
    def controller_path(cls, topic: TopicName) -> str:
        return f"{cls.topic_path(topic)}/controller"

    @classmethod
    def operation_path(cls, topic: TopicName) -> str:
        return f"{cls.topic_path(topic)}/operation"

    @classmethod
    def subscriptions_path(cls, topic: TopicName) -> str:
        return f"{cls.topic_path(topic)}/subscriptions"

    @classmethod
    def subscription_path(cls, topic: TopicName, subscription: str) -> str:
        return f"{cls.subscriptions_path(topic)}/{encode_name(subscription)}"

    @classmethod
    def consumers_path(cls, topic: TopicName, subscription: str) -> str:
        return f"{cls.subscription_path(topic, subscription)}/consumers"

    @classmethod
    def consumer_path(cls, topic: TopicName, subscription: str, consumer: str) -> str:
        return f"{cls.consumers_path(topic, subscription)}/{encode_name(consumer)}"

    @classmethod
    def segment_load_path(cls, topic: TopicName, segment_id: int) -> str:
        return f"{cls.topic_path(topic)}/segments/{segment_id}/load"

    @classmethod
    def topic_of_path(cls, path: str) -> TopicName | None:
        """The scalable topic whose metadata node is exactly ``path`` (``None`` otherwise)."""
        parts = path.split("/")
        if len(parts) != 5 or parts[0] != "" or f"/{parts[1]}" != TOPICS_ROOT:
            return None
        try:
            return TopicName(
                TopicDomain.TOPIC,
                decode_name(parts[2]),
                decode_name(parts[3]),
                decode_name(parts[4]),
            )
        except InvalidInputError:
            return None

    # -- layouts -------------------------------------------------------------------------------

    async def get_layout(self, topic: TopicName) -> VersionedLayout | None:
        """The topic's layout and node version, or ``None`` if the topic does not exist.

        Raises:
            CorruptLayout: the stored document is not a valid layout.
        """
        path = self.topic_path(topic)
        found = await self._store.get(path)
        if found is None or not found[0]:
            # No node, or one without data: a parent the store made for a child written first
            # (a load report of a segment a migration created before its layout, ADR 0063).
            return None
        data, stat = found
        return VersionedLayout(self._decode(path, data), stat.version)

    def _decode(self, path: str, data: bytes) -> SegmentLayout:
        """``decode_layout(data)``, remembered per node for the last ``DECODED_LAYOUTS`` nodes
        read (a hit needs the very same bytes)."""
        cached = self._decoded.get(path)
        if cached is not None and cached[0] == data:
            self._decoded.move_to_end(path)
            return cached[1]
        layout = decode_layout(data)
        self._decoded[path] = (bytes(data), layout)
        self._decoded.move_to_end(path)
        while len(self._decoded) > DECODED_LAYOUTS:
            self._decoded.popitem(last=False)
        return layout

    async def require_layout(self, topic: TopicName) -> VersionedLayout:
        """Like :meth:`get_layout`, raising :class:`ScalableTopicNotFound` when absent."""
        found = await self.get_layout(topic)
        if found is None:
            raise ScalableTopicNotFound(f"scalable topic {topic} does not exist")
        return found

    async def create_layout(self, topic: TopicName, layout: SegmentLayout) -> VersionedLayout:
        """Write a new topic's layout.

        Raises:
            ScalableTopicAlreadyExists: the topic already has metadata.
        """
        path = self.topic_path(topic)
        expected = -1
        found = await self._store.get(path)
        if found is not None and not found[0]:
            expected = found[1].version  # an empty parent made for a child (see get_layout)
        try:
            stat = await self._store.put(path, encode_layout(layout), expected)
        except BadVersion:
            raise ScalableTopicAlreadyExists(f"scalable topic {topic} already exists") from None
        return VersionedLayout(layout, stat.version)

    async def update_layout(
        self, topic: TopicName, mutate: Callable[[SegmentLayout], SegmentLayout]
    ) -> VersionedLayout:
        """Read, apply ``mutate`` and compare-and-swap, retrying on conflict.

        ``mutate`` may return its argument unchanged, in which case nothing is written.

        Raises:
            ScalableTopicNotFound: the topic vanished.
            CasExhausted: other writers kept winning.
        """
        for _ in range(CAS_ATTEMPTS):
            current = await self.require_layout(topic)
            updated = mutate(current.layout)
            if updated is current.layout:
                return current
            try:
                stat = await self._store.put(
                    self.topic_path(topic), encode_layout(updated), current.version
                )
            except BadVersion:
                continue
            return VersionedLayout(updated, stat.version)
        raise CasExhausted(f"gave up updating the layout of {topic} after {CAS_ATTEMPTS} conflicts")

    async def delete_topic(self, topic: TopicName) -> None:
        """Remove the topic's metadata and everything below it (missing is fine)."""
        await self._store.delete_recursive(self.topic_path(topic))

    async def list_topics(self, tenant: str, namespace: str) -> list[TopicName]:
        """The scalable topics of a namespace, sorted by name."""
        names = await self._store.children(self.namespace_path(tenant, namespace))
        topics = []
        for child in names:
            try:
                topics.append(TopicName(TopicDomain.TOPIC, tenant, namespace, decode_name(child)))
            except InvalidInputError:
                log.warning(
                    "ignoring unparsable scalable-topic node %r in %s/%s", child, tenant, namespace
                )
        return sorted(topics, key=str)

    async def list_namespaces(self) -> list[tuple[str, str]]:
        """Every ``(tenant, namespace)`` that has at least one scalable-topic node."""
        found = []
        for tenant in await self._store.children(TOPICS_ROOT):
            for namespace in await self._store.children(f"{TOPICS_ROOT}/{tenant}"):
                found.append((decode_name(tenant), decode_name(namespace)))
        return found

    # -- structural operation in flight --------------------------------------------------------

    async def get_operation(self, topic: TopicName) -> tuple[dict[str, Any], int] | None:
        found = await self._store.get(self.operation_path(topic))
        if found is None:
            return None
        data, stat = found
        doc = json.loads(data)
        if not isinstance(doc, dict):
            raise InvalidInputError(f"operation record of {topic} is not a JSON object")
        return doc, stat.version

    async def begin_operation(self, topic: TopicName, record: Mapping[str, Any]) -> int:
        """Create the operation record; only one structural operation may be in flight.

        Raises:
            BadVersion: another operation's record exists.
        """
        data = json.dumps(dict(record), separators=(",", ":"), sort_keys=True).encode()
        stat = await self._store.put(self.operation_path(topic), data, -1)
        return stat.version

    async def end_operation(self, topic: TopicName) -> None:
        try:
            await self._store.delete(self.operation_path(topic))
        except NodeNotFound:
            pass

    # -- subscriptions -------------------------------------------------------------------------

    async def list_subscriptions(self, topic: TopicName) -> dict[str, SubscriptionMetadata]:
        """Every subscription the metadata store knows, with its metadata."""
        result: dict[str, SubscriptionMetadata] = {}
        for child in await self._store.children(self.subscriptions_path(topic)):
            name = decode_name(child)
            found = await self._store.get(self.subscription_path(topic, name))
            if found is not None and found[0]:
                result[name] = SubscriptionMetadata.decode(found[0])
        return result

    async def get_subscription(
        self, topic: TopicName, subscription: str
    ) -> SubscriptionMetadata | None:
        found = await self._store.get(self.subscription_path(topic, subscription))
        # An empty node is only the parent of registrations, not a created subscription.
        return None if found is None or not found[0] else SubscriptionMetadata.decode(found[0])

    async def create_subscription(
        self, topic: TopicName, subscription: str, metadata: SubscriptionMetadata
    ) -> SubscriptionMetadata:
        """Create the subscription's node, or return the existing metadata (idempotent).

        Raises:
            SubscriptionTypeMismatch: it exists with another type.
        """
        path = self.subscription_path(topic, subscription)
        for _ in range(CAS_ATTEMPTS):
            found = await self._store.get(path)
            if found is not None:
                data, stat = found
                existing = SubscriptionMetadata.decode(data)
                if data:
                    if existing.type is not metadata.type:
                        raise SubscriptionTypeMismatch(
                            f"subscription {subscription!r} of {topic} is a {existing.type} "
                            f"subscription, not {metadata.type}"
                        )
                    return existing
                # An empty node (created as the parent of a registration): fill it in.
                try:
                    await self._store.put(path, metadata.encode(), stat.version)
                except BadVersion:
                    continue
                return metadata
            try:
                await self._store.put(path, metadata.encode(), -1)
            except BadVersion:
                continue
            return metadata
        raise CasExhausted(f"gave up creating subscription {subscription!r} of {topic}")

    async def delete_subscription(self, topic: TopicName, subscription: str) -> None:
        await self._store.delete_recursive(self.subscription_path(topic, subscription))

    # -- consumer registrations ----------------------------------------------------------------

    async def list_registrations(
        self, topic: TopicName, subscription: str
    ) -> list[ConsumerRegistration]:
        registrations = []
        for child in await self._store.children(self.consumers_path(topic, subscription)):
            name = decode_name(child)
            found = await self._store.get(self.consumer_path(topic, subscription, name))
            if found is not None:
                registrations.append(ConsumerRegistration.decode(name, found[0]))
        return registrations

    async def put_registration(
        self, topic: TopicName, subscription: str, registration: ConsumerRegistration
    ) -> None:
        """Create or overwrite a consumer's registration."""
        await self._store.put(
            self.consumer_path(topic, subscription, registration.consumer_name),
            registration.encode(),
        )

    async def delete_registration(
        self, topic: TopicName, subscription: str, consumer_name: str
    ) -> None:
        try:
            await self._store.delete(self.consumer_path(topic, subscription, consumer_name))
        except NodeNotFound:
            pass

    # -- load records (PIP-483) ----------------------------------------------------------------

    async def delete_segment_records(self, topic: TopicName, segment_ids: Sequence[int]) -> None:
        """Drop the per-segment nodes (load records) of pruned segments."""
        for segment_id in segment_ids:
            await self._store.delete_recursive(f"{self.topic_path(topic)}/segments/{segment_id}")


async def retry_on_conflict(action: Callable[[], Awaitable[Any]], what: str) -> Any:
    """Run ``action`` until it does not raise :class:`BadVersion` (bounded)."""
    for _ in range(CAS_ATTEMPTS):
        try:
            return await action()
        except BadVersion:
            continue
    raise CasExhausted(f"gave up {what} after {CAS_ATTEMPTS} conflicts")


__all__ = [
    "CAS_ATTEMPTS",
    "TOPICS_ROOT",
    "CasExhausted",
    "ConsumerRegistration",
    "ScalableTopicAlreadyExists",
    "ScalableTopicNotFound",
    "ScalableTopicResources",
    "SubscriptionMetadata",
    "SubscriptionType",
    "SubscriptionTypeMismatch",
    "VersionedLayout",
    "check_scalable_topic",
    "decode_name",
    "encode_name",
    "retry_on_conflict",
]
