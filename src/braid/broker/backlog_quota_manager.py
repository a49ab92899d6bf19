"""Enforcing backlog quotas (Pulsar's ``BacklogQuotaManager``) and expiring messages by age.

The unit a quota is checked on is a *quota unit*: an ordinary topic alone, or every loaded segment
of one scalable topic together (the DAG, oldest segment first), so a subscription's backlog on a
scalable topic is its backlog summed over all the segments it has not drained, and splitting a
topic does not multiply its quota. With segments spread over brokers, the ``destination_storage``
check adds the backlogs of the segments other brokers serve (:attr:`BacklogQuotaManager.remote`,
asked of their owners and cached for one check interval); each broker applies the policy to its
own segments (producers refused; eviction of its segments, oldest first, by the excess of the
whole DAG). A unit is over its ``destination_storage`` quota when some
durable subscription leaves more than ``limitSize`` bytes unacknowledged (Pulsar's estimate:
whole ledgers after the mark-delete position plus the share of its own ledger), and over its
``message_age`` quota when some subscription's oldest unacknowledged message was published more
than ``limitTime`` seconds ago (the entry's ``publish_time``, read, as Pulsar's precise check).

Over a quota, the policy applies (Pulsar's rules): the producer policies disconnect the unit's
producers and refuse new ones with the policy's error (:meth:`check_producer`, called at every
PRODUCER); eviction acknowledges the slowest subscriptions' oldest messages, oldest segment first,
until they are back under the size limit, and everything older than the age limit. Message TTL
uses the same "acknowledge what was published before" step on every subscription.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from braid.broker.backlog_quota import (
    BacklogQuota,
    BacklogQuotaDefaults,
    BacklogQuotaType,
    QuotaMap,
    RetentionPolicy,
    estimated_backlog_bytes,
    eviction_target,
    quota_exceeded,
    resolve,
)
from braid.broker.entries import publish_time_of
from braid.broker.topic_policies import TopicPolicies
from braid.clock import Clock
from braid.core.errors import BraidError
from braid.core.names import SegmentTopicName, TopicDomain, TopicName
from braid.ledger.api import LATEST, Position

if TYPE_CHECKING:
    from braid.broker.subscription import Subscription
    from braid.broker.topic import PersistentTopic

log = logging.getLogger(__name__)

#: The namespace's backlog quota map (``None``: not set) for ``(tenant, namespace)``.
NamespaceQuotas = Callable[[str, str], Awaitable[QuotaMap | None]]
#: ``(scalable topic, names of its segments loaded here)`` -> each subscription's backlog bytes
#: on the topic's other segments (served by other brokers; :mod:`braid.scalable.dag_backlog`).
RemoteBacklogs = Callable[[TopicName, Collection[str]], Awaitable[dict[str, int]]]


def unit_name(topic: TopicName) -> TopicName:
    """The quota unit of a loaded topic: a segment's scalable topic, else the topic itself (each
    partition of a partitioned topic is checked alone, as Pulsar does)."""
    if topic.domain is TopicDomain.SEGMENT:
        return SegmentTopicName.parse(str(topic)).parent
    return topic


def quota_units(topics: Mapping[str, PersistentTopic]) -> dict[str, list[PersistentTopic]]:
    """Loaded topics grouped by quota unit; a scalable topic's segments oldest first."""
    units: dict[str, list[PersistentTopic]] = {}
    for name, topic in topics.items():
        if topic.closed:
            continue
        units.setdefault(str(unit_name(TopicName.parse(name))), []).append(topic)
    for members in units.values():
        members.sort(key=_age_order)
    return units


def _age_order(topic: PersistentTopic) -> int:
    name = TopicName.parse(topic.name)
    if name.domain is TopicDomain.SEGMENT:
        return SegmentTopicName.parse(topic.name).segment_id
    return 0


def _durable(topic: PersistentTopic) -> list[Subscription]:
    return [sub for sub in topic.subscriptions.values() if sub.durable]


def subscription_backlog_bytes(unit: Sequence[PersistentTopic]) -> dict[str, int]:
    """Each durable subscription's unacknowledged bytes over the whole unit."""
    totals: dict[str, int] = {}
    for topic in unit:
        view = topic.ledger.ledgers
        for sub in _durable(topic):
            size = estimated_backlog_bytes(view, sub.cursor.mark_delete_position)
            totals[sub.name] = totals.get(sub.name, 0) + size
    return totals


async def oldest_unacked_publish_ms(unit: Sequence[PersistentTopic]) -> int | None:
    """The publish time of the oldest message some subscription has not acknowledged."""
    oldest: int | None = None
    for topic in unit:
        last = topic.ledger.last_confirmed_position
        for sub in _durable(topic):
            first = topic.ledger.next_position(sub.cursor.mark_delete_position)
            if first > last:
                continue
            entries = await topic.ledger.read(first, 1)
            if entries:
                published = publish_time_of(entries[0].data)
                oldest = published if oldest is None else min(oldest, published)
    return oldest


