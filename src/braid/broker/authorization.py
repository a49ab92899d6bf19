"""The broker's authorization service: Pulsar's ``AuthorizationService`` over Braid's metadata.

One object per broker, built from ``authorizationEnabled``, ``superUserRoles``,
``authorizationProvider`` and ``authorizationAllowWildcardsMatching``. It reads what each check
needs - the tenant's ``adminRoles`` and the namespace's ``auth_policies`` - from
:class:`~braid.broker.resources.BrokerResources` and leaves the decision to the pure
:class:`~braid.security.authorization.AuthorizationPolicy`. Every protocol command that names a
topic or a namespace (through the connection's ``authorize``) and every admin request (through
:mod:`braid.admin.authorization`) asks it.

Invariants: with authorization disabled every check passes. Enabled, a check reads only the
tenant and the namespace the request names, never the topic, and a missing namespace is refused
exactly like a missing grant - so a refusal never tells whether a topic or a namespace exists.
A topic operation in a tenant that does not exist is answered as Pulsar answers it (its
``validateTenantAdminAccess``): :class:`TenantMissing`, ``TopicNotFound`` on the wire and 404
over HTTP, which clients (and the official client's own tests) rely on (ADR 0054). Permission
changes are compare-and-swap updates of the namespace policies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from braid.broker.errors import TopicNotFound
from braid.broker.resources import (
    BrokerResources,
    NamespaceNotFound,
    NamespacePolicies,
    TenantNotFound,
)
from braid.core.names import InvalidTopicName, NamespaceName, TopicName
from braid.security.authorization import (
    POLICIES_KEY,
    AuthorizationDenied,
    AuthorizationPolicy,
    AuthorizationSettings,
    AuthPolicies,
    TopicOperation,
)

log = logging.getLogger(__name__)

#: Pulsar's wording for each refused operation (the peer sees only this).
_REFUSALS = {
    TopicOperation.LOOKUP: "Client is not authorized to Lookup",
    TopicOperation.PRODUCE: "Client is not authorized to Produce",
    TopicOperation.CONSUME: "Client is not authorized to Subscribe",
    TopicOperation.ADMIN: "Don't have permission to administrate resources on this tenant",
}
SUPER_USER_REQUIRED = "This operation requires super-user access"
TENANT_ADMIN_REQUIRED = _REFUSALS[TopicOperation.ADMIN]
GET_TOPICS_REFUSED = "Client is not authorized to list the topics of this namespace"
#: Pulsar's text when a topic operation names a tenant that does not exist.
TENANT_MISSING = "Tenant does not exist"


class TenantMissing(TopicNotFound):
    """A topic operation named a tenant that does not exist (Pulsar: ``TopicNotFound`` /
    404 "Tenant does not exist" before any grant is looked at)."""


def auth_policies_of(policies: NamespacePolicies) -> AuthPolicies:
    """The ``auth_policies`` kept in a namespace's policies (none: no grants)."""
    return AuthPolicies.from_json(policies.extra.get(POLICIES_KEY))


def with_auth_policies(policies: NamespacePolicies, auth: AuthPolicies) -> NamespacePolicies:
    """``policies`` with ``auth`` as its ``auth_policies``."""
    return replace(policies, extra={**policies.extra, POLICIES_KEY: auth.to_json()})


