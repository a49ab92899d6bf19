"""Admin REST for permissions (Pulsar's ``grant-permission`` / ``revoke-permission`` /
``permissions`` of namespaces and topics).

* ``GET /admin/v2/namespaces/{tenant}/{namespace}/permissions``: role -> actions granted on the
  namespace; ``POST .../permissions/{role}`` with a JSON list of actions (``["produce",
  "consume"]``) grants exactly those; ``DELETE .../permissions/{role}`` revokes the role's grant;
* ``POST .../permissions/subscription/{subscription}`` with a JSON list of roles: only those may
  consume from the subscription; ``DELETE .../permissions/{subscription}/{role}`` removes one;
* ``GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/permissions``: the namespace's grants
  merged with the topic's; ``POST``/``DELETE .../permissions/{role}`` grant or revoke on the topic
  (412 revoking a grant the topic does not have - it may come from the namespace); the same under
  ``/admin/v2/scalable/...`` for a scalable topic (``topic://``; its segments inherit the grant).

Grants are stored in the namespace's ``auth_policies`` (Pulsar's JSON), each change one
compare-and-swap of the namespace policies
(:class:`~braid.broker.authorization.AuthorizationService`).
Who may call these is the authorization middleware's business (tenant admins and super users).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Response

from braid.admin.errors import PreconditionFailed
from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.authorization import AuthorizationService
from braid.core.names import TopicDomain, TopicName
from braid.security.authorization import AuthPolicies, check_role, parse_actions

_NS = "/namespaces/{tenant}/{namespace}/permissions"


def permissions_router(service: AuthorizationService) -> APIRouter:
    """The permission endpoints (mounted under ``/admin/v2``)."""
    router = APIRouter(tags=["permissions"])

    @router.get(_NS, summary="Roles and the actions granted to them on the namespace")
    async def namespace_permissions(tenant: Tenant, namespace: Namespace) -> dict[str, list[str]]:
        auth = await service.namespace_permissions(tenant, namespace)
        return auth.to_json()["namespace_auth"]  # type: ignore[no-any-return]

    @router.post(f"{_NS}/subscription/{{subscription}}", status_code=204)
    async def grant_subscription(
        tenant: Tenant,
        namespace: Namespace,
        subscription: str,
        roles: Annotated[list[str], Body()],
    ) -> Response:
        """Only ``roles`` may consume from ``subscription`` (besides tenant admins)."""
        allowed = frozenset(check_role(r) for r in roles)

        def change(auth: AuthPolicies) -> AuthPolicies:
            current = dict(auth.subscription_auth_roles)
            current[subscription] = current.get(subscription, frozenset()) | allowed
            return AuthPolicies(auth.namespace_auth, auth.destination_auth, current)

        await service.update_permissions(tenant, namespace, change)
        return Response(status_code=204)

    @router.delete(f"{_NS}/{{subscription}}/{{role}}", status_code=204)
    async def revoke_subscription(
        tenant: Tenant, namespace: Namespace, subscription: str, role: str
    ) -> Response:
        """``role`` no longer in ``subscription``'s role list."""

        def change(auth: AuthPolicies) -> AuthPolicies:
            current = dict(auth.subscription_auth_roles)
            if role not in current.get(subscription, frozenset()):
                raise PreconditionFailed(f"role {role!r} has no permission on {subscription!r}")
            current[subscription] = current[subscription] - {role}
            if not current[subscription]:
                del current[subscription]
            return AuthPolicies(auth.namespace_auth, auth.destination_auth, current)

        await service.update_permissions(tenant, namespace, change)
        return Response(status_code=204)

    @router.post(f"{_NS}/{{role}}", status_code=204, summary="Grant actions on the namespace")
    async def grant_namespace(
        tenant: Tenant, namespace: Namespace, role: str, actions: Annotated[list[str], Body()]
    ) -> Response:
        grant = (check_role(role), parse_actions(actions))
        await service.update_permissions(tenant, namespace, lambda a: a.grant_namespace(*grant))
        return Response(status_code=204)

    @router.delete(f"{_NS}/{{role}}", status_code=204, summary="Revoke a role's namespace grant")
    async def revoke_namespace(tenant: Tenant, namespace: Namespace, role: str) -> Response:
        await service.update_permissions(tenant, namespace, lambda a: a.revoke_namespace(role))
        return Response(status_code=204)

    for kind, domain in (("persistent", TopicDomain.PERSISTENT), ("scalable", TopicDomain.TOPIC)):
        _topic_routes(router, service, kind, domain)

    return router


def _topic_routes(
    router: APIRouter, service: AuthorizationService, kind: str, domain: TopicDomain
) -> None:
    """``GET``, ``POST .../{role}`` and ``DELETE .../{role}`` of one topic kind's permissions."""
    path = f"/{kind}/{{tenant}}/{{namespace}}/{{topic}}/permissions"

    def full_name(tenant: str, namespace: str, topic: str) -> str:
        return str(TopicName(domain, tenant, namespace, topic))

    @router.get(path, summary=f"Roles and actions on the {kind} topic (namespace grants included)")
    async def topic_permissions(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> dict[str, list[str]]:
        auth = await service.namespace_permissions(tenant, namespace)
        return auth.topic_permissions(full_name(tenant, namespace, topic))

    @router.post(f"{path}/{{role}}", status_code=204, summary=f"Grant actions on the {kind} topic")
    async def grant_topic(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        role: str,
        actions: Annotated[list[str], Body()],
    ) -> Response:
        name = full_name(tenant, namespace, topic)
        grant = (check_role(role), parse_actions(actions))
        await service.update_permissions(tenant, namespace, lambda a: a.grant_topic(name, *grant))
        return Response(status_code=204)

    @router.delete(f"{path}/{{role}}", status_code=204, summary="Revoke a role's topic grant")
    async def revoke_topic(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, role: str
    ) -> Response:
        name = full_name(tenant, namespace, topic)
        current = await service.namespace_permissions(tenant, namespace)
        if role not in current.destination_auth.get(name, {}):
            raise PreconditionFailed("Permissions are not set at the topic level")
        await service.update_permissions(tenant, namespace, lambda a: a.revoke_topic(name, role))
        return Response(status_code=204)


__all__ = ["permissions_router"]