def position_before(topic: PersistentTopic, position: Position) -> Position:
    """The mark-delete position that acknowledges everything before ``position``."""
    if position == LATEST:
        return topic.ledger.last_confirmed_position
    if position.entry_id > 0:
        return Position(position.ledger_id, position.entry_id - 1)
    return Position(position.ledger_id, -1)


async def expire_published_before(topic: PersistentTopic, cutoff_ms: int) -> int:
    """Acknowledge, for every durable subscription of ``topic``, the messages published before
    ``cutoff_ms``; returns how many subscriptions moved."""
    subs = _durable(topic)
    if not subs:
        return 0
    first_kept = await topic.find_position_by_publish_time(cutoff_ms)
    target = position_before(topic, first_kept)
    moved = 0
    for sub in subs:
        if target > sub.cursor.mark_delete_position and topic.ledger.is_acknowledgeable(target):
            moved += await sub.expire_up_to(target)
    return moved


class BacklogQuotaManager:
    """Resolves each unit's quotas and applies their policies."""

    def __init__(
        self,
        topics: Callable[[], Mapping[str, PersistentTopic]],
        namespace_quotas: NamespaceQuotas,
        topic_policies: TopicPolicies,
        defaults: BacklogQuotaDefaults,
        clock: Clock,
    ) -> None:
        self._topics = topics
        self._namespace_quotas = namespace_quotas
        self.topic_policies = topic_policies
        self._defaults = defaults
        self._clock = clock
        #: What the last reads found, for the producer check (no metadata read per PRODUCER):
        #: namespace quota maps by (tenant, namespace), topic-level ones by unit name. Every
        #: periodic round reads afresh; :meth:`forget` drops entries a metadata change touches.
        self._namespace_cache: dict[tuple[str, str], QuotaMap | None] = {}
        self._topic_cache: dict[str, QuotaMap | None] = {}
        #: A scalable topic's backlogs on the segments other brokers serve (``None``: every
        #: segment is on this broker, as in ``braid standalone``).
        self.remote: RemoteBacklogs | None = None

    def remember_namespace(self, tenant: str, namespace: str, quotas: QuotaMap | None) -> None:
        """The namespace's quotas as just read elsewhere (the broker loading a topic)."""
        self._namespace_cache[(tenant, namespace)] = quotas

    def forget(self) -> None:
        """Drop every cached quota (a namespace's or topic's policies changed)."""
        self._namespace_cache.clear()
        self._topic_cache.clear()

    async def quotas(
        self, name: str, namespaces: dict[tuple[str, str], QuotaMap | None] | None = None
    ) -> dict[BacklogQuotaType, BacklogQuota]:
        """The quotas in force for the topic (or unit) ``name``, by type, read from the metadata
        store (``namespaces``: the namespace maps already read this round)."""
        topic = TopicName.parse(name)
        key = (topic.tenant, topic.namespace)
        namespaces = {} if namespaces is None else namespaces
        if key not in namespaces:
            namespaces[key] = await self._namespace_quotas(*key)
        own = await self.topic_policies.backlog_quotas(topic)
        self._namespace_cache[key] = namespaces[key]
        self._topic_cache[str(unit_name(topic))] = own
        return self._resolve(own, namespaces[key])

    async def _cached_quotas(self, name: str) -> dict[BacklogQuotaType, BacklogQuota]:
        topic = TopicName.parse(name)
        key, unit = (topic.tenant, topic.namespace), str(unit_name(topic))
        if key not in self._namespace_cache or unit not in self._topic_cache:
            return await self.quotas(name)
        return self._resolve(self._topic_cache[unit], self._namespace_cache[key])

    def _resolve(
        self, own: QuotaMap | None, namespace: QuotaMap | None
    ) -> dict[BacklogQuotaType, BacklogQuota]:
        out: dict[BacklogQuotaType, BacklogQuota] = {}
        for kind in BacklogQuotaType:
            quota = resolve(kind, own, namespace, self._defaults)
            if quota is not None:
                out[kind] = quota
        return out

    def unit_of(self, name: str) -> list[PersistentTopic]:
        return quota_units(self._topics()).get(str(unit_name(TopicName.parse(name))), [])

    async def exceeded(
        self, unit: Sequence[PersistentTopic], quotas: Mapping[BacklogQuotaType, BacklogQuota]
    ) -> list[tuple[BacklogQuotaType, BacklogQuota, str]]:
        """The quotas ``unit`` is over, each with a sentence saying by how much."""
        over: list[tuple[BacklogQuotaType, BacklogQuota, str]] = []
        size = quotas.get(BacklogQuotaType.DESTINATION_STORAGE)
        if size is not None and size.limit_size >= 0:
            totals = subscription_backlog_bytes(unit)
            for name, elsewhere in (await self.elsewhere(unit)).items():
                totals[name] = totals.get(name, 0) + elsewhere
            backlog = max(totals.values(), default=0)
            if backlog > size.limit_size:
                why = f"backlog of {backlog} bytes over the limit of {size.limit_size}"
                over.append((BacklogQuotaType.DESTINATION_STORAGE, size, why))
        age = quotas.get(BacklogQuotaType.MESSAGE_AGE)
        if age is not None and age.limit_time >= 0:
            oldest = await oldest_unacked_publish_ms(unit)
            now = self._clock.now_ms()
            if oldest is not None and now - oldest > age.limit_time * 1000:
                why = f"oldest unacknowledged message {(now - oldest) // 1000} s old, over the "
                over.append((BacklogQuotaType.MESSAGE_AGE, age, why + f"{age.limit_time} s limit"))
        return over

    async def elsewhere(self, unit: Sequence[PersistentTopic]) -> dict[str, int]:
        """Each subscription's backlog bytes on the segments of ``unit``'s scalable topic that
        other brokers serve (empty for an ordinary topic, or without :attr:`remote`)."""
        if self.remote is None or not unit:
            return {}
        first = TopicName.parse(unit[0].name)
        if first.domain is not TopicDomain.SEGMENT:
            return {}
        return await self.remote(unit_name(first), {topic.name for topic in unit})

    async def check_producer(self, name: str) -> None:
        """Refuse a new producer on ``name`` while its unit is over a producer-blocking quota
        (raises :class:`~braid.broker.backlog_quota.TopicBacklogQuotaExceeded`).

        Fails open: when the policies cannot be read (the metadata store is down), the producer
        is let in and the periodic check applies the quota once they can.
        """
        try:
            quotas = await self._cached_quotas(name)
        except BraidError as exc:
            log.debug("backlog quotas of %s unreadable, producer let in: %r", name, exc)
            return
        if not any(q.policy.blocks_producers for q in quotas.values()):
            return
        unit = self.unit_of(name)
        for kind, quota, why in await self.exceeded(unit, quotas):
            if quota.policy.blocks_producers:
                raise quota_exceeded(
                    f"Cannot create producer on topic with backlog quota exceeded ({kind.value}:"
                    f" {why})",
                    quota.policy,
                )

    async def check_once(self) -> list[str]:
        """Apply the policy of every quota a loaded unit is over; returns the units acted on."""
        acted: list[str] = []
        namespaces: dict[tuple[str, str], QuotaMap | None] = {}  # read once per round
        for unit_name, unit in quota_units(self._topics()).items():
            try:
                quotas = await self.quotas(unit_name, namespaces)
                if not quotas:
                    continue
                over = await self.exceeded(unit, quotas)
                for kind, quota, why in over:
                    log.info("%s is over its %s backlog quota: %s", unit_name, kind.value, why)
                    await self._apply(unit, kind, quota)
                if over:
                    acted.append(unit_name)
            except BraidError as exc:
                log.warning("backlog quota check of %s failed: %r", unit_name, exc)
        return acted

    async def _apply(
        self, unit: Sequence[PersistentTopic], kind: BacklogQuotaType, quota: BacklogQuota
    ) -> None:
        if quota.policy is not RetentionPolicy.CONSUMER_BACKLOG_EVICTION:
            for topic in unit:
                topic.disconnect_producers()
        elif kind is BacklogQuotaType.MESSAGE_AGE:
            cutoff = self._clock.now_ms() - quota.limit_time * 1000
            for topic in unit:
                await expire_published_before(topic, cutoff)
        else:
            await evict_to_size(unit, quota.limit_size, await self.elsewhere(unit))


