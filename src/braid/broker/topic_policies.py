"""Topic-level policies (Pulsar's ``TopicPolicies``): the backlog quotas set on one topic.

Pulsar keeps topic policies in a per-namespace system topic; Braid keeps them where its other
metadata lives, one JSON node per topic at ``/admin/topic-policies/{tenant}/{namespace}/{domain}/
{local name}`` with Pulsar's key (``backLogQuotaMap``, keyed by quota type). A scalable topic's
policies are its own node (``topic`` domain) and apply to every segment of its DAG, and a
partitioned topic's apply to its partitions: see :func:`policy_topic`. Every change is a
compare-and-swap on the node's version, retried on conflict; a node left empty is deleted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import MappingProxyType
from urllib.parse import quote

from braid.broker.backlog_quota import (
    BacklogQuota,
    BacklogQuotaType,
    QuotaMap,
    quota_map_from_json,
    quota_map_to_json,
)
from braid.core.names import SegmentTopicName, TopicDomain, TopicName
from braid.core.partitions import partitioned_topic_of
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound

#: Root of topic-level policies in the metadata store.
TOPIC_POLICIES_ROOT = "/admin/topic-policies"
_KEY = "backLogQuotaMap"  # Pulsar's TopicPolicies field name
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


def _path(topic: TopicName) -> str:
    local = quote(topic.local_name, safe="")
    return f"{TOPIC_POLICIES_ROOT}/{topic.tenant}/{topic.namespace}/{topic.domain.value}/{local}"


class TopicPolicies:
    """Topic-level backlog quotas in the metadata store."""

    def __init__(self, metadata: MetadataStore) -> None:
        self._metadata = metadata

    async def backlog_quotas(self, topic: TopicName) -> QuotaMap | None:
        """The topic's own quotas (``None``: none set; the namespace's apply)."""
        got = await self._metadata.get(_path(policy_topic(topic)))
        if got is None:
            return None
        doc = json.loads(got[0].decode("utf-8")) if got[0] else {}
        quotas = doc.get(_KEY)
        return None if not quotas else quota_map_from_json(quotas)

    async def set_backlog_quota(
        self, topic: TopicName, kind: BacklogQuotaType, quota: BacklogQuota
    ) -> None:
        await self._update(topic, lambda quotas: {**quotas, kind: quota})

    async def remove_backlog_quota(self, topic: TopicName, kind: BacklogQuotaType) -> None:
        await self._update(topic, lambda quotas: {k: v for k, v in quotas.items() if k != kind})

    async def delete(self, topic: TopicName) -> None:
        """Forget every policy of ``topic`` (when the topic is deleted)."""
        try:
            await self._metadata.delete(_path(policy_topic(topic)))
        except NodeNotFound:
            pass

    async def _update(
        self,
        topic: TopicName,
        mutate: Callable[
            [dict[BacklogQuotaType, BacklogQuota]], dict[BacklogQuotaType, BacklogQuota]
        ],
    ) -> None:
        path = _path(policy_topic(topic))
        for _ in range(_CAS_ATTEMPTS):
            got = await self._metadata.get(path)
            doc = json.loads(got[0].decode("utf-8")) if got is not None and got[0] else {}
            quotas = dict(quota_map_from_json(doc.get(_KEY) or {}))
            new = MappingProxyType(mutate(quotas))
            try:
                if not new and got is not None:
                    await self._metadata.delete(path, got[1].version)
                elif new:
                    doc[_KEY] = quota_map_to_json(new)
                    body = json.dumps(doc, sort_keys=True).encode()
                    await self._metadata.put(path, body, -1 if got is None else got[1].version)
                return
            except (BadVersion, NodeNotFound):
                continue
        raise BadVersion(f"could not update {path}: too many concurrent changes")


__all__ = ["TOPIC_POLICIES_ROOT", "TopicPolicies", "policy_topic"]
