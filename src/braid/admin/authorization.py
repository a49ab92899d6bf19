"""Authorization of admin REST requests: what each path needs, checked before any handler runs.

One ASGI middleware, inside :class:`~braid.admin.authentication.AuthenticationMiddleware` (which
put the caller's identity in the request scope), decides every request from its method and path
with :func:`required_access` - one table for the whole API, so no endpoint can be left out - and
asks the broker's :class:`~braid.broker.authorization.AuthorizationService`. The rules are
Pulsar's:

* super users only: clusters (but listing them), tenants (create, update, delete, list),
  brokers, bookies, storage clusters (PIP-470, with the internal ``promote-cursor`` call), the
  internal Segments API, the console, and any path this table does not know (fail closed);
* tenant admins (and super users): reading their tenant, everything about its namespaces
  (policies, permissions, create, delete) and topics (create, delete, terminate, compaction,
  topic policies, permissions, schema changes, scalable-topic splits and merges);
* a topic's *lookup* (produce or consume grant): HTTP lookup, partitioned metadata, stats,
  schema reads, a scalable topic's metadata; *consume* (with the subscription's own role
  list): subscription operations; listing a namespace's topics: a consume grant on the
  namespace;
* anyone authenticated: the OpenAPI document and ``GET /admin/v2/clusters``.

A refusal is ``403 {"reason": ...}`` with Pulsar's wording, decided from the names in the path
and the tenant's and namespace's policies only - never from whether the topic or the namespace
exists. A topic path in a tenant that does not exist is ``404 "Tenant does not exist"``, as
Pulsar answers it (ADR 0054).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from braid.admin.authentication import ASGIApp, Receive, Scope, Send
from braid.admin.errors import reason
from braid.broker.authorization import (
    GET_TOPICS_REFUSED,
    SUPER_USER_REQUIRED,
    TENANT_ADMIN_REQUIRED,
    AuthorizationService,
    TenantMissing,
)
from braid.core.names import InvalidTopicName, NamespaceName, TopicDomain, TopicName
from braid.security.api import Identity
from braid.security.authorization import TopicOperation

log = logging.getLogger(__name__)


class Need(enum.Enum):
    """What a request needs."""

    ANY = "any"  # any authenticated caller
    SUPER_USER = "super-user"
    TENANT_ADMIN = "tenant-admin"
    NAMESPACE_TOPICS = "namespace-topics"
    TOPIC = "topic"


@dataclass(frozen=True)
class Access:
    """The requirement of one request."""

    need: Need
    tenant: str = ""
    namespace: str = ""
    topic: TopicName | None = None
    operation: TopicOperation = TopicOperation.ADMIN
    subscription: str | None = None


_ANY = Access(Need.ANY)
_SUPER = Access(Need.SUPER_USER)
_DOCS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
_TOPIC_DOMAINS = {
    "persistent": TopicDomain.PERSISTENT,
    "non-persistent": TopicDomain.NON_PERSISTENT,
    "scalable": TopicDomain.TOPIC,
    "schemas": TopicDomain.PERSISTENT,
}
#: Reads of a topic's sub-resources that a lookup grant allows.
_LOOKUP_READS = frozenset(
    {
        "partitions",
        "stats",
        "internalStats",
        "partitioned-stats",
        "partitioned-internalStats",
        "lastMessageId",
        "positions",
        "autoScaleDecisions",
        "schema",
        "schemas",
    }
)


def _topic_access(method: str, kind: str, parts: list[str]) -> Access:
    """``parts`` = tenant, namespace, topic, then the sub-resource."""
    tenant, namespace, local = parts[0], parts[1], parts[2]
    rest = parts[3:]
    try:
        topic = TopicName(_TOPIC_DOMAINS[kind], tenant, namespace, local)
    except InvalidTopicName:
        return Access(Need.TENANT_ADMIN, tenant)
    read = method in ("GET", "HEAD")
    if kind == "schemas":
        operation = TopicOperation.LOOKUP if read else TopicOperation.ADMIN
        return Access(Need.TOPIC, tenant, namespace, topic, operation)
    if not rest:
        operation = TopicOperation.LOOKUP if read else TopicOperation.ADMIN
        return Access(Need.TOPIC, tenant, namespace, topic, operation)
    if rest[0] in ("subscription", "subscriptions") and len(rest) >= 2:
        return Access(Need.TOPIC, tenant, namespace, topic, TopicOperation.CONSUME, rest[1])
    if rest[0] == "subscriptions" and read:
        return Access(Need.TOPIC, tenant, namespace, topic, TopicOperation.CONSUME)
    if read and rest[0] in _LOOKUP_READS:
        return Access(Need.TOPIC, tenant, namespace, topic, TopicOperation.LOOKUP)
    return Access(Need.TOPIC, tenant, namespace, topic, TopicOperation.ADMIN)


def required_access(method: str, path: str) -> Access:
    """What ``method path`` needs (paths this table does not know need a super user)."""
    if path in _DOCS:
        return _ANY
    parts = [p for p in path.split("/") if p]
    if parts[:3] == ["lookup", "v2", "topic"] and len(parts) >= 7:
        kind = "persistent" if parts[3] != "topic" else "scalable"
        return _topic_access("GET", kind, parts[4:7])
    if parts[:2] != ["admin", "v2"] or len(parts) < 3:
        return _SUPER
    kind, args = parts[2], parts[3:]
    read = method in ("GET", "HEAD")
    if kind == "clusters":
        return _ANY if read and not args else _SUPER
    if kind == "tenants":
        return Access(Need.TENANT_ADMIN, args[0]) if read and len(args) == 1 else _SUPER
    if kind == "namespaces" and args:
        if len(args) == 3 and args[2] == "topics" and read:
            return Access(Need.NAMESPACE_TOPICS, args[0], args[1])
        return Access(Need.TENANT_ADMIN, args[0], args[1] if len(args) > 1 else "")
    if kind in _TOPIC_DOMAINS and len(args) >= 2:
        if len(args) == 2 or (len(args) == 3 and args[2] == "partitioned" and kind != "schemas"):
            if read:
                return Access(Need.NAMESPACE_TOPICS, args[0], args[1])
            return Access(Need.TENANT_ADMIN, args[0], args[1])
        return _topic_access(method, kind, args)
    return _SUPER


class AuthorizationMiddleware:
    """Refuses admin requests the caller's role may not make (when authorization is on)."""

    def __init__(self, app: ASGIApp, *, service: AuthorizationService) -> None:
        self._app = app
        self._service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not self._service.enabled:
            await self._app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in ("/health", "/metrics"):
            await self._app(scope, receive, send)
            return
        identity = scope.get("state", {}).get("identity")
        role = identity.role if isinstance(identity, Identity) else None
        method = scope.get("method", "GET")
        try:
            refusal = await self._refusal(role, required_access(method, path))
        except TenantMissing as missing:
            log.info("refusing %s %s to role %r: %s", method, path, role, missing)
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await reason(404, str(missing))(scope, receive, send)
            return
        if refusal is None:
            await self._app(scope, receive, send)
            return
        log.info("refusing %s %s to role %r: %s", method, path, role, refusal)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await reason(403, refusal, category="Authorization")(scope, receive, send)

    async def _refusal(self, role: str | None, access: Access) -> str | None:
        service = self._service
        if access.need is Need.ANY or service.is_super_user(role):
            return None
        if access.need is Need.SUPER_USER:
            return SUPER_USER_REQUIRED
        if access.need is Need.TENANT_ADMIN:
            ok = await service.is_tenant_admin(role, access.tenant)
            return None if ok else TENANT_ADMIN_REQUIRED
        if access.need is Need.NAMESPACE_TOPICS:
            try:
                namespace = NamespaceName(access.tenant, access.namespace)
            except InvalidTopicName:
                return GET_TOPICS_REFUSED
            ok = await service.allows_namespace_topics(role, namespace)
            return None if ok else GET_TOPICS_REFUSED
        assert access.topic is not None
        ok = await service.allows_topic(role, access.operation, access.topic, access.subscription)
        if ok:
            return None
        return (
            f"Unauthorized to validateTopicOperation for operation [{access.operation.name}] "
            f"on topic [{access.topic}]"
        )


__all__ = ["Access", "AuthorizationMiddleware", "Need", "required_access"]