async def evict_to_size(
    unit: Sequence[PersistentTopic], limit_bytes: int, elsewhere: Mapping[str, int] | None = None
) -> None:
    """Move every subscription over ``limit_bytes`` forward, oldest segment first, until its
    backlog over the unit - plus ``elsewhere``, its backlog on segments other brokers serve,
    which only they can evict - is within the limit."""
    elsewhere = elsewhere or {}
    for name, total in subscription_backlog_bytes(unit).items():
        excess = total + elsewhere.get(name, 0) - limit_bytes
        for topic in unit:
            if excess <= 0:
                break
            sub = topic.subscriptions.get(name)
            if sub is None:
                continue
            view = topic.ledger.ledgers
            mark = sub.cursor.mark_delete_position
            here = estimated_backlog_bytes(view, mark)
            if here <= 0:
                continue
            if here <= excess:
                target: Position | None = topic.ledger.last_confirmed_position
            else:
                target = eviction_target(view, mark, here - excess)
            if target is not None and target > mark:
                await sub.expire_up_to(target)
            excess -= here - estimated_backlog_bytes(view, sub.cursor.mark_delete_position)


__all__ = [
    "BacklogQuotaManager",
    "evict_to_size",
    "expire_published_before",
    "oldest_unacked_publish_ms",
    "position_before",
    "quota_units",
    "subscription_backlog_bytes",
    "unit_name",
]
