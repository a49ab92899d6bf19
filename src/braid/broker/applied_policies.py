"""The policies in force on one topic: the topic's own over its namespace's over the broker's.

Pulsar resolves retention, deduplication and the producer/consumer caps of a topic in three
levels - ``TopicPolicies`` (:mod:`braid.broker.topic_policies`), then the namespace ``Policies``
(``retention_policies``, ``deduplicationEnabled``, ``max_producers_per_topic``,
``max_consumers_per_topic``, ``max_consumers_per_subscription``), then ``broker.conf``
(``defaultRetention*``, ``brokerDeduplicationEnabled``, ``maxProducersPerTopic``, ...).
:class:`AppliedPolicies` is that result for one topic; :class:`AppliedPolicyResolver` computes
and caches it, and keeps loaded topics in step with changes:

* the caps are read on every PRODUCER and SUBSCRIBE (from the cache), so a change applies to the
  next producer or consumer;
* retention is the managed ledger's: applied when the topic loads, and the broker's namespace
  refresh passes through :meth:`AppliedPolicyResolver.ledger_config`, so a namespace change never
  overrides a topic's own retention;
* when a change (topic or namespace level, made through any broker: a metadata notification)
  alters a loaded topic's deduplication, or its own retention, the topic is unloaded - its
  producers and consumers reconnect and it loads again under the new policies (ADR 0059).

The namespace-level caps have no field of their own in
:class:`~braid.broker.resources.NamespacePolicies`: they are read from (and written to) its
``extra`` keys under Pulsar's names (:data:`NAMESPACE_LIMIT_KEYS`), validated here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from braid.broker.client_limits import ClientLimits
from braid.broker.config import BrokerConfig, retention_mb_to_bytes, retention_minutes_to_seconds
from braid.broker.resources import (
    POLICIES_ROOT,
    BrokerResources,
    InvalidPolicies,
    NamespaceNotFound,
    NamespacePolicies,
    RetentionPolicies,
)
from braid.broker.topic_policies import (
    DEDUPLICATION,
    MAX_CONSUMERS,
    MAX_CONSUMERS_PER_SUBSCRIPTION,
    MAX_PRODUCERS,
    RETENTION,
    TOPIC_POLICIES_ROOT,
    TopicPolicies,
    policy_path,
    policy_topic,
)
from braid.core.names import TopicName
from braid.ledger.api import ManagedLedgerConfig
from braid.metadata.api import MetadataStore, Notification

log = logging.getLogger(__name__)

#: Pulsar's namespace ``Policies`` keys of the three caps, by the topic-level key they back.
NAMESPACE_LIMIT_KEYS: Mapping[str, str] = {
    MAX_PRODUCERS: "max_producers_per_topic",
    MAX_CONSUMERS: "max_consumers_per_topic",
    MAX_CONSUMERS_PER_SUBSCRIPTION: "max_consumers_per_subscription",
}


def check_limit(value: object, name: str = "limit") -> int:
    """A producer/consumer cap: an integer, 0 (no cap) or more (Pulsar answers 412 otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidPolicies(f"{name} must be an integer, 0 or more, got {value!r}")
    return value


def check_deduplication(value: object) -> bool:
    """A deduplication setting: ``true`` or ``false``."""
    if not isinstance(value, bool):
        raise InvalidPolicies(f"deduplicationEnabled must be true or false, got {value!r}")
    return value


def check_retention(value: object) -> RetentionPolicies:
    """Pulsar's ``RetentionPolicies`` document (``retentionTimeInMinutes``,
    ``retentionSizeInMB``, each -1 for unlimited)."""
    return RetentionPolicies.from_json(value)


def namespace_limit(policies: NamespacePolicies, key: str) -> int | None:
    """A namespace's cap for the topic-level ``key`` (``None``: not set on the namespace)."""
    value = policies.extra.get(NAMESPACE_LIMIT_KEYS[key])
    return None if value is None else check_limit(value, NAMESPACE_LIMIT_KEYS[key])


def with_namespace_limit(
    policies: NamespacePolicies, key: str, value: int | None
) -> NamespacePolicies:
    """``policies`` with the namespace cap for the topic-level ``key`` set (``None``: removed)."""
    extra = {k: v for k, v in policies.extra.items() if k != NAMESPACE_LIMIT_KEYS[key]}
    if value is not None:
        extra[NAMESPACE_LIMIT_KEYS[key]] = check_limit(value, NAMESPACE_LIMIT_KEYS[key])
    return dataclasses.replace(policies, extra=extra)


@dataclass(frozen=True)
class AppliedPolicies:
    """What governs one topic now, every level resolved."""

    #: The retention in force, ``None`` when neither the topic nor its namespace set one (the
    #: broker's ``defaultRetention*``, already in the base managed-ledger config).
    retention: RetentionPolicies | None
    deduplication_enabled: bool
    #: The per-topic and per-subscription caps resolved; per-connection ones are the broker's.
    client_limits: ClientLimits
    #: Which level each value came from (``topic``, ``namespace`` or ``broker``), for stats.
    sources: Mapping[str, str]

    def ledger_config(self, base: ManagedLedgerConfig) -> ManagedLedgerConfig:
        """``base`` (the broker's and namespace's settings) with this retention."""
        if self.retention is None:
            return base
        return dataclasses.replace(
            base,
            retention_time_s=retention_minutes_to_seconds(self.retention.retention_time_in_minutes),
            retention_size_bytes=retention_mb_to_bytes(self.retention.retention_size_in_mb),
        )


def resolve(
    own: Mapping[str, Any], namespace: NamespacePolicies, config: BrokerConfig
) -> AppliedPolicies:
    """The three levels merged: ``own`` (the topic's settings, as stored), the namespace's,
    the broker's."""
    sources: dict[str, str] = {}
    retention: RetentionPolicies | None = None
    if own.get(RETENTION) is not None:
        retention, sources[RETENTION] = check_retention(own[RETENTION]), "topic"
    elif namespace.retention is not None:
        retention, sources[RETENTION] = namespace.retention, "namespace"
    else:
        sources[RETENTION] = "broker"
    if own.get(DEDUPLICATION) is not None:
        dedup, sources[DEDUPLICATION] = check_deduplication(own[DEDUPLICATION]), "topic"
    elif namespace.deduplication_enabled is not None:
        dedup, sources[DEDUPLICATION] = namespace.deduplication_enabled, "namespace"
    else:
        dedup, sources[DEDUPLICATION] = config.broker_deduplication_enabled, "broker"
    broker_caps = {
        MAX_PRODUCERS: config.max_producers_per_topic,
        MAX_CONSUMERS: config.max_consumers_per_topic,
        MAX_CONSUMERS_PER_SUBSCRIPTION: config.max_consumers_per_subscription,
    }
    caps: dict[str, int] = {}
    for key, broker_value in broker_caps.items():
        if own.get(key) is not None:
            caps[key], sources[key] = check_limit(own[key], key), "topic"
        elif (value := namespace_limit(namespace, key)) is not None:
            caps[key], sources[key] = value, "namespace"
        else:
            caps[key], sources[key] = broker_value, "broker"
    limits = ClientLimits(
        caps[MAX_PRODUCERS],
        caps[MAX_CONSUMERS],
        caps[MAX_CONSUMERS_PER_SUBSCRIPTION],
        config.max_producers_per_connection,
        config.max_consumers_per_connection,
    )
    return AppliedPolicies(retention, dedup, limits, sources)


class AppliedPolicyResolver:
    """Resolves and caches :class:`AppliedPolicies`; unloads loaded topics a change affects."""

    def __init__(
        self,
        metadata: MetadataStore,
        resources: BrokerResources,
        topic_policies: TopicPolicies,
        config: BrokerConfig,
        *,
        loaded: Callable[[], Mapping[str, Any]],
        unload: Callable[[Any, str], object],
    ) -> None:
        self._resources = resources
        self._topic_policies = topic_policies
        self._config = config
        self._loaded = loaded
        self._unload = unload
        self._cache: dict[str, AppliedPolicies] = {}
        self._checks: set[asyncio.Task[list[str]]] = set()
        self._unwatch = metadata.register_listener(self._on_notification)

    async def resolve(self, topic: TopicName) -> AppliedPolicies:
        """The policies in force on ``topic`` (cached until a policy changes)."""
        key = str(topic)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        try:
            namespace = await self._resources.get_namespace_policies(topic.tenant, topic.namespace)
        except NamespaceNotFound:
            namespace = NamespacePolicies()
        applied = resolve(await self._topic_policies.settings(topic), namespace, self._config)
        self._cache[key] = applied
        return applied

    async def client_limits(self, name: str) -> ClientLimits:
        """The caps in force on the topic ``name`` (PRODUCER and SUBSCRIBE check them)."""
        return (await self.resolve(TopicName.parse(name))).client_limits

    async def ledger_config(
        self, topic: TopicName, base: ManagedLedgerConfig
    ) -> ManagedLedgerConfig:
        """``base`` with the topic's own retention, if it has one."""
        applied = await self.resolve(topic)
        if applied.sources.get(RETENTION) != "topic":
            return base
        return applied.ledger_config(base)

    def forget(self) -> None:
        """Drop every cached result (a policy changed)."""
        self._cache.clear()

    def close(self) -> None:
        self._unwatch()
        for task in self._checks:
            task.cancel()

    def _on_notification(self, event: Notification) -> None:
        if not event.path.startswith((POLICIES_ROOT + "/", TOPIC_POLICIES_ROOT + "/")):
            return
        self.forget()
        task = asyncio.get_running_loop().create_task(self.recheck(event.path))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def recheck(self, path: str) -> list[str]:
        """Unload the loaded topics whose deduplication or retention the policies at ``path``
        (a namespace's or a topic's node) no longer match; returns their names."""
        unloaded = []
        for name, topic in list(self._loaded().items()):
            parsed = TopicName.parse(name)
            if not _governed_by(path, parsed):
                continue
            try:
                applied = await self.resolve(parsed)
            except Exception:
                log.exception("reading the policies of %s failed", name)
                continue
            ledger = topic.ledger.config
            # The retention in force: the topic's, else the namespace's, else the broker's.
            wanted = applied.ledger_config(self._config.managed_ledger_config())
            dedup_differs = applied.deduplication_enabled != (topic.dedup is not None)
            # A namespace's retention reaches loaded ledgers without a reload (the broker's
            # refresh of its ledger configs); a topic's own needs one.
            retention_differs = path.startswith(TOPIC_POLICIES_ROOT + "/") and (
                wanted.retention_time_s,
                wanted.retention_size_bytes,
            ) != (ledger.retention_time_s, ledger.retention_size_bytes)
            if dedup_differs or retention_differs:
                self._unload(topic, "policies changed")
                unloaded.append(name)
        return unloaded


def _governed_by(path: str, topic: TopicName) -> bool:
    """Whether the policy node at ``path`` is ``topic``'s namespace's or its own."""
    if path.startswith(POLICIES_ROOT + "/"):
        parts = path[len(POLICIES_ROOT) + 1 :].split("/")
        return parts[:2] == [topic.tenant, topic.namespace]
    return path == policy_path(policy_topic(topic))


__all__ = [
    "NAMESPACE_LIMIT_KEYS",
    "AppliedPolicies",
    "AppliedPolicyResolver",
    "check_deduplication",
    "check_limit",
    "check_retention",
    "namespace_limit",
    "resolve",
    "with_namespace_limit",
]