class AuthorizationService:
    """Checks roles against super users, tenant admins and namespace/topic grants."""

    def __init__(self, settings: AuthorizationSettings, resources: BrokerResources) -> None:
        self.settings = settings
        self.policy = AuthorizationPolicy(settings)
        self._resources = resources

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def is_super_user(self, role: str | None) -> bool:
        return self.policy.is_super_user(role)

    async def _admin_roles(self, tenant: str) -> Sequence[str] | None:
        try:
            return (await self._resources.get_tenant(tenant)).admin_roles
        except TenantNotFound:
            return None

    async def _auth_policies(self, tenant: str, namespace: str) -> AuthPolicies | None:
        try:
            return auth_policies_of(await self._resources.get_namespace_policies(tenant, namespace))
        except NamespaceNotFound:
            return None

    async def is_tenant_admin(self, role: str | None, tenant: str) -> bool:
        """A super user, or one of ``tenant``'s ``adminRoles`` (a missing tenant: only super
        users)."""
        if not self.enabled or self.policy.is_super_user(role):
            return True
        admins = await self._admin_roles(tenant)
        return admins is not None and self.policy.is_tenant_admin(role, admins)

    async def allows_topic(
        self,
        role: str | None,
        operation: TopicOperation,
        topic: TopicName,
        subscription: str | None = None,
    ) -> bool:
        """Whether ``role`` may do ``operation`` on ``topic``.

        Raises:
            TenantMissing: the topic's tenant does not exist (and ``role`` is no super user).
        """
        if not self.enabled or self.policy.is_super_user(role):
            return True
        if role is None:
            return False
        admins = await self._admin_roles(topic.tenant)
        if admins is None:
            raise TenantMissing(TENANT_MISSING)
        if self.policy.is_tenant_admin(role, admins):
            return True
        auth = await self._auth_policies(topic.tenant, topic.namespace)
        if auth is None:
            return False
        return self.policy.allows_topic(role, operation, topic, admins, auth, subscription)

    async def allows_namespace_topics(self, role: str | None, namespace: NamespaceName) -> bool:
        """Whether ``role`` may list or watch the topics of ``namespace``."""
        if not self.enabled or self.policy.is_super_user(role):
            return True
        admins = await self._admin_roles(namespace.tenant)
        if admins is None or role is None:
            return False
        auth = await self._auth_policies(namespace.tenant, namespace.namespace)
        if auth is None:
            return self.policy.is_tenant_admin(role, admins)
        return self.policy.allows_namespace_topics(role, admins, auth)

    async def check_topic(
        self,
        role: str | None,
        operation: TopicOperation,
        name: str,
        subscription: str | None = None,
    ) -> None:
        """Raise :class:`AuthorizationDenied` unless ``role`` may do ``operation`` on the topic
        named ``name`` (a name that does not parse is refused the same way)."""
        if not self.enabled or self.policy.is_super_user(role):
            return
        try:
            topic = TopicName.parse(name)
        except InvalidTopicName:
            topic = None
        if topic is None or not await self.allows_topic(role, operation, topic, subscription):
            log.debug("refusing %s on %s to role %r", operation.value, name, role)
            raise AuthorizationDenied(_REFUSALS[operation])

    async def check_namespace_topics(self, role: str | None, namespace: str) -> None:
        """Raise :class:`AuthorizationDenied` unless ``role`` may list ``namespace``'s topics."""
        if not self.enabled or self.policy.is_super_user(role):
            return
        try:
            name = NamespaceName.parse(namespace)
        except InvalidTopicName:
            name = None
        if name is None or not await self.allows_namespace_topics(role, name):
            log.debug("refusing the topics of %s to role %r", namespace, role)
            raise AuthorizationDenied(GET_TOPICS_REFUSED)

    # -- permissions (the admin API's grant/revoke) ---------------------------------------------

    async def namespace_permissions(self, tenant: str, namespace: str) -> AuthPolicies:
        """The namespace's grants. Raises ``NamespaceNotFound``."""
        return auth_policies_of(await self._resources.get_namespace_policies(tenant, namespace))

    async def update_permissions(
        self, tenant: str, namespace: str, change: Callable[[AuthPolicies], AuthPolicies]
    ) -> AuthPolicies:
        """Apply ``change`` to the namespace's grants, as one compare-and-swap of its policies
        (retried on conflict); returns the new grants. Raises ``NamespaceNotFound``."""
        result: list[AuthPolicies] = []

        def mutate(policies: NamespacePolicies) -> NamespacePolicies:
            result[:] = [change(auth_policies_of(policies))]
            return with_auth_policies(policies, result[0])

        await self._resources.update_namespace_policies(tenant, namespace, mutate)
        return result[0]


__all__ = [
    "GET_TOPICS_REFUSED",
    "SUPER_USER_REQUIRED",
    "TENANT_ADMIN_REQUIRED",
    "AuthorizationService",
    "auth_policies_of",
    "with_auth_policies",
]
