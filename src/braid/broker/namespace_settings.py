"""What a namespace's policies say for a topic of it, over the broker's defaults.

One reader of the namespace policies (``/admin/policies/{tenant}/{ns}``, owned by
:class:`~braid.broker.resources.BrokerResources`) for the broker's parts that need them: topic
loads and lookups (the policies, or ``TopicNotFound`` naming a missing namespace), the schema
registry (compatibility strategy, auto-update, validation), the backlog-quota manager (quota map)
and the TTL check (message TTL). It writes nothing and caches nothing: the metadata store's
cache and watches are the one source.
"""

from __future__ import annotations

from braid.broker.backlog_quota import QuotaMap
from braid.broker.config import BrokerConfig
from braid.broker.errors import TopicNotFound
from braid.broker.resources import BrokerResources, NamespaceNotFound, NamespacePolicies
from braid.broker.schemas.topic_schemas import SchemaPolicy
from braid.core.names import TopicName


class NamespaceSettings:
    """Reads of the namespace policies a broker acts on."""

    def __init__(self, resources: BrokerResources, config: BrokerConfig) -> None:
        self._resources = resources
        self._config = config

    async def policies(self, topic: TopicName) -> NamespacePolicies:
        """The topic's namespace policies; ``TopicNotFound`` naming the namespace if absent."""
        if not await self._resources.namespace_exists(topic.tenant, topic.namespace):
            raise TopicNotFound(f"namespace {topic.namespace_name} does not exist")
        return await self._resources.get_namespace_policies(topic.tenant, topic.namespace)

    async def schema_policy(self, topic: TopicName) -> SchemaPolicy:
        """The namespace's schema settings over the broker's defaults."""
        policies = await self.policies(topic)
        return SchemaPolicy(
            strategy=policies.schema_compatibility_strategy
            or self._config.schema_compatibility_strategy,
            allow_auto_update=policies.is_allow_auto_update_schema is not False,
            validation_enforced=(
                self._config.is_schema_validation_enforced
                if policies.schema_validation_enforced is None
                else policies.schema_validation_enforced
            ),
        )

    async def backlog_quotas(self, tenant: str, namespace: str) -> QuotaMap | None:
        """The namespace's backlog quotas (``None``: no such namespace)."""
        try:
            return (
                await self._resources.get_namespace_policies(tenant, namespace)
            ).backlog_quota_map
        except NamespaceNotFound:
            return None

    async def message_ttl(self, tenant: str, namespace: str) -> int | None:
        """The namespace's message TTL in seconds (``None``: unset or no such namespace)."""
        try:
            policies = await self._resources.get_namespace_policies(tenant, namespace)
        except NamespaceNotFound:
            return None
        return policies.message_ttl_in_seconds


__all__ = ["NamespaceSettings"]
