"""Topic-level policies (Pulsar's ``TopicPolicies``): the backlog quotas, message TTL, retention,
deduplication and producer/consumer caps set on one topic.

Pulsar keeps topic policies in a per-namespace system topic; Braid keeps them where its other
metadata lives, one JSON node per topic at ``/admin/topic-policies/{tenant}/{namespace}/{domain}/
{local name}`` with Pulsar's keys (``backLogQuotaMap``, keyed by quota type,
``messageTTLInSeconds``, ``retentionPolicies``, ``deduplicationEnabled``, ``maxProducerPerTopic``,
``maxConsumerPerTopic``, ``maxConsumersPerSubscription``; :data:`SETTINGS` names the last five,
which :meth:`TopicPolicies.setting` and :meth:`TopicPolicies.set_setting` read and write as stored
JSON values - :mod:`braid.broker.applied_policies` validates and interprets them). A scalable
topic's policies are its own node (``topic`` domain) and apply to every segment of its DAG, and a
partitioned topic's apply to its partitions: see :func:`policy_topic`. Every change is a
compare-and-swap on the node's version, retried on conflict; a node left empty is deleted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from braid.broker.backlog_quota import (
    BacklogQuota,
    BacklogQuotaType,
    QuotaMap,
    check_ttl,
    quota_map_from_json,
    quota_map_to_json,
)
from braid.core.names import SegmentTopicName, TopicDomain, TopicName
from braid.core.partitions import partitioned_topic_of
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound

#: Root of topic-level policies in the metadata store.
TOPIC_POLICIES_ROOT = "/admin/topic-policies"
_KEY = "backLogQuotaMap"  # Pulsar's TopicPolicies field names
_TTL_KEY = "messageTTLInSeconds"
RETENTION = "retentionPolicies"
DEDUPLICATION = "deduplicationEnabled"
MAX_PRODUCERS = "maxProducerPerTopic"
MAX_CONSUMERS = "maxConsumerPerTopic"
MAX_CONSUMERS_PER_SUBSCRIPTION = "maxConsumersPerSubscription"
#: The topic-level settings kept as plain JSON values under Pulsar's ``TopicPolicies`` keys.
SETTINGS = frozenset(
    {RETENTION, DEDUPLICATION, MAX_PRODUCERS, MAX_CONSUMERS, MAX_CONSUMERS_PER_SUBSCRIPTION}
)
_CAS_ATTEMPTS = 20


def policy_topic(name: TopicName) -> TopicName:
    """The topic whose policies govern ``name``: a segment's scalable topic, a partition's
    partitioned topic (as Pulsar applies a partitioned topic's policies to its partitions), else
    the topic itself."""
    if name.domain is TopicDomain.SEGMENT:
        return SegmentTopicName.parse(str(name)).parent
    base = partitioned_topic_of(name.local_name)
    if base != name.local_name:
        return TopicName(name.domain, name.tenant, name.namespace, base)
    return name


def policy_path(topic: TopicName) -> str:
    """The metadata node of ``topic``'s own policies (``topic`` as :func:`policy_topic` gives)."""
    local = quote(topic.local_name, safe="")
    return f"{TOPIC_POLICIES_ROOT}/{topic.tenant}/{topic.namespace}/{topic.domain.value}/{local}"


class TopicPolicies:
    """Topic-level backlog quotas and message TTL in the metadata store."""

    def __init__(self, metadata: MetadataStore) -> None:
        self._metadata = metadata

    async def _read(self, topic: TopicName) -> dict[str, Any]:
        got = await self._metadata.get(policy_path(policy_topic(topic)))
        doc = json.loads(got[0].decode("utf-8")) if got is not None and got[0] else {}
        return doc if isinstance(doc, dict) else {}

    async def backlog_quotas(self, topic: TopicName) -> QuotaMap | None:
        """The topic's own quotas (``None``: none set; the namespace's apply)."""
        quotas = (await self._read(topic)).get(_KEY)
        return None if not quotas else quota_map_from_json(quotas)

    async def message_ttl(self, topic: TopicName) -> int | None:
        """The topic's own message TTL in seconds (``None``: the namespace's applies)."""
        ttl = (await self._read(topic)).get(_TTL_KEY)
        return None if ttl is None else check_ttl(ttl)

    async def settings(self, topic: TopicName) -> dict[str, Any]:
        """The topic's own :data:`SETTINGS` that are set, by key (stored JSON values)."""
        doc = await self._read(topic)
        return {key: doc[key] for key in SETTINGS if doc.get(key) is not None}

    async def setting(self, topic: TopicName, key: str) -> Any:
        """One of :data:`SETTINGS` as stored (``None``: not set on the topic)."""
        return (await self.settings(topic)).get(_setting_key(key))

    async def set_setting(self, topic: TopicName, key: str, value: Any) -> None:
        """Set (``None``: remove) one of :data:`SETTINGS` to an already validated JSON value."""
        key = _setting_key(key)

        def apply(doc: dict[str, Any]) -> None:
            if value is None:
                doc.pop(key, None)
            else:
                doc[key] = value

        await self._update(topic, apply)

    async def set_backlog_quota(
        self, topic: TopicName, kind: BacklogQuotaType, quota: BacklogQuota
    ) -> None:
        def apply(doc: dict[str, Any]) -> None:
            quotas = {**quota_map_from_json(doc.get(_KEY) or {}), kind: quota}
            doc[_KEY] = quota_map_to_json(quotas)

        await self._update(topic, apply)

    async def remove_backlog_quota(self, topic: TopicName, kind: BacklogQuotaType) -> None:
        def apply(doc: dict[str, Any]) -> None:
            quotas = {
                k: v for k, v in quota_map_from_json(doc.get(_KEY) or {}).items() if k != kind
            }
            if quotas:
                doc[_KEY] = quota_map_to_json(quotas)
            else:
                doc.pop(_KEY, None)

        await self._update(topic, apply)

    async def set_message_ttl(self, topic: TopicName, seconds: int | None) -> None:
        """Set (``None``: remove) the topic's message TTL."""
        checked = None if seconds is None else check_ttl(seconds)

        def apply(doc: dict[str, Any]) -> None:
            if checked is None:
                doc.pop(_TTL_KEY, None)
            else:
                doc[_TTL_KEY] = checked

        await self._update(topic, apply)

    async def delete(self, topic: TopicName) -> None:
        """Forget every policy of ``topic`` (when the topic is deleted)."""
        try:
            await self._metadata.delete(policy_path(policy_topic(topic)))
        except NodeNotFound:
            pass

    async def _update(self, topic: TopicName, mutate: Callable[[dict[str, Any]], None]) -> None:
        """Read the document, let ``mutate`` change it in place, write it back with CAS (an
        empty document deletes the node)."""
        path = policy_path(policy_topic(topic))
        for _ in range(_CAS_ATTEMPTS):
            got = await self._metadata.get(path)
            doc = json.loads(got[0].decode("utf-8")) if got is not None and got[0] else {}
            mutate(doc)
            try:
                if not doc and got is not None:
                    await self._metadata.delete(path, got[1].version)
                elif doc:
                    body = json.dumps(doc, sort_keys=True).encode()
                    await self._metadata.put(path, body, -1 if got is None else got[1].version)
                return
            except (BadVersion, NodeNotFound):
                continue
        raise BadVersion(f"could not update {path}: too many concurrent changes")


def _setting_key(key: str) -> str:
    if key not in SETTINGS:
        raise ValueError(f"{key!r} is not a topic-level setting (one of {sorted(SETTINGS)})")
    return key


__all__ = [
    "DEDUPLICATION",
    "MAX_CONSUMERS",
    "MAX_CONSUMERS_PER_SUBSCRIPTION",
    "MAX_PRODUCERS",
    "RETENTION",
    "SETTINGS",
    "TOPIC_POLICIES_ROOT",
    "TopicPolicies",
    "policy_path",
    "policy_topic",
]
